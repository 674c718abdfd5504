/* Running the build tree's datctl from a test.  See datctl-run.h. */
#include <config.h>

#include "tests/datctl/datctl-run.h"

#include <criterion/criterion.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "tests/harness.h"

#define DATCTL_MAX_ARGS 16

/* first and then ap: the arguments, up to a NULL. */
static char *run_expect(int status, bool json, const char *first, va_list ap)
{
        _cleanup_free_ char *datctl = build_path("daemon/datctl");
        char *argv[DATCTL_MAX_ARGS + 3], *output = NULL;
        size_t n = 0;
        int r;

        cr_assert_not_null(datctl);
        argv[n++] = datctl;
        if (json)
                argv[n++] = (char *)"--json";
        for (const char *arg = first; arg; arg = va_arg(ap, const char *)) {
                cr_assert_lt(n, DATCTL_MAX_ARGS, "too many datctl arguments");
                argv[n++] = (char *)arg;
        }
        argv[n] = NULL;
        r = run_capture(argv, &output, DATCTL_RUN_TIMEOUT_MS);
        cr_assert_eq(r, status, "datctl%s exited with %d, expected %d:\n%s", json ? " --json" : "",
                     r, status, output ? output : "");
        return output;
}

char *datctl_run_expect(int status, ...)
{
        va_list ap;
        char *output;

        va_start(ap, status);
        output = run_expect(status, false, va_arg(ap, const char *), ap);
        va_end(ap);
        return output;
}

/* Fails, showing where got first differs from expected, unless they are equal. */
static void assert_same_text(const char *got, const char *expected)
{
        size_t i = 0, from;

        while (got[i] && got[i] == expected[i])
                i++;
        if (got[i] == expected[i])
                return;
        from = i > 80 ? i - 80 : 0;
        cr_assert_fail("datctl --json differs from jansson's text at byte %zu:\n"
                       "datctl:  ...%.160s\njansson: ...%.160s", i, got + from, expected + from);
}

json_t *datctl_run_json_exact(const char *arg, ...)
{
        _cleanup_free_ char *output = NULL, *again = NULL;
        json_error_t error;
        json_t *value;
        va_list ap;

        va_start(ap, arg);
        output = run_expect(0, true, arg, ap);
        va_end(ap);
        /* The output may be long: only its start goes into a failure message. */
        value = json_loads(output, 0, &error);
        cr_assert_not_null(value, "datctl --json printed no valid JSON (%s, line %d):\n%.2000s",
                           error.text, error.line, output);
        again = json_dumps(value, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
        cr_assert_not_null(again);
        cr_assert_eq(strlen(output), strlen(again) + 1, "datctl --json: %zu bytes, jansson: %zu + 1",
                     strlen(output), strlen(again));
        cr_assert_eq(output[strlen(again)], '\n', "no newline after the JSON value");
        output[strlen(again)] = '\0';
        assert_same_text(output, again);
        return value;
}

json_t *datctl_run_json(const char *arg, ...)
{
        _cleanup_free_ char *output = NULL;
        json_error_t error;
        json_t *value;
        va_list ap;

        va_start(ap, arg);
        output = run_expect(0, true, arg, ap);
        va_end(ap);
        value = json_loads(output, 0, &error);
        cr_assert_not_null(value, "datctl --json printed no valid JSON (%s, line %d):\n%s",
                           error.text, error.line, output);
        return value;
}
