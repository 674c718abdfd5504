/* Calls on other providers' objects (foreign.h). */
#include "config.h"

#include "libdat/foreign.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

/* The open ones, to find one by the provider's own handle too; how many of
 * them are being closed. */
static pthread_mutex_t list_lock = PTHREAD_MUTEX_INITIALIZER;
static struct foreign_ia *open_ias;
static unsigned n_closing;

/* Held across a provider library's dat_provider_init. */
static pthread_mutex_t init_lock = PTHREAD_MUTEX_INITIALIZER;

static void foreign_ia_destroy(struct dat_object *obj);

static const struct dat_object_ops foreign_ia_ops = {
        .type = DAT_HANDLE_TYPE_FOREIGN_IA,
        .name = "IA of another provider",
        .invalid_subtype = DAT_INVALID_HANDLE_IA,
        .destroy = foreign_ia_destroy,
};

static struct foreign_ia *foreign_ia_lookup(DAT_HANDLE h)
{
        struct dat_object *o = dat_object_lookup(h, DAT_HANDLE_TYPE_FOREIGN_IA);

        return o ? dat_container_of(o, struct foreign_ia, obj) : NULL;
}

bool foreign_ia_slow(DAT_HANDLE h, const DAT_PROVIDER **provider, DAT_IA_HANDLE *provider_ia)
{
        struct foreign_ia *f;

        if (!handle_is_libdats(h)) {
                *provider = foreign_provider(h);
                *provider_ia = h;
                return *provider != NULL && !foreign_ia_closing(h);
        }
        f = foreign_ia_lookup(h);
        /* One being closed is the provider's no more (a call racing the
         * close is the consumer's fault, dat_ia_close(3DAT); this keeps
         * the provider's closed IA out of such a call's way). */
        if (!f || __atomic_load_n(&f->closing, __ATOMIC_ACQUIRE))
                return false;
        *provider = f->provider;
        *provider_ia = f->ia;
        return true;
}

DAT_RETURN foreign_args_check(const DAT_PROVIDER *p, int n, ...)
{
        DAT_RETURN ret = DAT_SUCCESS;
        va_list ap;

        va_start(ap, n);
        for (int i = 0; i < n && ret == DAT_SUCCESS; i++) {
                DAT_HANDLE h = va_arg(ap, DAT_HANDLE);
                DAT_RETURN_SUBTYPE subtype = va_arg(ap, DAT_RETURN_SUBTYPE);

                if (h && foreign_provider(h) != p)
                        ret = DAT_ERR(DAT_INVALID_HANDLE, subtype);
        }
        va_end(ap);
        return ret;
}

bool foreign_ia_closing(DAT_IA_HANDLE provider_ia)
{
        bool closing = false;

        if (__atomic_load_n(&n_closing, __ATOMIC_ACQUIRE) == 0)
                return false;
        pthread_mutex_lock(&list_lock);
        for (struct foreign_ia *f = open_ias; f && !closing; f = f->next)
                closing = f->ia == provider_ia && f->closing;
        pthread_mutex_unlock(&list_lock);
        return closing;
}

/* Whether h, a provider's own handle, is one of its IAs (as far as it can
 * tell: a provider without get_handle_type is taken at its word). */
static bool is_provider_ia(const DAT_PROVIDER *p, DAT_HANDLE h)
{
        DAT_HANDLE_TYPE type;

        return !p->get_handle_type_func || (p->get_handle_type_func(h, &type) == DAT_SUCCESS &&
                                            type == DAT_HANDLE_TYPE_IA);
}

bool foreign_ia_map(DAT_IA_HANDLE h, DAT_IA_HANDLE *provider_ia)
{
        const DAT_PROVIDER *p;

        return foreign_ia(h, &p, provider_ia) && (handle_is_libdats(h) || is_provider_ia(p, h));
}

/* Reads a handle's first word without faulting on memory that is not
 * mapped (a process reading itself needs no privilege): for the one
 * place libdat reads a consumer's value that no provider was given yet. */
static const DAT_PROVIDER *provider_read_safely(DAT_HANDLE h)
{
        const DAT_PROVIDER *p = NULL;
        struct iovec local = { &p, sizeof(p) }, remote = { h, sizeof(p) };

        if (!provider_registry_used() || !foreign_address_plausible(h) ||
            process_vm_readv(getpid(), &local, 1, &remote, 1, 0) != (ssize_t)sizeof(p))
                return NULL;
        return provider_registry_known(p) ? p : NULL;
}

/* Only for a foreign_ia that never reached the consumer, or is closed. */
static void foreign_ia_destroy(struct dat_object *obj)
{
        struct foreign_ia *f = dat_container_of(obj, struct foreign_ia, obj);

        dat_object_fini(&f->obj);
        free(f);
}

