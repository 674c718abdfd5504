/* datctl: the administrator's view into datd, over datd's D-Bus API
 * (daemon/DBUS-API.md).  This file is the command line: options, the table
 * of commands, and the exit status.  The commands live in datctl-status.c and
 * datctl-list.c, the connection in datctl-bus.c, the output helpers in
 * datctl-table.c and datctl-format.c. */
/* Angle brackets: autoconf's config.h from the build tree, not datd's
 * daemon/config.h beside this file. */
#include <config.h>

#include <errno.h>
#include <getopt.h>
#include <locale.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "common/macro.h"
#include "datctl-bus.h"
#include "datctl-list.h"
#include "datctl-status.h"
#include "datctl.h"

struct datctl_args {
        struct datd_bus_target target;
        struct datctl_output output;
        bool full;
        char **command;         /* the words after the options */
        int n_command;
};

/* A command is one or two words and a handler; data is handed to it. */
struct verb {
        const char *words[2];
        int (*run)(struct datd_bus *bus, const struct datctl_output *o, const void *data);
        const void *data;
};

static int verb_status(struct datd_bus *bus, const struct datctl_output *o, const void *data)
{
        return status_show(bus, o);
}

static int verb_list(struct datd_bus *bus, const struct datctl_output *o, const void *data)
{
        return list_show(bus, data, o);
}

static const struct verb verbs[] = {
        { { "status" }, verb_status, NULL },
        { { "ia", "list" }, verb_list, &list_view_ias },
        { { "client", "list" }, verb_list, &list_view_clients },
        { { "ep", "list" }, verb_list, &list_view_endpoints },
        { { "object", "list" }, verb_list, &list_view_objects },
        { { "listener", "list" }, verb_list, &list_view_listeners },
        { { "connection", "list" }, verb_list, &list_view_connections },
};

static void print_help(void)
{
        printf("Usage: datctl [OPTIONS...] COMMAND\n"
               "\n"
               "Show what datd, the DAT 2.0 broker daemon, is doing.\n"
               "\n"
               "Commands:\n"
               "  status               Show datd's version, start time and uptime, runtime\n"
               "                       directory, client socket, number of clients and of\n"
               "                       their objects, IAs, and counters\n"
               "  ia list              List the interface adapters (IAs) datd serves: name,\n"
               "                       transport, adapter, address, state, open instances\n"
               "  client list          List the processes connected to datd: connection ID,\n"
               "                       PID, UID and user, GID, command, open IAs, endpoints,\n"
               "                       registered memory, connected since\n"
               "  ep list              List the endpoints of all clients: owner (PID/command),\n"
               "                       IA, handle, state, protection zone, DTO and IOV\n"
               "                       limits, largest message, datd's ID\n"
               "  object list          List every DAT object clients created (PZ, EVD, CNO,\n"
               "                       LMR, RMR, EP, SRQ): owner, IA, kind, handle,\n"
               "                       protection zone, state, length, queue length, ID\n"
               "  listener list        List the listeners (PSPs, RSPs): owner, IA, kind,\n"
               "                       conn_qual, pending and accepted requests, ID\n"
               "  connection list      List both ends of every connection on this host:\n"
               "                       owner, IA, role, local and remote address, remote\n"
               "                       conn_qual, peer PID, state, age, bytes, ID\n"
               "\n"
               "Options:\n"
               "  -h --help            Show this help and exit\n"
               "     --version         Show datctl's version and exit\n"
               "     --json            Print JSON instead of text: an object for status, an\n"
               "                       array of objects for the list commands\n"
               "     --no-legend       Print neither the column headers nor the closing\n"
               "                       count of the list commands\n"
               "  -l --full            Do not shorten columns to fit the terminal\n"
               "     --address=ADDRESS Connect to datd at this D-Bus address, e.g.\n"
               "                       unix:path=%s/datd/bus.sock\n"
               "     --runtime-dir=DIR Connect to the datd whose runtime directory is DIR,\n"
               "                       through its socket DIR/bus.sock\n"
               "     --system          Connect to datd on the system bus (org.datd.Datd1)\n"
               "     --timeout=SECONDS Give up if datd has not answered everything by then\n"
               "                       (default 25)\n"
               "\n"
               "Without --address, --runtime-dir or --system, datctl connects to\n"
               "$DATD_BUS_ADDRESS if it is set, else to the system bus if datd is registered\n"
               "there, else to %s/datd/bus.sock.\n"
               "\n"
               "Exit status: 0 on success, 1 if datd cannot be reached or a request fails,\n"
               "2 on a usage error.\n",
               RUNSTATEDIR, RUNSTATEDIR);
}

__attribute__((format(printf, 1, 2)))
static int usage_error(const char *fmt, ...)
{
        va_list ap;

        fputs("datctl: ", stderr);
        va_start(ap, fmt);
        vfprintf(stderr, fmt, ap);
        va_end(ap);
        fputs("\nTry 'datctl --help' for more information.\n", stderr);
        return -EINVAL;
}

enum {
        ARG_VERSION = 0x100,
        ARG_JSON,
        ARG_NO_LEGEND,
        ARG_ADDRESS,
        ARG_RUNTIME_DIR,
        ARG_SYSTEM,
        ARG_TIMEOUT,
};

/* --timeout: seconds, fractions allowed, up to an hour. */
static int parse_timeout(const char *s, uint64_t *ret_usec)
{
        char *end;
        double seconds;

        errno = 0;
        seconds = strtod(s, &end);
        if (errno != 0 || end == s || *end != '\0' || !(seconds > 0) || seconds > 3600)
                return usage_error("--timeout=%s is not a number of seconds from 0 to 3600", s);
        *ret_usec = (uint64_t)(seconds * 1e6);
        if (*ret_usec == 0)
                *ret_usec = 1;
        return 0;
}

