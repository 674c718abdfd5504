/* A DAT consumer written the way applications are: it includes only
 * <dat2/udat.h> and <dat2/dat_ib_extensions.h> and uses the macros that turn
 * into calls (dat_ia_open(), the dat_ib_*() extension operations, the
 * DAT_GET_* accessors).  The entry points those macros reach are stubs here
 * that print exactly what they received, the way a provider would read it
 * (va_arg for dat_extension_op()).  test_abi.c builds this file against our
 * headers and against Debian's and requires the same output.
 *
 * With DATD_ABI_REPAIRED_MACROS it also uses the extension macros that do
 * not compile with Debian's header (see dat_ib_extensions.h); that variant
 * is only compiled against ours. */
#include <dat2/udat.h>
#include <dat2/dat_ib_extensions.h>

#include <stdarg.h>
#include <string.h>

/* ---- What the consumer passes -----------------------------------------------
 * Objects live here, not on the stack, so the stubs can print a pointer as
 * the name of what it points into: addresses differ from build to build. */

static DAT_EVD_HANDLE async_evd = DAT_EVD_ASYNC_EXISTS;
static DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
static DAT_LMR_TRIPLET local = { .virtual_address = 0x1000, .segment_length = 64,
                                 .lmr_context = 7 };
static DAT_RMR_TRIPLET remote = { .virtual_address = 0x2000, .segment_length = 64,
                                  .rmr_context = 9 };
static DAT_IB_ADDR_HANDLE ah;
static DAT_UINT64 counters[DCNT_IA_ALL_COUNTERS];
static DAT_IB_COLLECTIVE_MEMBER member;
static DAT_UINT32 member_size;
static DAT_IB_COLLECTIVE_GROUP group;
static DAT_IA_ATTR ia_attr;
static DAT_PROVIDER_ATTR provider_attr;
static DAT_COUNT sizes[2] = { 8, 8 }, displs[2] = { 0, 8 };
static char buf[64];
static DAT_UINT64 clock_value;
static char ia_name[] = "datd-shm";

static const struct {
        const void *start;
        size_t size;
        const char *name;
} objects[] = {
        { &async_evd, sizeof(async_evd), "async_evd" },
        { &ia, sizeof(ia), "ia" },
        { &local, sizeof(local), "local" },
        { &remote, sizeof(remote), "remote" },
        { &ah, sizeof(ah), "ah" },
        { counters, sizeof(counters), "counters" },
        { &member, sizeof(member), "member" },
        { &member_size, sizeof(member_size), "member_size" },
        { &group, sizeof(group), "group" },
        { &ia_attr, sizeof(ia_attr), "ia_attr" },
        { &provider_attr, sizeof(provider_attr), "provider_attr" },
        { sizes, sizeof(sizes), "sizes" },
        { displs, sizeof(displs), "displs" },
        { buf, sizeof(buf), "buf" },
        { &clock_value, sizeof(clock_value), "clock_value" },
        { ia_name, sizeof(ia_name), "ia_name" },
};

/* "name+offset" for a pointer into one of the objects above, else the
 * pointer's value (the consumer's other pointers are made-up constants). */
static const char *where(const void *p)
{
        static char text[8][64];
        static unsigned next;
        char *out = text[next++ % 8];

        for (size_t i = 0; i < sizeof(objects) / sizeof(objects[0]); i++) {
                const char *start = objects[i].start;

                if ((const char *)p >= start && (const char *)p < start + objects[i].size) {
                        snprintf(out, sizeof(text[0]), "%s+%td", objects[i].name,
                                 (const char *)p - start);
                        return out;
                }
        }
        snprintf(out, sizeof(text[0]), "%p", p);
        return out;
}

/* ---- Stubs of the entry points ------------------------------------------ */

DAT_RETURN DAT_API dat_ia_openv(const DAT_NAME_PTR name, DAT_COUNT qlen, DAT_EVD_HANDLE *evd,
                                DAT_IA_HANDLE *ia_out, DAT_UINT32 major, DAT_UINT32 minor,
                                DAT_BOOLEAN thread_safe)
{
        printf("dat_ia_openv name=%s qlen=%d async_evd=%s (%s) ia=%s version=%u.%u "
               "thread_safe=%d\n",
               name, qlen, where(evd), where(*evd), where(ia_out), major, minor, (int)thread_safe);
        return DAT_SUCCESS;
}

