/* datinfo: what the DAT registry offers and what each IA reports, through the
 * public DAT 2.0 API only (like ibv_devinfo for verbs).  With --hold it keeps
 * the IA open so an administrator can see the client in `datctl client list`. */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <dat2/udat.h>

#define MAX_PROVIDERS 64

static volatile sig_atomic_t stop_requested;

static void on_signal(int sig)
{
        (void)sig;
        stop_requested = 1;
}

static void print_status(const char *what, DAT_RETURN status)
{
        const char *major = "?", *minor = "?";

        dat_strerror(status, &major, &minor);
        fprintf(stderr, "datinfo: %s failed: %s (%s)\n", what, major, minor);
}

static const char *address_str(const DAT_SOCK_ADDR *sa, char *buf, size_t len)
{
        if (!sa)
                return "(none)";
        if (sa->sa_family == AF_INET)
                return inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, buf, len);
        if (sa->sa_family == AF_INET6)
                return inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, buf, len);
        snprintf(buf, len, "(family %d)", sa->sa_family);
        return buf;
}

static void print_named_attrs(const char *title, DAT_COUNT n, const DAT_NAMED_ATTR *attrs)
{
        for (DAT_COUNT i = 0; i < n && attrs; i++)
                printf("  %-26s %s=%s\n", i == 0 ? title : "", attrs[i].name, attrs[i].value);
}

static void print_ia(const char *name, const DAT_IA_ATTR *ia, const DAT_PROVIDER_ATTR *pr)
{
        char addr[INET6_ADDRSTRLEN + 16];

        printf("IA %s\n", name);
        printf("  %-26s %s\n", "adapter", ia->adapter_name);
        printf("  %-26s %s\n", "vendor", ia->vendor_name);
        printf("  %-26s %u.%u\n", "hardware version", ia->hardware_version_major,
               ia->hardware_version_minor);
        printf("  %-26s %u.%u\n", "firmware version", ia->firmware_version_major,
               ia->firmware_version_minor);
        printf("  %-26s %s\n", "address", address_str(ia->ia_address_ptr, addr, sizeof(addr)));
        printf("  %-26s %d\n", "max endpoints", ia->max_eps);
        printf("  %-26s %d\n", "max DTOs per endpoint", ia->max_dto_per_ep);
        printf("  %-26s %d\n", "max EVDs", ia->max_evds);
        printf("  %-26s %d\n", "max EVD queue length", ia->max_evd_qlen);
        printf("  %-26s %d\n", "max IOV segments", ia->max_iov_segments_per_dto);
        printf("  %-26s %d\n", "max LMRs", ia->max_lmrs);
        printf("  %-26s %llu\n", "max LMR block size", (unsigned long long)ia->max_lmr_block_size);
        printf("  %-26s %d\n", "max PZs", ia->max_pzs);
        printf("  %-26s %llu\n", "max message size", (unsigned long long)ia->max_message_size);
        printf("  %-26s %llu\n", "max RDMA size", (unsigned long long)ia->max_rdma_size);
        printf("  %-26s %d\n", "max SRQs", ia->max_srqs);
        print_named_attrs("transport attributes", ia->num_transport_attr, ia->transport_attr);
        print_named_attrs("vendor attributes", ia->num_vendor_attr, ia->vendor_attr);
        printf("  %-26s %s %u.%u (DAPL API %u.%u)\n", "provider", pr->provider_name,
               pr->provider_version_major, pr->provider_version_minor,
               pr->dapl_version_major, pr->dapl_version_minor);
        printf("  %-26s %d\n", "max private data", pr->max_private_data_size);
        printf("  %-26s %s\n", "thread safe", pr->is_thread_safe ? "yes" : "no");
}

static int show_ia(char *name, unsigned hold_seconds)
{
        DAT_IA_HANDLE ia = DAT_HANDLE_NULL;
        DAT_EVD_HANDLE async_evd = DAT_HANDLE_NULL;
        DAT_IA_ATTR ia_attr;
        DAT_PROVIDER_ATTR pr_attr;
        DAT_RETURN r;

        r = dat_ia_open(name, 8, &async_evd, &ia);
        if (r != DAT_SUCCESS) {
                print_status("dat_ia_open", r);
                return 1;
        }
        r = dat_ia_query(ia, &async_evd, DAT_IA_FIELD_ALL, &ia_attr, DAT_PROVIDER_FIELD_ALL,
                         &pr_attr);
        if (r != DAT_SUCCESS) {
                print_status("dat_ia_query", r);
                dat_ia_close(ia, DAT_CLOSE_ABRUPT_FLAG);
                return 1;
        }
        print_ia(name, &ia_attr, &pr_attr);
        if (hold_seconds) {
                printf("holding %s open for %u s (pid %d)\n", name, hold_seconds, (int)getpid());
                fflush(stdout);
                for (unsigned i = 0; i < hold_seconds * 10 && !stop_requested; i++)
                        usleep(100000);
        }
        r = dat_ia_close(ia, DAT_CLOSE_GRACEFUL_FLAG);
        if (r != DAT_SUCCESS) {
                print_status("dat_ia_close", r);
                return 1;
        }
        return 0;
}

static int list_providers(void)
{
        DAT_PROVIDER_INFO infos[MAX_PROVIDERS], *ptrs[MAX_PROVIDERS];
        DAT_COUNT n = 0;
        DAT_RETURN r;

        for (int i = 0; i < MAX_PROVIDERS; i++)
                ptrs[i] = &infos[i];
        r = dat_registry_list_providers(MAX_PROVIDERS, &n, ptrs);
        if (r != DAT_SUCCESS) {
                print_status("dat_registry_list_providers", r);
                return 1;
        }
        for (DAT_COUNT i = 0; i < n; i++)
                printf("%-24s DAT %u.%u %s\n", infos[i].ia_name, infos[i].dapl_version_major,
                       infos[i].dapl_version_minor,
                       infos[i].is_thread_safe ? "threadsafe" : "nonthreadsafe");
        return 0;
}

static void usage(FILE *f)
{
        fprintf(f,
                "Usage: datinfo [-l] [-d IA_NAME] [--hold SECONDS]\n"
                "  -l, --list           list the IAs of the DAT registry (dat.conf)\n"
                "  -d, --device NAME    open IA NAME, query it and print its attributes\n"
                "      --hold SECONDS   keep the IA open this long (until SIGINT/SIGTERM)\n"
                "Without options: --list.\n");
}

int main(int argc, char **argv)
{
        static const struct option options[] = {
                { "list", no_argument, NULL, 'l' },
                { "device", required_argument, NULL, 'd' },
                { "hold", required_argument, NULL, 'H' },
                { "help", no_argument, NULL, 'h' },
                {}
        };
        char *device = NULL;
        unsigned hold = 0;
        int list = 0, c;

        while ((c = getopt_long(argc, argv, "ld:h", options, NULL)) >= 0) {
                switch (c) {
                case 'l':
                        list = 1;
                        break;
                case 'd':
                        device = optarg;
                        break;
                case 'H':
                        hold = (unsigned)strtoul(optarg, NULL, 10);
                        break;
                case 'h':
                        usage(stdout);
                        return 0;
                default:
                        usage(stderr);
                        return 2;
                }
        }
        if (optind != argc) {
                usage(stderr);
                return 2;
        }
        signal(SIGINT, on_signal);
        signal(SIGTERM, on_signal);
        if (list || !device) {
                int r = list_providers();

                if (r || !device)
                        return r;
        }
        return show_ia(device, hold);
}
