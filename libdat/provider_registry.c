/* The dynamic registry (provider_registry.h). */
#include "config.h"

#include "libdat/provider_registry.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include <dat2/dat_registry.h>

struct registration {
        bool used;
        DAT_PROVIDER_INFO info;
        const DAT_PROVIDER *provider;
        unsigned open_ias;
};

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static struct registration table[PROVIDER_REGISTRY_MAX];

const DAT_PROVIDER *provider_registry_known_list[PROVIDER_KNOWN_MAX];
unsigned provider_registry_n_known;

/* Under lock. */
static struct registration *find_locked(const char *name)
{
        for (unsigned i = 0; i < PROVIDER_REGISTRY_MAX; i++)
                if (table[i].used && strcmp(table[i].info.ia_name, name) == 0)
                        return &table[i];
        return NULL;
}

/* Under lock: false when PROVIDER_KNOWN_MAX distinct providers came
 * already (provider_registry.h). */
static bool remember_locked(const DAT_PROVIDER *provider)
{
        unsigned n = provider_registry_n_known;

        if (provider_registry_known(provider))
                return true;
        if (n == PROVIDER_KNOWN_MAX)
                return false;
        provider_registry_known_list[n] = provider;
        __atomic_store_n(&provider_registry_n_known, n + 1, __ATOMIC_RELEASE);
        return true;
}

static bool name_is_valid(const DAT_PROVIDER_INFO *info)
{
        size_t len = strnlen(info->ia_name, sizeof(info->ia_name));

        return len > 0 && len < sizeof(info->ia_name);
}

/* The arguments' rules of both calls. */
static DAT_RETURN check_args(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info)
{
        if (!provider)
                return DAT_ERR_ARG(1);
        if (!info || !name_is_valid(info))
                return DAT_ERR_ARG(2);
        return DAT_SUCCESS;
}

DAT_RETURN provider_registry_add(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info)
{
        struct registration *free_slot = NULL;
        DAT_RETURN ret = check_args(provider, info);

        if (ret != DAT_SUCCESS)
                return ret;
        pthread_mutex_lock(&lock);
        for (unsigned i = 0; i < PROVIDER_REGISTRY_MAX && !free_slot; i++)
                if (!table[i].used)
                        free_slot = &table[i];
        if (find_locked(info->ia_name))
                ret = DAT_ERR(DAT_PROVIDER_ALREADY_REGISTERED, DAT_NO_SUBTYPE);
        else if (!free_slot || !remember_locked(provider))
                ret = DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        else
                *free_slot = (struct registration){ .used = true, .info = *info,
                                                    .provider = provider };
        pthread_mutex_unlock(&lock);
        dat_trace("dat_registry_add_provider(\"%.*s\"): 0x%08x", (int)sizeof(info->ia_name),
                  info->ia_name, ret);
        return ret;
}

DAT_RETURN provider_registry_remove(const DAT_PROVIDER *provider, const DAT_PROVIDER_INFO *info)
{
        DAT_RETURN ret = check_args(provider, info);
        struct registration *r;

        if (ret != DAT_SUCCESS)
                return ret;
        pthread_mutex_lock(&lock);
        r = find_locked(info->ia_name);
        if (!r || r->provider != provider)
                ret = DAT_ERR(DAT_INVALID_PARAMETER, DAT_NO_SUBTYPE);
        else if (r->open_ias > 0)
                ret = DAT_ERR(DAT_PROVIDER_IN_USE, DAT_NO_SUBTYPE);
        else
                r->used = false;
        pthread_mutex_unlock(&lock);
        dat_trace("dat_registry_remove_provider(\"%.*s\"): 0x%08x", (int)sizeof(info->ia_name),
                  info->ia_name, ret);
        return ret;
}

DAT_RETURN provider_registry_acquire(const char *name, unsigned major, unsigned minor,
                                     bool thread_safe, const DAT_PROVIDER **provider, char *why,
                                     size_t why_len)
{
        DAT_RETURN ret = DAT_SUCCESS;
        struct registration *r;

        pthread_mutex_lock(&lock);
        r = find_locked(name);
        if (!r) {
                snprintf(why, why_len, "no provider registered \"%s\"", name);
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        } else if (r->info.dapl_version_major != major) {
                snprintf(why, why_len, "its provider registered API %u.%u, not major version %u",
                         r->info.dapl_version_major, r->info.dapl_version_minor, major);
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_MAJOR_NOT_FOUND);
        } else if (r->info.dapl_version_minor < minor) {
                snprintf(why, why_len, "its provider registered API %u.%u, older than %u.%u",
                         r->info.dapl_version_major, r->info.dapl_version_minor, major, minor);
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_MINOR_NOT_FOUND);
        } else if (thread_safe && !r->info.is_thread_safe) {
                snprintf(why, why_len, "thread safety asked for, but its provider registered "
                                       "as not thread safe");
                ret = DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND);
        } else {
                r->open_ias++;
                *provider = r->provider;
        }
        pthread_mutex_unlock(&lock);
        return ret;
}

void provider_registry_release(const char *name)
{
        struct registration *r;

        pthread_mutex_lock(&lock);
        r = find_locked(name);
        if (r && r->open_ias > 0)
                r->open_ias--;
        pthread_mutex_unlock(&lock);
}

DAT_RETURN provider_library_init(const struct dat_conf_entry *entry, char *why, size_t why_len)
{
        DAT_PROVIDER_INFO info = { 0 };
        DAT_PROVIDER_INIT_FUNC init;
        void *lib;

        /* Kept loaded for good (provider_registry.h): RTLD_NODELETE says so
         * to whoever else dlcloses it. */
        lib = dlopen(entry->lib_path, RTLD_NOW | RTLD_LOCAL | RTLD_NODELETE);
        if (!lib) {
                snprintf(why, why_len, "cannot load provider library %s: %s", entry->lib_path,
                         dlerror());
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
        *(void **)&init = dlsym(lib, DAT_PROVIDER_INIT_FUNC_STR);
        if (!init) {
                snprintf(why, why_len, "provider library %s has no %s", entry->lib_path,
                         DAT_PROVIDER_INIT_FUNC_STR);
                dlclose(lib);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
        snprintf(info.ia_name, sizeof(info.ia_name), "%s", entry->ia_name);
        info.dapl_version_major = entry->api_major;
        info.dapl_version_minor = entry->api_minor;
        info.is_thread_safe = entry->thread_safe ? DAT_TRUE : DAT_FALSE;
        dat_trace("dat_ia_open(\"%s\"): calling %s of %s with \"%s\"", entry->ia_name,
                  DAT_PROVIDER_INIT_FUNC_STR, entry->lib_path, entry->ia_params);
        init(&info, entry->ia_params);
        return DAT_SUCCESS;
}
