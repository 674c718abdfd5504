/* dat_ia_query(3DAT): every IA and provider attribute, with true values.
 *
 * Where they come from: the IA's identity, address and the client's quota
 * from datd (IA_OPEN reply, kept for the life of the IA: the attributes of an
 * open instance do not change under the consumer); the transport's design
 * limits from transport.c; the rest is what this library implements.  A
 * count is min(transport limit, datd quota).
 *
 * Masks: an attribute structure is filled, completely, when its mask is
 * non-zero ("the Provider can also return values for any of the other
 * attributes"); with a zero mask it is not touched and may be NULL.  A NULL
 * structure with a non-zero mask is DAT_INVALID_PARAMETER.  Mask bits this
 * header does not define are ignored.  async_evd_handle may be NULL: the
 * consumer then does not want it.
 *
 * The DAT IB extensions (extension.c): extension_supported DAT_EXTENSION_IB,
 * extension_version DAT_IB_EXTENSION_VERSION, and, after the IA's own
 * DATD_* provider attributes, the capabilities as DAPL's IB providers name
 * them (dtestx runs an operation only when its attribute reads "TRUE"):
 * DAT_IB_FETCH_AND_ADD, DAT_IB_CMP_AND_SWAP, DAT_IB_IMMED_DATA.  Neither
 * DAT_IB_UD nor DAT_COUNTERS: those are not provided. */
#include "config.h"

#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_ib_extensions.h>

#include "libdat/ia.h"

#include "libdat/foreign.h"

/* Named attributes hand out pointers into the IA, built once at open. */
void ia_query_prepare(struct ia *ia)
{
        memcpy(&ia->address, &ia->info.address, sizeof(ia->address));
        snprintf(ia->mtu_text, sizeof(ia->mtu_text), "%u", ia->info.mtu);
        snprintf(ia->protocol_text, sizeof(ia->protocol_text), "%u", ia->conn.version);

        ia->transport_attr[IA_TRANSPORT_ATTR_TRANSPORT] =
                (DAT_NAMED_ATTR){ "DATD_TRANSPORT", ia->info.transport };
        ia->transport_attr[IA_TRANSPORT_ATTR_DEVICE] =
                (DAT_NAMED_ATTR){ "DATD_DEVICE", ia->info.adapter_name };
        ia->transport_attr[IA_TRANSPORT_ATTR_MTU] = (DAT_NAMED_ATTR){ "DATD_MTU", ia->mtu_text };

        ia->provider_attr[IA_PROVIDER_ATTR_DATD_IA] = (DAT_NAMED_ATTR){ "DATD_IA", ia->info.name };
        ia->provider_attr[IA_PROVIDER_ATTR_DATD_SOCKET] =
                (DAT_NAMED_ATTR){ "DATD_SOCKET", ia->conn.socket_path };
        ia->provider_attr[IA_PROVIDER_ATTR_DATD_VERSION] =
                (DAT_NAMED_ATTR){ "DATD_VERSION", ia->conn.daemon_version };
        ia->provider_attr[IA_PROVIDER_ATTR_PROTOCOL] =
                (DAT_NAMED_ATTR){ "DATD_PROTOCOL_VERSION", ia->protocol_text };
}

/* Counts and sizes from 32/64-bit quotas, clamped to what the DAT types hold. */
static DAT_COUNT as_count(uint64_t v)
{
        return v > INT_MAX ? INT_MAX : (DAT_COUNT)v;
}

static DAT_SEG_LENGTH as_seg_length(uint64_t v)
{
        return v > UINT32_MAX ? UINT32_MAX : (DAT_SEG_LENGTH)v;
}

