/* datd: the DAT broker daemon.  Parses the command line and the
 * configuration, then hands everything to the Manager's event loop. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "daemon/config.h"
#include "daemon/ia.h"
#include "daemon/log.h"
#include "daemon/manager.h"
#include "daemon/runtime_dir.h"

typedef struct Arguments {
        const char *config_path;   /* NULL: the default file */
        const char *runtime_dir;
        int log_level;             /* -1: from the config */
        LogTarget log_target;
        int bus;                   /* -1: from the config */
        bool check_config;
} Arguments;

enum {
        ARG_LOG_TARGET = 0x100,
        ARG_BUS,
        ARG_CHECK_CONFIG,
        ARG_VERSION,
};

static void help(void)
{
        printf("Usage: datd [OPTIONS]\n"
               "The DAT 2.0 (uDAPL) broker daemon.\n\n"
               "  -c --config FILE        configuration file (default %s)\n"
               "  -r --runtime-dir DIR    directory of the sockets (overrides runtime_dir)\n"
               "  -l --log-level LEVEL    err, warning, notice, info or debug\n"
               "     --log-target TARGET  auto, console or journal\n"
               "     --bus MODE           auto, system, private or none\n"
               "     --check-config       check the configuration and exit\n"
               "  -h --help               show this help\n"
               "     --version            show the version\n",
               DATD_DEFAULT_CONFIG);
}

/* 1: run, 0: exit successfully (--help, --version), negative: usage error. */
static int parse_argv(int argc, char *argv[], Arguments *a)
{
        static const struct option options[] = {
                { "config", required_argument, NULL, 'c' },
                { "runtime-dir", required_argument, NULL, 'r' },
                { "log-level", required_argument, NULL, 'l' },
                { "log-target", required_argument, NULL, ARG_LOG_TARGET },
                { "bus", required_argument, NULL, ARG_BUS },
                { "check-config", no_argument, NULL, ARG_CHECK_CONFIG },
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                {}
        };
        int c, r;

        while ((c = getopt_long(argc, argv, "c:r:l:h", options, NULL)) >= 0) {
                switch (c) {
                case 'c':
                        a->config_path = optarg;
                        break;
                case 'r':
                        r = config_check_runtime_dir(optarg);
                        if (r < 0)
                                return log_error_errno(r, "Invalid runtime directory \"%s\": %s", optarg,
                                                       r == -ENAMETOOLONG ? "too long for a socket path"
                                                                          : "not a normalized absolute path in UTF-8");
                        a->runtime_dir = optarg;
                        break;
                case 'l':
                        a->log_level = log_level_from_string(optarg);
                        if (a->log_level < 0)
                                return log_error_errno(-EINVAL, "Unknown log level \"%s\".", optarg);
                        break;
                case ARG_LOG_TARGET:
                        r = log_target_from_string(optarg);
                        if (r < 0)
                                return log_error_errno(r, "Unknown log target \"%s\".", optarg);
                        a->log_target = (LogTarget) r;
                        break;
                case ARG_BUS:
                        a->bus = bus_mode_from_string(optarg);
                        if (a->bus < 0)
                                return log_error_errno(-EINVAL, "Unknown bus mode \"%s\".", optarg);
                        break;
                case ARG_CHECK_CONFIG:
                        a->check_config = true;
                        break;
                case 'h':
                        help();
                        return 0;
                case ARG_VERSION:
                        printf("datd %s\n", PACKAGE_VERSION);
                        return 0;
                default:
                        return -EINVAL;
                }
        }
        if (optind < argc)
                return log_error_errno(-EINVAL, "Unexpected argument \"%s\".", argv[optind]);
        return 1;
}

/* The command line wins over the file. */
static int apply_arguments(Config *c, const Arguments *a)
{
        if (a->runtime_dir) {
                char *dir = strdup(a->runtime_dir);

                if (!dir)
                        return log_oom();
                free(c->runtime_dir);
                c->runtime_dir = dir;
        }
        if (a->bus >= 0)
                c->bus = (BusMode) a->bus;
        log_set_max_level(a->log_level >= 0 ? a->log_level : c->log_level);
        return 0;
}

/* --check-config: what startup would refuse, short of binding anything.
 * Addresses and interfaces are only resolved against this host's when the
 * IAs are built, so they are built here too, and thrown away.  The runtime
 * directory is checked as the start checks it when it exists; a missing one
 * the start makes. */
static int check_config(const Config *config)
{
        IaRegistry ias = {};
        struct stat st;
        int r;

        r = ia_registry_build(&ias, config);
        ia_registry_done(&ias);
        if (r < 0)
                return r;
        if (lstat(config->runtime_dir, &st) == 0 || errno != ENOENT) {
                r = runtime_dir_check(config->runtime_dir);
                if (r < 0)
                        return r;
        }
        printf("%s: OK\n", config->path ? config->path : "built-in defaults");
        return 0;
}

int main(int argc, char *argv[])
{
        Arguments a = { .log_level = -1, .bus = -1, .log_target = LOG_TARGET_AUTO };
        Manager *m = NULL;
        Config *config = NULL;
        sigset_t mask;
        int r;

        log_set_target(LOG_TARGET_AUTO);
        r = parse_argv(argc, argv, &a);
        if (r <= 0)
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        log_set_target(a.log_target);
        if (a.log_level >= 0)
                log_set_max_level(a.log_level);

        r = config_load(a.config_path, &config);
        if (r < 0)
                return EXIT_FAILURE;
        /* Before the check: it checks the runtime directory the start
         * would use. */
        r = apply_arguments(config, &a);
        if (r < 0) {
                config_free(config);
                return EXIT_FAILURE;
        }
        if (a.check_config) {
                r = check_config(config);
                config_free(config);
                return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
        }

        /* sd-event receives these through a signalfd; they must not be
         * delivered the classic way.  Writes to a closed peer are errors,
         * never signals. */
        sigemptyset(&mask);
        sigaddset(&mask, SIGTERM);
        sigaddset(&mask, SIGINT);
        sigaddset(&mask, SIGHUP);
        sigprocmask(SIG_BLOCK, &mask, NULL);
        signal(SIGPIPE, SIG_IGN);

        r = manager_new(config, &m);
        if (r < 0) {
                log_oom();
                return EXIT_FAILURE;
        }
        r = manager_startup(m);
        if (r >= 0)
                r = manager_run(m);
        manager_free(m);
        return r < 0 ? EXIT_FAILURE : EXIT_SUCCESS;
}