DAT_RETURN DAT_API dat_ep_post_recv(DAT_EP_HANDLE ep, DAT_COUNT segments, DAT_LMR_TRIPLET *iov,
                                    DAT_DTO_COOKIE cookie, DAT_COMPLETION_FLAGS flags)
{
        printf("dat_ep_post_recv ep=%s segments=%d iov=%s cookie=%llu flags=%u\n", where(ep),
               segments, where(iov), (unsigned long long)cookie.as_64, (unsigned)flags);
        return DAT_SUCCESS;
}

DAT_RETURN DAT_API dat_strerror(DAT_RETURN value, const char **major, const char **minor)
{
        printf("dat_strerror value=%#x minor=%s\n", value, minor ? "wanted" : "NULL");
        *major = "from dat_strerror";
        return DAT_SUCCESS;
}

/* The variable arguments of each operation, in the types a provider reads
 * them with: u64 = DAT_UINT64, ptr = a pointer, int = int or DAT_COUNT,
 * uint = an unsigned or enum value (flags, ranks, ids, types),
 * ctx = a DAT_CONTEXT / DAT_DTO_COOKIE by value. */
static const struct {
        int op;
        const char *args;
} extension_args[] = {
        { DAT_IB_FETCH_AND_ADD_OP,              "u64 ptr ctx ptr uint" },
        { DAT_IB_CMP_AND_SWAP_OP,               "u64 u64 ptr ctx ptr uint" },
        { DAT_IB_RDMA_WRITE_IMMED_OP,           "int ptr ctx ptr uint uint" },
        { DAT_IB_UD_SEND_OP,                    "int ptr ptr ctx uint" },
        { DAT_IB_UD_CM_FREE_OP,                 "ctx" },
        { DAT_IB_UD_AH_FREE_OP,                 "ptr" },
        { DAT_IB_QUERY_COUNTERS_OP,             "int ptr int" },
        { DAT_IB_PRINT_COUNTERS_OP,             "int int" },
        { DAT_IB_START_COUNTERS_OP,             "uint" },
        { DAT_IB_STOP_COUNTERS_OP,              "uint" },
        { DAT_IB_OPEN_QUERY_OP,                 "ptr ptr u64 ptr u64 ptr" },
        { DAT_IB_CLOSE_QUERY_OP,                "" },
        { DAT_IB_COLLECTIVE_CREATE_MEMBER_OP,   "ptr ptr ptr" },
        { DAT_IB_COLLECTIVE_FREE_MEMBER_OP,     "ptr" },
        { DAT_IB_COLLECTIVE_CREATE_GROUP_OP,    "ptr int uint uint ptr ptr ctx" },
        { DAT_IB_COLLECTIVE_FREE_GROUP_OP,      "" },
        { DAT_IB_COLLECTIVE_SET_CLOCK_OP,       "u64 ctx" },
        { DAT_IB_COLLECTIVE_READ_CLOCK_OP,      "ptr" },
        { DAT_IB_COLLECTIVE_SCATTER_OP,         "ptr int ptr int uint ctx uint" },
        { DAT_IB_COLLECTIVE_SCATTERV_OP,        "ptr ptr ptr ptr int uint ctx uint" },
        { DAT_IB_COLLECTIVE_GATHER_OP,          "ptr int ptr int uint ctx uint" },
        { DAT_IB_COLLECTIVE_GATHERV_OP,         "ptr int ptr ptr ptr uint ctx uint" },
        { DAT_IB_COLLECTIVE_ALLGATHER_OP,       "ptr int ptr int ctx uint" },
        { DAT_IB_COLLECTIVE_ALLGATHERV_OP,      "ptr int ptr ptr ptr ctx uint" },
        { DAT_IB_COLLECTIVE_ALLTOALL_OP,        "ptr int ptr int ctx uint" },
        { DAT_IB_COLLECTIVE_ALLTOALLV_OP,       "ptr ptr ptr ptr ptr ptr ctx uint" },
        { DAT_IB_COLLECTIVE_REDUCE_OP,          "ptr int ptr int uint uint uint ctx uint" },
        { DAT_IB_COLLECTIVE_ALLREDUCE_OP,       "ptr int ptr int uint uint ctx uint" },
        { DAT_IB_COLLECTIVE_REDUCE_SCATTER_OP,  "ptr int ptr ptr uint uint ctx uint" },
        { DAT_IB_COLLECTIVE_SCAN_OP,            "ptr int ptr int uint uint ctx uint" },
        { DAT_IB_COLLECTIVE_BROADCAST_OP,       "ptr int uint ctx uint" },
        { DAT_IB_COLLECTIVE_BARRIER_OP,         "ctx uint" },
};