static void fill_ia_attr(const struct ia *ia, DAT_IA_ATTR *a)
{
        const struct transport_caps *caps = ia->caps;
        const struct datp_ia_info *info = &ia->info;
        DAT_COUNT max_eps = as_count(caps->max_eps < info->max_eps ? caps->max_eps : info->max_eps);

        memset(a, 0, sizeof(*a));
        /* dat_ia_query(3DAT): the adapter name is the name the IA was opened by. */
        snprintf(a->adapter_name, sizeof(a->adapter_name), "%s", ia->name);
        snprintf(a->vendor_name, sizeof(a->vendor_name), "%s", info->vendor_name);
        a->hardware_version_major = info->hw_version_major;
        a->hardware_version_minor = info->hw_version_minor;
        a->firmware_version_major = info->fw_version_major;
        a->firmware_version_minor = info->fw_version_minor;
        a->ia_address_ptr = (DAT_IA_ADDRESS_PTR)&ia->address;
        a->max_eps = max_eps;
        a->max_dto_per_ep = (DAT_COUNT)caps->max_dto_per_ep;
        a->max_rdma_read_per_ep_in = (DAT_COUNT)caps->max_rdma_read_per_ep;
        a->max_rdma_read_per_ep_out = (DAT_COUNT)caps->max_rdma_read_per_ep;
        a->max_evds = as_count(info->max_evds);
        a->max_evd_qlen = (DAT_COUNT)caps->max_evd_qlen;
        a->max_iov_segments_per_dto = (DAT_COUNT)caps->max_iov_segments;
        a->max_lmrs = as_count(info->max_lmrs);
        /* The largest LMR is datd's max_lmr_bytes quota (16 GiB by
         * default), but max_lmr_block_size is a DAT_SEG_LENGTH, 32 bits in
         * the ABI: beyond 4 GiB - 1 it reads 4 GiB - 1, and dat_lmr_create
         * still registers the larger blocks the quota allows (its length
         * is a 64-bit DAT_VLEN; HPC programs register more than 4 GiB).
         * Refusing them to match the attribute would break those programs
         * for the sake of a type that cannot say the true limit.
         * man/libdat2.3 says so. */
        a->max_lmr_block_size = as_seg_length(info->max_lmr_bytes);
        a->max_lmr_virtual_address = transport_max_user_address();
        a->max_pzs = as_count(info->max_pzs);
        a->max_message_size = caps->max_message_size;
        a->max_rdma_size = caps->max_rdma_size;
        a->max_rmrs = as_count(info->max_rmrs);
        a->max_rmr_target_address = transport_max_user_address();
        a->max_srqs = as_count(info->max_srqs);
        a->max_ep_per_srq = max_eps;
        a->max_recv_per_srq = (DAT_COUNT)caps->max_dto_per_ep;
        a->max_iov_segments_per_rdma_read = (DAT_COUNT)caps->max_iov_segments;
        a->max_iov_segments_per_rdma_write = (DAT_COUNT)caps->max_iov_segments;
        a->max_rdma_read_in = as_count((uint64_t)caps->max_rdma_read_per_ep * (uint64_t)max_eps);
        a->max_rdma_read_out = a->max_rdma_read_in;
        /* Software transports track every read they accept: the limits hold. */
        a->max_rdma_read_per_ep_in_guaranteed = DAT_TRUE;
        a->max_rdma_read_per_ep_out_guaranteed = DAT_TRUE;
        /* Zero-based LMR addressing (DAT_VA_TYPE_ZB) is not offered. */
        a->zb_supported = DAT_FALSE;
        a->extension_supported = DAT_EXTENSION_IB;
        a->extension_version = DAT_IB_EXTENSION_VERSION;
        a->num_transport_attr = IA_N_TRANSPORT_ATTR;
        a->transport_attr = (DAT_NAMED_ATTR *)ia->transport_attr;
        a->num_vendor_attr = 0;
        a->vendor_attr = NULL;
}

/* The provider's version, from the package version "major.minor.patch". */
static void provider_version(DAT_UINT32 *major, DAT_UINT32 *minor)
{
        unsigned ma = 0, mi = 0;

        sscanf(PACKAGE_VERSION, "%u.%u", &ma, &mi);
        *major = ma;
        *minor = mi;
}

/* Every event stream can feed every EVD. */
static const DAT_BOOLEAN all_streams_merge[6][6] = {
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
        { DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE, DAT_TRUE },
};

