/* udat_vendor_specific.h: where vendor additions to the user-space API would
 * go; udat.h includes it before the provider attributes.  datd has none. */
#ifndef _UDAT_VENDOR_SPECIFIC_H_
#define _UDAT_VENDOR_SPECIFIC_H_

#include <dat2/dat_vendor_specific.h>

#endif /* _UDAT_VENDOR_SPECIFIC_H_ */
