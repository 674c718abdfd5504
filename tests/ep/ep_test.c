#include "config.h"

#include "tests/ep/ep_test.h"

#include <criterion/criterion.h>
#include <limits.h>
#include <stdio.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "libdat/srq.h"

struct datd_instance ep_datd;

void ep_datd_start_config(const char *config_json)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(&ep_datd, config_json), 0, "datd did not start");
        datd_export_env(&ep_datd);
}

void ep_datd_start(void)
{
        ep_datd_start_config(NULL);
}

void ep_datd_stop(void)
{
        datd_stop(&ep_datd);
}

DAT_IA_HANDLE ep_open_ia(DAT_EVD_HANDLE *async_evd)
{
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_RETURN r;

        *async_evd = DAT_HANDLE_NULL;
        r = dat_ia_open((DAT_NAME_PTR) "datd-shm", 16, async_evd, &ia);
        cr_assert_eq(r, DAT_SUCCESS, "dat_ia_open: 0x%08x (log: %s)", r, ep_datd.log_path);
        return ia;
}

DAT_EVD_HANDLE ep_make_evd(DAT_IA_HANDLE ia, DAT_EVD_FLAGS flags)
{
        DAT_EVD_HANDLE evd = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_evd_create(ia, 64, DAT_HANDLE_NULL, flags, &evd);

        cr_assert_eq(r, DAT_SUCCESS, "dat_evd_create(0x%x): 0x%08x", flags, r);
        return evd;
}

DAT_PZ_HANDLE ep_make_pz(DAT_IA_HANDLE ia)
{
        DAT_PZ_HANDLE pz = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_pz_create(ia, &pz);

        cr_assert_eq(r, DAT_SUCCESS, "dat_pz_create: 0x%08x", r);
        return pz;
}

void ep_fixture_open(struct ep_fixture *f)
{
        f->ia = ep_open_ia(&f->async_evd);
        f->pz = ep_make_pz(f->ia);
        f->pz2 = ep_make_pz(f->ia);
        f->recv_evd = ep_make_evd(f->ia, DAT_EVD_DTO_FLAG);
        f->recv_evd2 = ep_make_evd(f->ia, DAT_EVD_DTO_FLAG);
        f->request_evd = ep_make_evd(f->ia, DAT_EVD_DTO_FLAG);
        f->conn_evd = ep_make_evd(f->ia, DAT_EVD_CONNECTION_FLAG);
        f->conn_evd2 = ep_make_evd(f->ia, DAT_EVD_CONNECTION_FLAG);
        cr_assert_eq(dat_ia_query(f->ia, NULL, DAT_IA_FIELD_ALL, &f->limits, 0, NULL), DAT_SUCCESS);
}

DAT_EP_HANDLE ep_make(const struct ep_fixture *f, const DAT_EP_ATTR *attr)
{
        DAT_EP_HANDLE ep = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_ep_create(f->ia, f->pz, f->recv_evd, f->request_evd, f->conn_evd, attr, &ep);

        cr_assert_eq(r, DAT_SUCCESS, "dat_ep_create: 0x%08x (log: %s)", r, ep_datd.log_path);
        return ep;
}

DAT_EP_PARAM ep_params(DAT_EP_HANDLE ep)
{
        DAT_EP_PARAM p;

        cr_assert_eq(dat_ep_query(ep, DAT_EP_FIELD_ALL, &p), DAT_SUCCESS);
        return p;
}

DAT_SRQ_HANDLE srq_make(const struct ep_fixture *f, DAT_COUNT max_recv_dtos, DAT_COUNT max_recv_iov)
{
        DAT_SRQ_ATTR attr = { max_recv_dtos, max_recv_iov, DAT_SRQ_LW_DEFAULT };
        DAT_SRQ_HANDLE srq = DAT_HANDLE_NULL;
        DAT_RETURN r = dat_srq_create(f->ia, f->pz, &attr, &srq);

        cr_assert_eq(r, DAT_SUCCESS, "dat_srq_create: 0x%08x (log: %s)", r, ep_datd.log_path);
        return srq;
}