DAT_RETURN foreign_ia_open(const char *name, const struct dat_conf_entry *entry,
                           DAT_COUNT async_evd_qlen, DAT_EVD_HANDLE *async_evd_handle,
                           DAT_IA_HANDLE *ia_handle, DAT_UINT32 major, DAT_UINT32 minor,
                           bool thread_safe, bool *registered)
{
        const DAT_PROVIDER *p;
        struct foreign_ia *f;
        char why[256];
        DAT_RETURN ret;

        *registered = false;
        /* dat_provider_init(3DAT): the library dat.conf names registers the
         * name.  Once: a second init of a name registered meanwhile fails
         * in the provider, and DAPL's providers then free the provider the
         * first one registered.  (Later opens find the name registered
         * before dat.conf is read, and come here without an entry.) */
        if (entry)
                pthread_mutex_lock(&init_lock);
        ret = provider_registry_acquire(name, major, minor, thread_safe, &p, why, sizeof(why));
        if (entry && DAT_GET_SUBTYPE(ret) == DAT_NAME_NOT_REGISTERED) {
                ret = provider_library_init(entry, why, sizeof(why));
                if (ret == DAT_SUCCESS)
                        ret = provider_registry_acquire(name, major, minor, thread_safe, &p, why,
                                                        sizeof(why));
        }
        if (entry)
                pthread_mutex_unlock(&init_lock);
        if (ret != DAT_SUCCESS) {
                dat_trace("dat_ia_open(\"%s\"): %s", name, why);
                return ret;
        }
        *registered = true;
        /* An async EVD passed in must be the provider's own: it would read
         * libdat's or a third provider's as its object.  Read safely: the
         * consumer's value reaches no provider before this look. */
        if (*async_evd_handle != DAT_HANDLE_NULL && *async_evd_handle != DAT_EVD_ASYNC_EXISTS &&
            provider_read_safely(*async_evd_handle) != p) {
                dat_trace("dat_ia_open(\"%s\"): the async EVD passed in is not its provider's",
                          name);
                ret = DAT_ERR(DAT_INVALID_HANDLE, DAT_INVALID_HANDLE_EVD_ASYNC);
                goto release;
        }
        f = calloc(1, sizeof(*f));
        if (!f) {
                ret = DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
                goto release;
        }
        f->provider = p;
        snprintf(f->name, sizeof(f->name), "%s", name);
        ret = FOREIGN_CALL(p, ia_open_func, (DAT_NAME_PTR)name, async_evd_qlen, async_evd_handle,
                           &f->ia);
        if (ret != DAT_SUCCESS) {
                dat_trace("dat_ia_open(\"%s\"): its provider's ia_open answered 0x%08x", name, ret);
                free(f);
                goto release;
        }
        ret = dat_object_init(&f->obj, &foreign_ia_ops, NULL);
        if (ret != DAT_SUCCESS) {
                (void)FOREIGN_CALL(p, ia_close_func, f->ia, DAT_CLOSE_ABRUPT_FLAG);
                free(f);
                goto release;
        }
        pthread_mutex_lock(&list_lock);
        f->next = open_ias;
        open_ias = f;
        pthread_mutex_unlock(&list_lock);
        *ia_handle = f->obj.handle;
        dat_trace("dat_ia_open(\"%s\"): opened through its registered provider", name);
        return DAT_SUCCESS;
release:
        provider_registry_release(name);
        return ret;
}

/* The open IA h names (libdat's handle or the provider's own), now marked
 * closing; NULL when none, with *busy when another thread closes it. */
static struct foreign_ia *start_closing(DAT_IA_HANDLE h, bool *busy)
{
        struct foreign_ia *f;

        pthread_mutex_lock(&list_lock);
        for (f = open_ias; f; f = f->next)
                if (f->obj.handle == h || f->ia == h)
                        break;
        *busy = f && f->closing;
        if (*busy)
                f = NULL;
        if (f) {
                __atomic_store_n(&f->closing, true, __ATOMIC_RELEASE);
                __atomic_store_n(&n_closing, n_closing + 1, __ATOMIC_RELEASE);
        }
        pthread_mutex_unlock(&list_lock);
        return f;
}

DAT_RETURN foreign_ia_close(DAT_IA_HANDLE h, DAT_CLOSE_FLAGS close_flags)
{
        const DAT_PROVIDER *p;
        struct foreign_ia **pp, *f;
        DAT_RETURN ret;
        bool busy;

        f = start_closing(h, &busy);
        if (!f) {
                /* An IA of the provider's that dat_ia_open did not open
                 * (the application opened it through the provider's table
                 * itself) is the provider's to close; one another thread
                 * closes is nobody's. */
                p = busy || handle_is_libdats(h) ? NULL : foreign_provider(h);
                return p && is_provider_ia(p, h) ? FOREIGN_CALL(p, ia_close_func, h, close_flags)
                                                 : dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        }
        ret = FOREIGN_CALL(f->provider, ia_close_func, f->ia, close_flags);
        pthread_mutex_lock(&list_lock);
        __atomic_store_n(&n_closing, n_closing - 1, __ATOMIC_RELEASE);
        if (ret != DAT_SUCCESS) {
                __atomic_store_n(&f->closing, false, __ATOMIC_RELEASE);
        } else {
                for (pp = &open_ias; *pp != f; pp = &(*pp)->next)
                        ;
                *pp = f->next;
        }
        pthread_mutex_unlock(&list_lock);
        if (ret != DAT_SUCCESS)
                return ret;
        provider_registry_release(f->name);
        foreign_ia_destroy(&f->obj);
        return DAT_SUCCESS;
}
