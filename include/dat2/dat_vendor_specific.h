/* dat_vendor_specific.h: where vendor additions to the transport-independent
 * API would go.  datd has none; the file exists because consumers and
 * udat_vendor_specific.h include it. */
#ifndef _DAT_VENDOR_SPECIFIC_H_
#define _DAT_VENDOR_SPECIFIC_H_

#endif /* _DAT_VENDOR_SPECIFIC_H_ */
