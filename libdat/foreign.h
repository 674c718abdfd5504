/* Calls on other providers' objects: what libdat's entry points do with a
 * handle that is not libdat's own but an object of a provider in the
 * dynamic registry (provider_registry.h).
 *
 * Such a provider's handles are its own pointers, whose first word is its
 * DAT_PROVIDER (the DAT 2.0 redirection convention, DAT_HANDLE_TO_PROVIDER
 * in <dat2/dat_redirection.h>); each entry point hands them to the
 * provider's function for it, as Debian's libdat2 does.  IA handles are
 * the exception: dat_ia_open gives the consumer a libdat handle of its own
 * for another provider's IA (a struct foreign_ia), which the entry points
 * taking an IA turn back into the provider's (dats_get_ia_handle answers
 * the same), and the provider's own IA handle, as its events and queries
 * give it, is taken too.
 *
 * libdat's handles carry a tag no pointer has on a 64-bit machine
 * (handle_table.h; a 32-bit process could map that range), so the
 * look costs libdat's own calls one test of a flag that stays false until
 * a provider first registers.  With one registered, a handle that is
 * neither libdat's nor NULL is read as another provider's object: its
 * first word must name a provider that registered here, or the handle is
 * invalid as before; a pointer to freed or unmapped memory is, as with
 * every DAT registry, the provider's to survive.  Handles of different
 * providers in one call are refused (DAT_INVALID_HANDLE): another
 * provider's object where libdat looks it up, and libdat's own or a third
 * provider's where the call goes to a provider (FOREIGN_DISPATCH_GUARDED);
 * handles inside dat_extension_op's variable arguments go as they are.
 * A value that cannot be an object's address (NULL, DAT_EVD_ASYNC_EXISTS,
 * small or unaligned numbers, libdat's tagged handles) is never read. */
#ifndef DATD_LIBDAT_FOREIGN_H
#define DATD_LIBDAT_FOREIGN_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>

#include "libdat/handle.h"
#include "libdat/libdat.h"
#include "libdat/provider_registry.h"

/* Another provider's IA as the consumer holds it. */
struct foreign_ia {
        struct dat_object obj;
        const DAT_PROVIDER *provider;
        DAT_IA_HANDLE ia;                       /* the provider's own handle */
        char name[DAT_NAME_MAX_LENGTH];         /* as opened: released at close */
        struct foreign_ia *next;                /* foreign.c's list, under its lock */
        bool closing;                           /* a dat_ia_close is at the provider
                                                   (atomic: foreign_ia reads it) */
};

static inline bool handle_is_libdats(DAT_HANDLE h)
{
        return ((uintptr_t)h >> HANDLE_TAG_SHIFT) == HANDLE_TAG;
}

bool foreign_ia_slow(DAT_HANDLE h, const DAT_PROVIDER **provider, DAT_IA_HANDLE *provider_ia);

/* Whether a provider's own IA handle is that of an IA being closed
 * (foreign.c; a list walk only while one is). */
bool foreign_ia_closing(DAT_IA_HANDLE provider_ia);

/* The lowest address a process can map (Linux's default vm.mmap_min_addr):
 * below it, and off a pointer's alignment, no object of any provider is. */
#define FOREIGN_MIN_ADDRESS ((uintptr_t)65536)

/* Whether h could be a pointer to another provider's object at all, before
 * its first word is read: aligned, above the lowest mappable address and
 * in the user half of the address space.  DAT_EVD_ASYNC_EXISTS,
 * DAT_EVD_OUT_OF_SCOPE, small integers and libdat's tagged handles are
 * not. */
static inline bool foreign_address_plausible(DAT_HANDLE h)
{
        uintptr_t a = (uintptr_t)h;

        return a >= FOREIGN_MIN_ADDRESS && (a & (sizeof(void *) - 1)) == 0 &&
               (sizeof(uintptr_t) < 8 || (a >> 56) == 0) && !handle_is_libdats(h);
}

/* The provider whose object h is, or NULL (libdat's handle, NULL, or
 * nothing a registered provider owns).  No call: see
 * provider_registry_known. */
static inline const DAT_PROVIDER *foreign_provider(DAT_HANDLE h)
{
        const DAT_PROVIDER *p;

        if (!provider_registry_used() || !foreign_address_plausible(h))
                return NULL;
        /* The redirection convention: the object's first word. */
        p = *(const DAT_PROVIDER *const *)h;
        return provider_registry_known(p) ? p : NULL;
}

/* Whether h is another provider's IA (or, for the generic entry points,
 * any object of it): its provider and the provider's own handle. */
static inline bool foreign_ia(DAT_HANDLE h, const DAT_PROVIDER **provider,
                              DAT_IA_HANDLE *provider_ia)
{
        if (!provider_registry_used() || !h)
                return false;
        return foreign_ia_slow(h, provider, provider_ia);
}

#define FOREIGN_CALL(p, func, ...) \
        ((p)->func ? (p)->func(__VA_ARGS__) : DAT_ERR_NOT_IMPLEMENTED)