static void print_extension_args(const char *args, va_list ap)
{
        while (*args) {
                size_t len = strcspn(args, " ");

                if (!strncmp(args, "u64", len))
                        printf(" u64=%llu", (unsigned long long)va_arg(ap, DAT_UINT64));
                else if (!strncmp(args, "ptr", len))
                        printf(" ptr=%s", where(va_arg(ap, void *)));
                else if (!strncmp(args, "int", len))
                        printf(" int=%d", va_arg(ap, int));
                else if (!strncmp(args, "uint", len))
                        printf(" uint=%u", va_arg(ap, unsigned));
                else
                        printf(" ctx=%llu", (unsigned long long)va_arg(ap, DAT_CONTEXT).as_64);
                args += len + (args[len] == ' ');
        }
}

DAT_RETURN DAT_API dat_extension_op(DAT_HANDLE handle, DAT_EXTENDED_OP op, ...)
{
        va_list ap;

        printf("dat_extension_op handle=%s op=%d", where(handle), op);
        va_start(ap, op);
        for (size_t i = 0; i < sizeof(extension_args) / sizeof(extension_args[0]); i++)
                if (extension_args[i].op == op)
                        print_extension_args(extension_args[i].args, ap);
        va_end(ap);
        printf("\n");
        return DAT_SUCCESS;
}

/* ---- The consumer ----------------------------------------------------------- */

#define FAKE(type, n) ((type)(DAT_UVERYLONG)(n))