/* Returns 1 to go on, 0 when the work is done (--help), -EINVAL on a usage
 * error (reported). */
static int parse_args(int argc, char **argv, struct datctl_args *args)
{
        static const struct option options[] = {
                { "help", no_argument, NULL, 'h' },
                { "version", no_argument, NULL, ARG_VERSION },
                { "json", no_argument, NULL, ARG_JSON },
                { "no-legend", no_argument, NULL, ARG_NO_LEGEND },
                { "full", no_argument, NULL, 'l' },
                { "address", required_argument, NULL, ARG_ADDRESS },
                { "runtime-dir", required_argument, NULL, ARG_RUNTIME_DIR },
                { "system", no_argument, NULL, ARG_SYSTEM },
                { "timeout", required_argument, NULL, ARG_TIMEOUT },
                {}
        };
        int c, n_targets;

        /* getopt prints its own complaint; ours follows with the hint. */
        while ((c = getopt_long(argc, argv, "hl", options, NULL)) >= 0) {
                switch (c) {
                case 'h':
                        print_help();
                        return 0;
                case ARG_VERSION:
                        printf("datctl %s\n", PACKAGE_VERSION);
                        return 0;
                case ARG_JSON:
                        args->output.json = true;
                        break;
                case ARG_NO_LEGEND:
                        args->output.legend = false;
                        break;
                case 'l':
                        args->full = true;
                        break;
                case ARG_ADDRESS:
                        /* sd-bus would call anything else "Connection refused". */
                        if (!strchr(optarg, ':'))
                                return usage_error("--address=%s is not a D-Bus address "
                                                   "(e.g. unix:path=" RUNSTATEDIR "/datd/bus.sock)",
                                                   optarg);
                        args->target.address = optarg;
                        break;
                case ARG_RUNTIME_DIR:
                        if (!*optarg)
                                return usage_error("--runtime-dir needs a directory");
                        args->target.runtime_dir = optarg;
                        break;
                case ARG_SYSTEM:
                        args->target.system = true;
                        break;
                case ARG_TIMEOUT:
                        if (parse_timeout(optarg, &args->target.timeout_usec) < 0)
                                return -EINVAL;
                        break;
                default:
                        fputs("Try 'datctl --help' for more information.\n", stderr);
                        return -EINVAL;
                }
        }
        n_targets = !!args->target.address + !!args->target.runtime_dir + args->target.system;
        if (n_targets > 1)
                return usage_error("--address, --runtime-dir and --system exclude each other");
        args->command = argv + optind;
        args->n_command = argc - optind;
        return 1;
}

static const struct verb *find_verb(char **words, int n)
{
        for (size_t i = 0; i < ARRAY_SIZE(verbs); i++) {
                int len = verbs[i].words[1] ? 2 : 1;

                if (n == len && strcmp(words[0], verbs[i].words[0]) == 0 &&
                    (len == 1 || strcmp(words[1], verbs[i].words[1]) == 0))
                        return &verbs[i];
        }
        return NULL;
}

/* The command as typed, for the error message: "ia frobnicate". */
static void report_unknown_command(char **words, int n)
{
        size_t len = 1;
        _cleanup_free_ char *typed = NULL;

        for (int i = 0; i < n; i++)
                len += strlen(words[i]) + 1;
        typed = calloc(1, len);
        if (typed)
                for (int i = 0; i < n; i++) {
                        if (i > 0)
                                strcat(typed, " ");
                        strcat(typed, words[i]);
                }
        usage_error("unknown command '%s'", typed ? typed : words[0]);
}

/* Tables are cut to the terminal only when a person is looking at them. */
static size_t terminal_width(void)
{
        struct winsize ws;
        const char *columns = getenv("COLUMNS");

        if (!isatty(STDOUT_FILENO))
                return 0;
        if (ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 && ws.ws_col > 0)
                return ws.ws_col;
        if (columns && atoi(columns) > 0)
                return (size_t)atoi(columns);
        return 80;
}

static int run(int argc, char **argv)
{
        _cleanup_(datd_bus_freep) struct datd_bus *bus = NULL;
        struct datctl_args args = { .output.legend = true };
        const struct verb *verb;
        int r;

        r = parse_args(argc, argv, &args);
        if (r <= 0)
                return r < 0 ? DATCTL_EXIT_USAGE : EXIT_SUCCESS;
        if (args.n_command == 0) {
                usage_error("missing command");
                return DATCTL_EXIT_USAGE;
        }
        verb = find_verb(args.command, args.n_command);
        if (!verb) {
                report_unknown_command(args.command, args.n_command);
                return DATCTL_EXIT_USAGE;
        }
        if (!args.full && !args.output.json)
                args.output.width = terminal_width();

        r = datd_bus_connect(&args.target, &bus);
        if (r < 0)
                return DATCTL_EXIT_FAILURE;
        r = verb->run(bus, &args.output, verb->data);
        if (fflush(stdout) != 0 || ferror(stdout)) {
                datctl_error("cannot write the output: %s", strerror(errno));
                return DATCTL_EXIT_FAILURE;
        }
        return r < 0 ? DATCTL_EXIT_FAILURE : EXIT_SUCCESS;
}

int main(int argc, char **argv)
{
        /* Only character classification: widths of names in tables, and
         * whether the terminal takes an ellipsis. */
        setlocale(LC_CTYPE, "");
        return run(argc, argv);
}
