/* udat_config.h: how this build of the user-space DAT API is configured.
 *
 * The three settings below are the ones Debian's libdapl-dev ships with, so a
 * program built against these headers asks libdat2.so.2 for exactly what it
 * would have asked libdapl's libdat2.so.2 for. */
#ifndef _UDAT_CONFIG_H_
#define _UDAT_CONFIG_H_

/* The API version dat_ia_open() hands to the registry (dat_ia_open(3DAT)):
 * a provider is picked only if it implements this major version. */
#define DAT_VERSION_MAJOR 2
#define DAT_VERSION_MINOR 0

/* What dat_ia_open() asks for as "thread safe".  Pinned (not overridable)
 * like the reference build: consumers do not ask for a thread-safe provider. */
#define DAT_THREADSAFE DAT_FALSE

/* The DAT 2.0 extension interface (dat_extension_op() and the
 * *_EXTENSION_BASE values) is part of the ABI.  The headers test it with
 * #ifdef, so any definition, even 0, turns it on. */
#ifndef DAT_EXTENSIONS
#define DAT_EXTENSIONS 1
#endif

#endif /* _UDAT_CONFIG_H_ */