bool evd_next(DAT_EVD_HANDLE evd, DAT_EVENT *event)
{
        return dat_evd_dequeue(evd, event) == DAT_SUCCESS;
}

#define COUNT_FIELD(member, v) { #member, offsetof(DAT_EP_ATTR, member), false, (long long)(v) }
#define SEG_FIELD(member, v) { #member, offsetof(DAT_EP_ATTR, member), true, (long long)(v) }

size_t ep_bad_attrs(const DAT_IA_ATTR *l, struct bad_attr *out)
{
        const struct bad_attr bad[] = {
                SEG_FIELD(max_message_size, (long long)l->max_message_size + 1),
                SEG_FIELD(max_rdma_size, (long long)l->max_rdma_size + 1),
                COUNT_FIELD(max_recv_dtos, l->max_dto_per_ep + 1),
                COUNT_FIELD(max_recv_dtos, -1),
                COUNT_FIELD(max_request_dtos, l->max_dto_per_ep + 1),
                COUNT_FIELD(max_request_dtos, -1),
                COUNT_FIELD(max_recv_iov, l->max_iov_segments_per_dto + 1),
                COUNT_FIELD(max_recv_iov, -1),
                COUNT_FIELD(max_request_iov, l->max_iov_segments_per_dto + 1),
                COUNT_FIELD(max_request_iov, -1),
                COUNT_FIELD(max_rdma_read_in, l->max_rdma_read_per_ep_in + 1),
                COUNT_FIELD(max_rdma_read_in, -1),
                COUNT_FIELD(max_rdma_read_out, l->max_rdma_read_per_ep_out + 1),
                COUNT_FIELD(max_rdma_read_out, -1),
                COUNT_FIELD(srq_soft_hw, -2),
                COUNT_FIELD(max_rdma_read_iov, l->max_iov_segments_per_rdma_read + 1),
                COUNT_FIELD(max_rdma_read_iov, -1),
                COUNT_FIELD(max_rdma_write_iov, l->max_iov_segments_per_rdma_write + 1),
                COUNT_FIELD(max_rdma_write_iov, -1),
                COUNT_FIELD(ep_transport_specific_count, 1),
                COUNT_FIELD(ep_transport_specific_count, -1),
                COUNT_FIELD(ep_provider_specific_count, 1),
                COUNT_FIELD(ep_provider_specific_count, -1),
        };
        size_t n = sizeof(bad) / sizeof(bad[0]);

        cr_assert_leq(n, EP_BAD_ATTRS);
        memcpy(out, bad, sizeof(bad));
        return n;
}

void ep_bad_attr_set(DAT_EP_ATTR *a, const struct bad_attr *b)
{
        if (b->seg_length) {
                DAT_SEG_LENGTH v = (DAT_SEG_LENGTH)b->value;

                memcpy((char *)a + b->offset, &v, sizeof(v));
        } else {
                DAT_COUNT v = (DAT_COUNT)b->value;

                memcpy((char *)a + b->offset, &v, sizeof(v));
        }
}

DAT_LMR_CONTEXT ep_make_lmr(DAT_IA_HANDLE ia, DAT_PZ_HANDLE pz, void *buf, size_t len,
                            DAT_MEM_PRIV_FLAGS privileges, DAT_LMR_HANDLE *lmr)
{
        DAT_REGION_DESCRIPTION region = { .for_va = buf };
        DAT_LMR_CONTEXT context;
        DAT_RMR_CONTEXT rmr;
        DAT_VLEN registered;
        DAT_VADDR address;
        DAT_RETURN r = dat_lmr_create(ia, DAT_MEM_TYPE_VIRTUAL, region, len, pz, privileges,
                                      DAT_VA_TYPE_VA, lmr, &context, &rmr, &registered, &address);

        cr_assert_eq(r, DAT_SUCCESS, "dat_lmr_create: 0x%08x", r);
        return context;
}