/* The IB extension capabilities, after the IA's own attributes. */
static const DAT_NAMED_ATTR ib_attrs[] = {
        { DAT_IB_ATTR_FETCH_AND_ADD, "TRUE" },
        { DAT_IB_ATTR_CMP_AND_SWAP, "TRUE" },
        { DAT_IB_ATTR_IMMED_DATA, "TRUE" },
};

#define N_PROVIDER_ATTRS (IA_N_PROVIDER_ATTR + ARRAY_SIZE(ib_attrs))

/* One list of provider attributes, values copied: it outlives the IAs it
 * was made for, so a list handed out stays valid. */
struct provider_attrs {
        struct provider_attrs *next;
        DAT_NAMED_ATTR attr[N_PROVIDER_ATTRS];
        char values[];
};

/* Every distinct list made so far (IAs with equal DATD_* values share
 * one): as many as the distinct IAs and datds a process uses. */
static pthread_mutex_t provider_attrs_lock = PTHREAD_MUTEX_INITIALIZER;
static struct provider_attrs *provider_attrs_made;

static bool provider_attrs_match(const struct provider_attrs *l, const struct ia *ia)
{
        for (size_t i = 0; i < IA_N_PROVIDER_ATTR; i++)
                if (strcmp(l->attr[i].value, ia->provider_attr[i].value) != 0)
                        return false;
        return true;
}

static struct provider_attrs *provider_attrs_new(const struct ia *ia)
{
        size_t size = 0;
        struct provider_attrs *l;
        char *at;

        for (size_t i = 0; i < IA_N_PROVIDER_ATTR; i++)
                size += strlen(ia->provider_attr[i].value) + 1;
        l = malloc(sizeof(*l) + size);
        if (!l)
                return NULL;
        at = l->values;
        for (size_t i = 0; i < IA_N_PROVIDER_ATTR; i++) {
                size_t len = strlen(ia->provider_attr[i].value) + 1;

                memcpy(at, ia->provider_attr[i].value, len);
                l->attr[i] = (DAT_NAMED_ATTR){ ia->provider_attr[i].name, at };
                at += len;
        }
        memcpy(&l->attr[IA_N_PROVIDER_ATTR], ib_attrs, sizeof(ib_attrs));
        return l;
}

/* The IA's provider attributes followed by the IB ones; without memory
 * for a new list, the IA's own only. */
static const DAT_NAMED_ATTR *provider_attrs_of(const struct ia *ia, DAT_COUNT *n)
{
        struct provider_attrs *l;

        pthread_mutex_lock(&provider_attrs_lock);
        for (l = provider_attrs_made; l && !provider_attrs_match(l, ia); l = l->next)
                ;
        if (!l) {
                l = provider_attrs_new(ia);
                if (l) {
                        l->next = provider_attrs_made;
                        provider_attrs_made = l;
                }
        }
        pthread_mutex_unlock(&provider_attrs_lock);
        if (!l) {
                *n = IA_N_PROVIDER_ATTR;
                return ia->provider_attr;
        }
        *n = (DAT_COUNT)N_PROVIDER_ATTRS;
        return l->attr;
}

