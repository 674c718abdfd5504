/* The dynamic registry: the providers of other libraries (Debian's
 * libdaplofa.so.2, a consumer's own) that declared themselves with
 * dat_registry_add_provider(3DAT), and the loading of such a library when
 * dat.conf names it for an IA (dat_provider_init(3DAT)).
 *
 * dat_ia_open looks here first: an IA name registered here is opened
 * through its provider's table (foreign.h), whatever dat.conf says of it
 * (the registration is the more recent word); otherwise dat.conf decides,
 * and a name of this library's own (entries naming libdat2.so) is served
 * through datd.
 *
 * Decisions where the man pages leave room:
 * - one registration per IA name (DAT_PROVIDER_ALREADY_REGISTERED for a
 *   second), PROVIDER_REGISTRY_MAX names at once (then
 *   DAT_INSUFFICIENT_RESOURCES);
 * - removal names the IA (provider_info->ia_name) and must pass the provider
 *   that registered it; an unknown name or another provider is
 *   DAT_INVALID_PARAMETER (the man page's "Provider was not found"), a name
 *   with open IAs DAT_PROVIDER_IN_USE;
 * - a provider library is loaded once (dlopen) and never unloaded: its
 *   dat_provider_init is called whenever dat_ia_open needs its name and the
 *   name is not registered (the first time, and again after the provider
 *   removed itself); dat_provider_fini is not called, since the library
 *   stays loaded to the end of the process.
 *
 * Thread safety: one mutex over the table; a provider's own calls
 * (dat_provider_init, ia_open_func) run outside it, so that they may call
 * dat_registry_add_provider. */
#ifndef DATD_LIBDAT_PROVIDER_REGISTRY_H
#define DATD_LIBDAT_PROVIDER_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include <dat2/dat_registry.h>

#include "libdat/libdat.h"
#include "libdat/registry.h"

#define PROVIDER_REGISTRY_MAX 64

/* dat_registry_add_provider(3DAT), dat_registry_remove_provider(3DAT). */
DAT_RETURN provider_registry_add(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info);
DAT_RETURN provider_registry_remove(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info);

/* The provider registered for name, if its registration matches the
 * version and thread safety asked (the rules of dat.conf entries,
 * registry.h's dat_conf_find); counts one more IA open on it, which
 * provider_registry_release gives back.  DAT_SUCCESS, or
 * DAT_PROVIDER_NOT_FOUND with the subtype and the reason in why. */
DAT_RETURN provider_registry_acquire(const char *name, unsigned major, unsigned minor,
                                     bool thread_safe, const DAT_PROVIDER **provider, char *why,
                                     size_t why_len);
void provider_registry_release(const char *name);

/* Loads the library a dat.conf entry of another provider names and calls
 * its dat_provider_init with the entry (instance data: its ia_params).
 * DAT_SUCCESS once init returned (whether it registered is the
 * registry's to say), DAT_PROVIDER_NOT_FOUND when the library cannot be
 * loaded or has no dat_provider_init (why says which). */
DAT_RETURN provider_library_init(const struct dat_conf_entry *entry, char *why, size_t why_len);


/* Every provider that ever registered, never shrinking (a removed
 * provider's objects stay its own): appended under the registry's lock,
 * the count published last.  A provider library that makes a new
 * DAT_PROVIDER at each dat_provider_init (DAPL's) takes one more slot at
 * each removal and open again; past PROVIDER_KNOWN_MAX distinct ones,
 * dat_registry_add_provider answers DAT_INSUFFICIENT_RESOURCES. */
#define PROVIDER_KNOWN_MAX 1024
extern const DAT_PROVIDER *provider_registry_known_list[PROVIDER_KNOWN_MAX];
extern unsigned provider_registry_n_known;

/* True once any provider registered in this process: until then no
 * handle can be another provider's, and the entry points skip the look. */
static inline bool provider_registry_used(void)
{
        return __builtin_expect(__atomic_load_n(&provider_registry_n_known, __ATOMIC_RELAXED) != 0, 0);
}

/* Whether provider ever registered here (a handle whose first word names
 * it is that provider's object).  Lock-free, and inline: an entry point
 * that makes no call before it knows the handle is not another provider's
 * needs no registers saved for its own path (foreign.h). */
static inline bool provider_registry_known(const DAT_PROVIDER *provider)
{
        unsigned n = __atomic_load_n(&provider_registry_n_known, __ATOMIC_ACQUIRE);

        for (unsigned i = 0; i < n; i++)
                if (provider_registry_known_list[i] == provider)
                        return true;
        return false;
}

#endif