/* First statement of an entry point whose first argument h names an
 * object other than an IA: another provider's goes to its func. */
#define FOREIGN_DISPATCH(h, func, ...)                                          \
        do {                                                                    \
                const DAT_PROVIDER *foreign_p_ = foreign_provider(h);           \
                if (foreign_p_)                                                 \
                        return FOREIGN_CALL(foreign_p_, func, __VA_ARGS__);     \
        } while (0)

/* The same where libdat's lookup of h failed, for the entry points of the
 * data path: another provider's object goes to it, anything else is
 * `invalid`.  Nothing is added to libdat's own path (a look before the
 * lookup costs those entry points their registers' saving, since the
 * provider's call must keep the arguments). */
#define FOREIGN_ELSE_INVALID(h, invalid, func, ...)                                     \
        do {                                                                            \
                const DAT_PROVIDER *foreign_p_ = foreign_provider(h);                   \
                return foreign_p_ ? FOREIGN_CALL(foreign_p_, func, __VA_ARGS__) : (invalid); \
        } while (0)

/* The same for an entry point whose first argument h is an IA (or any
 * handle, for the generic ones): the provider's func gets the provider's
 * own handle in h's place, then the rest. */
#define FOREIGN_DISPATCH_IA(h, func, ...)                                               \
        do {                                                                            \
                const DAT_PROVIDER *foreign_p_;                                         \
                DAT_IA_HANDLE foreign_h_;                                               \
                if (foreign_ia(h, &foreign_p_, &foreign_h_))                            \
                        return FOREIGN_CALL(foreign_p_, func, foreign_h_, __VA_ARGS__); \
        } while (0)

/* DAT_SUCCESS, or DAT_INVALID_HANDLE with the subtype of the first of the
 * n (DAT_HANDLE, DAT_RETURN_SUBTYPE) pairs whose handle is neither NULL
 * nor an object of p's: a call handed to provider p carries no handle of
 * libdat's (p would read it as its object, and libdat's handles are no
 * addresses) and none of another provider's. */
DAT_RETURN foreign_args_check(const DAT_PROVIDER *p, int n, ...);

#define FOREIGN_EXPAND(...) __VA_ARGS__

/* FOREIGN_DISPATCH(_IA) for an entry point with more handles: pairs, in
 * parentheses, is foreign_args_check's (n, handle, subtype...). */
#define FOREIGN_DISPATCH_GUARDED(h, pairs, func, ...)                                   \
        do {                                                                            \
                const DAT_PROVIDER *foreign_p_ = foreign_provider(h);                   \
                if (foreign_p_) {                                                       \
                        DAT_RETURN foreign_g_ =                                         \
                                foreign_args_check(foreign_p_, FOREIGN_EXPAND pairs);   \
                        return foreign_g_ != DAT_SUCCESS                                \
                                       ? foreign_g_                                     \
                                       : FOREIGN_CALL(foreign_p_, func, __VA_ARGS__);   \
                }                                                                       \
        } while (0)

#define FOREIGN_DISPATCH_IA_GUARDED(h, pairs, func, ...)                                \
        do {                                                                            \
                const DAT_PROVIDER *foreign_p_;                                         \
                DAT_IA_HANDLE foreign_h_;                                               \
                if (foreign_ia(h, &foreign_p_, &foreign_h_)) {                          \
                        DAT_RETURN foreign_g_ =                                         \
                                foreign_args_check(foreign_p_, FOREIGN_EXPAND pairs);   \
                        return foreign_g_ != DAT_SUCCESS                                \
                                       ? foreign_g_                                     \
                                       : FOREIGN_CALL(foreign_p_, func, foreign_h_,     \
                                                      __VA_ARGS__);                     \
                }                                                                       \
        } while (0)

/* dat_ia_openv for a name the dynamic registry has, loading the library
 * dat.conf names for it first when it is another provider's (entry, may be
 * NULL).  *registered says whether a provider had the name (the answer is
 * then the open's, whatever it is: a provider's own DAT_PROVIDER_NOT_FOUND
 * included); otherwise DAT_PROVIDER_NOT_FOUND and its subtype.  On success
 * *ia_handle is a libdat handle of the IA. */
DAT_RETURN foreign_ia_open(const char *name, const struct dat_conf_entry *entry,
                           DAT_COUNT async_evd_qlen, DAT_EVD_HANDLE *async_evd_handle,
                           DAT_IA_HANDLE *ia_handle, DAT_UINT32 major, DAT_UINT32 minor,
                           bool thread_safe, bool *registered);

/* dat_ia_close of another provider's IA (foreign_ia(h) is true). */
DAT_RETURN foreign_ia_close(DAT_IA_HANDLE h, DAT_CLOSE_FLAGS close_flags);

/* dats_get_ia_handle of one: the provider's own handle.  A provider's own
 * handle must be one of its IAs (its get_handle_type says so, where it has
 * one). */
bool foreign_ia_map(DAT_IA_HANDLE h, DAT_IA_HANDLE *provider_ia);

#endif