static void fill_provider_attr(const struct ia *ia, DAT_PROVIDER_ATTR *p)
{

        /* The header declares the matrix const (the consumer only reads
         * it); the consumer's structure is writable memory all the same. */
        memset(p, 0, sizeof(*p));
        memcpy((void *)p->evd_stream_merging_supported, all_streams_merge, sizeof(all_streams_merge));
        snprintf(p->provider_name, sizeof(p->provider_name), "datd");
        provider_version(&p->provider_version_major, &p->provider_version_minor);
        p->dapl_version_major = DAT_VERSION_MAJOR;
        p->dapl_version_minor = DAT_VERSION_MINOR;
        /* dat_ia_query(3DAT): every provider supports all three. */
        p->lmr_mem_types_supported = DAT_MEM_TYPE_VIRTUAL | DAT_MEM_TYPE_LMR | DAT_MEM_TYPE_SHARED_VIRTUAL;
        /* A post copies the descriptors into the ring before it returns. */
        p->iov_ownership_on_return = DAT_IOV_CONSUMER;
        p->dat_qos_supported = DAT_QOS_BEST_EFFORT;
        /* dat_ia_query(3DAT) names these four. */
        p->completion_flags_supported = DAT_COMPLETION_SUPPRESS_FLAG | DAT_COMPLETION_UNSIGNALLED_FLAG |
                                        DAT_COMPLETION_SOLICITED_WAIT_FLAG |
                                        DAT_COMPLETION_BARRIER_FENCE_FLAG;
        p->is_thread_safe = DAT_TRUE;
        p->max_private_data_size = as_count(ia->info.max_private_data);
        p->supports_multipath = DAT_FALSE;
        p->ep_creator = DAT_PSP_CREATES_EP_IFASKED;
        /* A PZ belongs to one IA instance of one process. */
        p->pz_support = DAT_PZ_UNIQUE;
        p->optimal_buffer_alignment = ia->caps->optimal_alignment;
        p->srq_supported = DAT_TRUE;
        p->srq_watermarks_supported = DAT_TRUE;
        /* An SRQ and the EPs using it must share one PZ. */
        p->srq_ep_pz_difference_supported = DAT_FALSE;
        p->srq_info_supported = DAT_TRUE;
        p->ep_recv_info_supported = DAT_TRUE;
        /* Memory is cache coherent: no dat_lmr_sync_rdma_* needed. */
        p->lmr_sync_req = DAT_FALSE;
        p->dto_async_return_guaranteed = DAT_FALSE;
        p->rdma_write_for_rdma_read_req = DAT_FALSE;
        p->rdma_read_lmr_rmr_context_exposure = DAT_FALSE;
        /* dat_rmr_create binds RMRs to a PZ (dat_rmr_create_for_ep is not in DAT 2.0's ABI). */
        p->rmr_scope_supported = DAT_RMR_SCOPE_PZ;
        p->is_signal_safe = DAT_FALSE;
        p->ha_supported = DAT_FALSE;
        p->ha_loadbalancing = DAT_HA_LB_NONE;
        p->provider_specific_attr =
                (DAT_NAMED_ATTR *)provider_attrs_of(ia, &p->num_provider_specific_attr);
}

/* The async EVD as dat_ia_query reports it: the IA's own, the consumer's
 * (while it exists), DAT_EVD_OUT_OF_SCOPE when the consumer opened with
 * DAT_EVD_ASYNC_EXISTS (dat_ia_open(3DAT)). */
static DAT_EVD_HANDLE ia_async_evd(const struct ia *ia)
{
        if (ia->own_async_evd)
                return ia->own_async_evd->obj.handle;
        if (ia->async_evd_exists_elsewhere)
                return DAT_EVD_OUT_OF_SCOPE;
        if (ia->borrowed_async_evd && evd_lookup(ia->borrowed_async_evd))
                return ia->borrowed_async_evd;
        return DAT_HANDLE_NULL;
}

_public_ DAT_RETURN dat_ia_query(DAT_IA_HANDLE ia_handle, DAT_EVD_HANDLE *async_evd_handle,
                                 DAT_IA_ATTR_MASK ia_attr_mask, DAT_IA_ATTR *ia_attributes,
                                 DAT_PROVIDER_ATTR_MASK provider_attr_mask,
                                 DAT_PROVIDER_ATTR *provider_attributes)
{
        FOREIGN_DISPATCH_IA(ia_handle, ia_query_func, async_evd_handle, ia_attr_mask, ia_attributes,
                            provider_attr_mask, provider_attributes);
        struct ia *ia = ia_lookup(ia_handle);

        if (!ia)
                return dat_invalid_handle(DAT_HANDLE_TYPE_IA);
        if (ia_attr_mask && !ia_attributes)
                return DAT_ERR_ARG(4);
        if (provider_attr_mask && !provider_attributes)
                return DAT_ERR_ARG(6);
        if (async_evd_handle)
                *async_evd_handle = ia_async_evd(ia);
        if (ia_attr_mask)
                fill_ia_attr(ia, ia_attributes);
        if (provider_attr_mask)
                fill_provider_attr(ia, provider_attributes);
        return DAT_SUCCESS;
}
