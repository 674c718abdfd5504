/* dat_registry.h: the interface between the registry (libdat2.so.2) and
 * the providers it loads.
 *
 * A provider library exports dat_provider_init()/dat_provider_fini(); the
 * registry calls init with the dat.conf entry it matched, and the provider
 * answers by registering its DAT_PROVIDER table under that entry. */
#ifndef _DAT_REGISTRY_H_
#define _DAT_REGISTRY_H_

#include <dat2/udat.h>
#include <dat2/udat_redirection.h>

#ifdef __cplusplus
extern "C" {
#endif

extern DAT_RETURN DAT_API dat_registry_add_provider(
        IN const DAT_PROVIDER *provider,
        IN const DAT_PROVIDER_INFO *provider_info);

extern DAT_RETURN DAT_API dat_registry_remove_provider(
        IN const DAT_PROVIDER *provider,
        IN const DAT_PROVIDER_INFO *provider_info);

/* The symbols the registry looks up in a provider library, and their
 * types.  init's second argument is the instance data string of the
 * matching dat.conf line. */
#define DAT_PROVIDER_INIT_FUNC_NAME dat_provider_init
#define DAT_PROVIDER_FINI_FUNC_NAME dat_provider_fini
#define DAT_PROVIDER_INIT_FUNC_STR "dat_provider_init"
#define DAT_PROVIDER_FINI_FUNC_STR "dat_provider_fini"

typedef void (DAT_API *DAT_PROVIDER_INIT_FUNC)(
        IN const DAT_PROVIDER_INFO *provider_info,
        IN const char *instance_data);

typedef void (DAT_API *DAT_PROVIDER_FINI_FUNC)(
        IN const DAT_PROVIDER_INFO *provider_info);

/* High availability: how two providers relate. */
typedef enum dat_ha_relationship {
        DAT_HA_FALSE,                   /* not related */
        DAT_HA_TRUE,                    /* failover partners */
        DAT_HA_UNKNOWN,
        DAT_HA_CONFLICTING,
        DAT_HA_EXTENSION_BASE
} DAT_HA_RELATIONSHIP;

extern DAT_RETURN DAT_API dat_registry_providers_related(
        IN const DAT_NAME_PTR provider_1,
        IN const DAT_NAME_PTR provider_2,
        OUT DAT_HA_RELATIONSHIP *relationship);

#ifdef __cplusplus
}
#endif

#endif /* _DAT_REGISTRY_H_ */