DAT_LMR_TRIPLET ep_segment(DAT_LMR_CONTEXT context, const void *buf, size_t offset, size_t length)
{
        return (DAT_LMR_TRIPLET){
                .lmr_context = context,
                .virtual_address = (DAT_VADDR)(uintptr_t)((const char *)buf + offset),
                .segment_length = (DAT_SEG_LENGTH)length,
        };
}

char *ep_datctl_list(const char *noun)
{
        char *datctl = build_path("daemon/datctl");
        char address[PATH_MAX + 32];
        char *argv[] = { datctl, address, "--json", (char *)noun, "list", NULL };
        char *out = NULL;
        int status;

        snprintf(address, sizeof(address), "--address=%s", ep_datd.bus_address);
        status = run_capture(argv, &out, 10000);
        free(datctl);
        cr_assert_eq(status, 0, "datctl %s list: %s", noun, out ? out : "");
        return out;
}

DAT_EP_ATTR ep_default_attr(const struct ep_fixture *f)
{
        DAT_EP_HANDLE ep = ep_make(f, NULL);
        DAT_EP_PARAM p = ep_params(ep);

        cr_assert_eq(dat_ep_free(ep), DAT_SUCCESS);
        return p.ep_attr;
}

DAT_RETURN ep_state_error(DAT_EP_STATE state)
{
        static const DAT_RETURN_SUBTYPE subtype[N_EP_STATES] = {
                [DAT_EP_STATE_UNCONNECTED] = DAT_INVALID_STATE_EP_UNCONNECTED,
                [DAT_EP_STATE_UNCONFIGURED_UNCONNECTED] = DAT_INVALID_STATE_EP_UNCONFIGURED,
                [DAT_EP_STATE_RESERVED] = DAT_INVALID_STATE_EP_RESERVED,
                [DAT_EP_STATE_UNCONFIGURED_RESERVED] = DAT_INVALID_STATE_EP_UNCONFRESERVED,
                [DAT_EP_STATE_PASSIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_PASSCONNPENDING,
                [DAT_EP_STATE_UNCONFIGURED_PASSIVE] = DAT_INVALID_STATE_EP_UNCONFPASSIVE,
                [DAT_EP_STATE_ACTIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_ACTCONNPENDING,
                [DAT_EP_STATE_TENTATIVE_CONNECTION_PENDING] = DAT_INVALID_STATE_EP_TENTCONNPENDING,
                [DAT_EP_STATE_UNCONFIGURED_TENTATIVE] = DAT_INVALID_STATE_EP_UNCONFTENTATIVE,
                [DAT_EP_STATE_CONNECTED] = DAT_INVALID_STATE_EP_CONNECTED,
                [DAT_EP_STATE_DISCONNECT_PENDING] = DAT_INVALID_STATE_EP_DISCPENDING,
                [DAT_EP_STATE_DISCONNECTED] = DAT_INVALID_STATE_EP_DISCONNECTED,
                [DAT_EP_STATE_COMPLETION_PENDING] = DAT_INVALID_STATE_EP_COMPLPENDING,
                /* The connected states of DAT 2.0's multipath are connected. */
                [DAT_EP_STATE_CONNECTED_SINGLE_PATH] = DAT_INVALID_STATE_EP_CONNECTED,
                [DAT_EP_STATE_CONNECTED_MULTI_PATH] = DAT_INVALID_STATE_EP_CONNECTED,
        };

        cr_assert_lt((unsigned)state, N_EP_STATES);
        return ERR(DAT_INVALID_STATE, subtype[state]);
}

void srq_post_empty(DAT_SRQ_HANDLE srq, int n)
{
        for (int i = 0; i < n; i++)
                cr_assert_eq(dat_srq_post_recv(srq, 0, NULL, (DAT_DTO_COOKIE){ .as_64 = 100 + (uint64_t)i }),
                             DAT_SUCCESS);
}

void srq_take(DAT_SRQ_HANDLE srq, int n)
{
        DAT_DTO_COOKIE c;
        DAT_COUNT segs;

        for (int i = 0; i < n; i++)
                cr_assert(srq_buffer_take(srq_lookup(srq), &c, &segs, NULL), "the SRQ is empty");
}
