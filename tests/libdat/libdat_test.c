#include "config.h"

#include "tests/libdat/libdat_test.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/harness.h"

static char conf_path[64];
static char trace_path[64];
static int saved_stderr = -1;

static void remove_files(void)
{
        if (conf_path[0])
                unlink(conf_path);
        if (trace_path[0])
                unlink(trace_path);
}

/* Makes a new private file named after template, replacing (and removing)
 * the one path named before; returns its descriptor. */
static int new_temp_file(char path[64], const char *template)
{
        int fd;

        if (path[0])
                unlink(path);
        snprintf(path, 64, "%s", template);
        fd = mkstemp(path);
        cr_assert_geq(fd, 0, "mkstemp");
        atexit(remove_files);
        return fd;
}

const char *use_dat_conf(const char *content)
{
        size_t len = strlen(content);
        int fd = new_temp_file(conf_path, "/tmp/libdat-test-dat.conf-XXXXXX");

        cr_assert_eq(write(fd, content, len), (ssize_t)len);
        close(fd);
        setenv("DAT_OVERRIDE", conf_path, 1);
        return conf_path;
}

void trace_capture_begin(void)
{
        int fd = new_temp_file(trace_path, "/tmp/libdat-test-trace-XXXXXX");

        fflush(stderr);
        saved_stderr = dup(STDERR_FILENO);
        dup2(fd, STDERR_FILENO);
        close(fd);
        setenv("DAT_DBG_TYPE", "1", 1);
}

char *trace_capture_end(void)
{
        char *text;

        fflush(stderr);
        dup2(saved_stderr, STDERR_FILENO);
        close(saved_stderr);
        saved_stderr = -1;
        unsetenv("DAT_DBG_TYPE");
        text = read_file_str(trace_path);
        return text ? text : strdup("");
}

void start_private_datd(struct datd_instance *d)
{
        char *bin = build_path("daemon/datd");
        bool built = bin && access(bin, X_OK) == 0;

        free(bin);
        if (!built)
                cr_skip_test("daemon/datd is not built in this tree");
        cr_assert_eq(datd_start(d, NULL), 0, "datd did not start");
        datd_export_env(d);
}