int main(void)
{
        DAT_EP_HANDLE ep = FAKE(DAT_EP_HANDLE, 0xe9);
        DAT_IB_COLLECTIVE_HANDLE coll = FAKE(DAT_IB_COLLECTIVE_HANDLE, 0xc011);
        DAT_DTO_COOKIE cookie = { .as_64 = 0xc00c1e };
        DAT_CONTEXT ctx = { .as_64 = 0xc0e7e27 };
        DAT_OS_WAIT_PROXY_AGENT agent = DAT_OS_WAIT_PROXY_AGENT_NULL;
        DAT_RETURN ret = DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_EP_NOTREADY;
        const char *message;

        printf("DAT_GET_TYPE=%#x DAT_GET_SUBTYPE=%#x DAT_IS_WARNING=%#x\n",
               DAT_GET_TYPE(ret), DAT_GET_SUBTYPE(ret), DAT_IS_WARNING(ret));
        printf("DAT_IA_HANDLE_TO_UL=%#lx DAT_UL_TO_IA_HANDLE=%p\n",
               DAT_IA_HANDLE_TO_UL(ep), DAT_UL_TO_IA_HANDLE(0x1a));
        printf("DAT_OS_WAIT_PROXY_AGENT_NULL=%p/%d\n", agent.instance_data,
               agent.proxy_agent_func == NULL);

        dat_ia_open(ia_name, 8, &async_evd, &ia);

        /* 64-bit arguments above 2^32, so a narrowing cast shows */
        dat_ib_post_fetch_and_add(ep, 0x100000005, &local, cookie, &remote,
                                  DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_post_cmp_and_swap(ep, 0x100000001, 0x200000002, &local, cookie, &remote,
                                 DAT_COMPLETION_SUPPRESS_FLAG);
        dat_ib_post_rdma_write_immed(ep, 1, &local, cookie, &remote, 0xdada,
                                     DAT_COMPLETION_BARRIER_FENCE_FLAG);
        dat_ib_post_send_ud(ep, 1, &local, &ah, cookie, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_post_recv_ud(ep, 1, &local, cookie, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_ud_cm_free(ep, ctx);
        dat_ib_ud_ah_free(ep, &ah);
        dat_ib_query_counters(ia, DCNT_IA_CM_ERR, counters, 1);
        dat_ib_print_counters(ia, DCNT_IA_LNK_ERR_RCV, 0);
        dat_query_counters(ia, DCNT_EP_RECV, counters, 0);
        dat_print_counters(ia, DCNT_EVD_WAIT, 1);
        dat_ib_open_query(ia_name, &ia, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL,
                          &provider_attr);
        dat_ib_close_query(ia);

        dat_ib_collective_create_member(ia, NULL, &member, &member_size);
        dat_ib_collective_free_member(ia, member);
        dat_ib_collective_create_group(&member, 4, 1, 77, &group, async_evd, NULL, ctx);
        dat_ib_collective_free_group(coll);
        dat_ib_collective_scatter(coll, buf, 8, buf + 8, 8, 0, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_scatterv(coll, buf, sizes, displs, buf + 8, 8, 0, ctx,
                                   DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_gather(coll, buf, 8, buf + 8, 8, 2, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_allgather(coll, buf, 8, buf + 8, 8, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_allgatherv(coll, buf, 8, buf + 8, sizes, displs, ctx,
                                     DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_alltoall(coll, buf, 8, buf + 8, 8, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_reduce(coll, buf, 8, buf + 8, 8, DAT_IB_COLLECTIVE_REDUCE_OP_SUM,
                                 DAT_IB_COLLECTIVE_TYPE_INT64, 3, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_allreduce(coll, buf, 8, buf + 8, 8, DAT_IB_COLLECTIVE_REDUCE_OP_MAX,
                                    DAT_IB_COLLECTIVE_TYPE_DOUBLE, ctx,
                                    DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_reduce_scatter(coll, buf, 8, buf + 8, sizes,
                                         DAT_IB_COLLECTIVE_REDUCE_OP_BXOR,
                                         DAT_IB_COLLECTIVE_TYPE_UINT32, ctx,
                                         DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_scan(coll, buf, 8, buf + 8, 8, DAT_IB_COLLECTIVE_REDUCE_OP_PROD,
                               DAT_IB_COLLECTIVE_TYPE_FLOAT, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_broadcast(coll, buf, 8, 1, ctx, DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_barrier(coll, ctx, DAT_COMPLETION_DEFAULT_FLAG);
#ifdef DATD_ABI_REPAIRED_MACROS
        dat_ib_start_counter(ia, DCNT_IA_CM);
        dat_ib_stop_counter(ia, DCNT_IA_DIAG);
        dat_ib_collective_set_clock(coll, 0x300000003, ctx);
        dat_ib_collective_read_clock(coll, &clock_value);
        dat_ib_collective_gatherv(coll, buf, 8, buf + 8, sizes, displs, 0, ctx,
                                  DAT_COMPLETION_DEFAULT_FLAG);
        dat_ib_collective_alltoallv(coll, buf, sizes, displs, buf + 8, sizes, displs, ctx,
                                    DAT_COMPLETION_DEFAULT_FLAG);
#endif

        printf("dat_strerror_extension=%#x", dat_strerror_extension(DAT_IB_ERR, &message));
        printf(" %s\n", message);
        printf("dat_strerror_extension=%#x",
               dat_strerror_extension((DAT_IB_RETURN)DAT_QUEUE_EMPTY, &message));
        printf(" %s\n", message);
        for (int status = DAT_OP_SUCCESS; status <= DAT_IB_COLL_COMP_ERR; status++) {
                ret = dat_strerror_ext_status((DAT_IB_STATUS)status, &message);
                printf("dat_strerror_ext_status(%d)=%#x \"%s\"\n", status, ret, message);
        }
        return 0;
}
