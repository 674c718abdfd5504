/* The static registry: dat.conf parsing (registry.c, linked in from
 * libdatcore) and dat_registry_list_providers(3DAT). */
#include "config.h"

#include <criterion/criterion.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_registry.h>

#include "libdat/registry.h"
#include "tests/harness.h"
#include "tests/libdat/libdat_test.h"

static struct dat_conf_entry parse_ok(const char *line)
{
        struct dat_conf_entry e;
        const char *why = NULL;
        int r = dat_conf_parse_line(line, &e, &why);

        cr_assert_eq(r, 1, "\"%s\" refused: %s", line, why ? why : "(no reason)");
        return e;
}

static const char *parse_bad(const char *line)
{
        struct dat_conf_entry e;
        const char *why = NULL;

        cr_assert_eq(dat_conf_parse_line(line, &e, &why), -1, "\"%s\" accepted", line);
        cr_assert_not_null(why, "\"%s\": no reason", line);
        return why;
}

Test(registry, parses_every_field_of_a_good_line)
{
        struct dat_conf_entry e =
                parse_ok("datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n");
        char datd_name[64];

        cr_expect_str_eq(e.ia_name, "datd-shm");
        cr_expect_eq(e.api_major, 2);
        cr_expect_eq(e.api_minor, 0);
        cr_expect(e.thread_safe);
        cr_expect(e.is_default);
        cr_expect_str_eq(e.lib_path, "libdat2.so.2");
        cr_expect_str_eq(e.provider_version, "datd.2.0");
        cr_expect_str_eq(e.ia_params, "shm");
        cr_expect_str_eq(e.platform_params, "");
        cr_expect(dat_conf_entry_is_ours(&e));
        dat_conf_entry_datd_name(&e, datd_name, sizeof(datd_name));
        cr_expect_str_eq(datd_name, "shm");
}

Test(registry, quoted_fields_keep_blanks_and_the_first_word_names_the_datd_ia)
{
        struct dat_conf_entry e = parse_ok(
                "\tofa-v2-mlx4_0-1  u2.0 nonthreadsafe nondefault /usr/lib/libdaplofa.so.2 "
                "dapl.2.0 \"mlx4_0 1\"   \"x y  z\"   ");
        char datd_name[64];

        cr_expect_str_eq(e.ia_params, "mlx4_0 1");
        cr_expect_str_eq(e.platform_params, "x y  z");
        cr_expect_not(e.thread_safe);
        cr_expect_not(e.is_default);
        cr_expect_not(dat_conf_entry_is_ours(&e));
        dat_conf_entry_datd_name(&e, datd_name, sizeof(datd_name));
        cr_expect_str_eq(datd_name, "mlx4_0");
}

Test(registry, empty_ia_params_means_the_datd_ia_has_the_dat_name)
{
        struct dat_conf_entry e = parse_ok("fast u2.0 threadsafe default libdat2.so datd.2.0 \"\" \"\"");
        char datd_name[64];

        dat_conf_entry_datd_name(&e, datd_name, sizeof(datd_name));
        cr_expect_str_eq(datd_name, "fast");
}

Test(registry, a_library_path_is_ours_by_its_basename)
{
        struct dat_conf_entry e =
                parse_ok("a u2.0 threadsafe default /usr/lib/x86_64-linux-gnu/libdat2.so.2.0.0 datd.2.0 \"\" \"\"");

        cr_expect(dat_conf_entry_is_ours(&e));
        e = parse_ok("a u2.0 threadsafe default /opt/libdat2.so/libdaplofa.so.2 dapl.2.0 \"\" \"\"");
        cr_expect_not(dat_conf_entry_is_ours(&e));
}

Test(registry, blank_and_comment_lines_are_no_entries)
{
        static const char *const lines[] = { "", "\n", "   \t  \n", "# a comment\n",
                                             "   # indented comment", "#datd-shm u2.0 threadsafe" };

        for (size_t i = 0; i < sizeof(lines) / sizeof(lines[0]); i++) {
                struct dat_conf_entry e;
                const char *why = NULL;

                cr_expect_eq(dat_conf_parse_line(lines[i], &e, &why), 0, "\"%s\"", lines[i]);
        }
}

Test(registry, a_comment_may_follow_an_entry_and_a_hash_inside_quotes_is_text)
{
        struct dat_conf_entry e =
                parse_ok("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"a#b\" \"\" # trailing");

        cr_expect_str_eq(e.ia_params, "a#b");
}

Test(registry, malformed_lines_are_refused_with_a_reason)
{
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\""),
                         "fewer than 8 fields");
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\" extra"),
                         "more than 8 fields");
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm \"\""),
                         "text right after a closing quote");
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm \"\"\""),
                         "text right after a closing quote");
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm"),
                         "unterminated quoted field");
        cr_expect_str_eq(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd.2.0 sh\"m \"\""),
                         "quote inside an unquoted field");
        cr_expect_not_null(strstr(parse_bad("x v2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\""), "API version"));
        cr_expect_not_null(strstr(parse_bad("x k2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\""), "API version"));
        cr_expect_not_null(strstr(parse_bad("x u2 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\""), "API version"));
        cr_expect_not_null(strstr(parse_bad("x u2.x threadsafe default libdat2.so.2 datd.2.0 \"\" \"\""), "API version"));
        cr_expect_not_null(strstr(parse_bad("x u2.0 maybe default libdat2.so.2 datd.2.0 \"\" \"\""), "thread safety"));
        cr_expect_not_null(strstr(parse_bad("x u2.0 threadsafe always libdat2.so.2 datd.2.0 \"\" \"\""), "default"));
        cr_expect_not_null(strstr(parse_bad("x u2.0 threadsafe default libdat2.so.2 datd2 \"\" \"\""), "provider version"));
        cr_expect_not_null(strstr(parse_bad("x u2.0 threadsafe default libdat2.so.2 .2.0 \"\" \"\""), "provider version"));
        cr_expect_not_null(strstr(parse_bad("x u2.0 threadsafe default \"\" datd.2.0 \"\" \"\""), "library"));
        cr_expect_not_null(strstr(parse_bad("\"\" u2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\""), "IA name"));
}

Test(registry, an_ia_name_longer_than_dat_name_max_length_is_refused)
{
        char line[1024], name[DAT_NAME_MAX_LENGTH + 1];

        memset(name, 'n', DAT_NAME_MAX_LENGTH);
        name[DAT_NAME_MAX_LENGTH] = '\0';
        snprintf(line, sizeof(line), "%s u2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\"", name);
        cr_expect_not_null(strstr(parse_bad(line), "IA name"));
        name[DAT_NAME_MAX_LENGTH - 1] = '\0';
        snprintf(line, sizeof(line), "%s u2.0 threadsafe default libdat2.so.2 datd.2.0 \"\" \"\"", name);
        parse_ok(line);
}

static const char *const mixed_conf =
        "# test registry\n"
        "\n"
        "datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 \"shm\" \"\"\n"
        "broken line here\n"
        "ofa-v2-ib0 u2.0 nonthreadsafe default libdaplofa.so.2 dapl.2.0 \"ib0 0\" \"\"\n"
        "   # comment between entries\n"
        "datd-tcp u2.0 nonthreadsafe nondefault /usr/lib/libdat2.so.2 datd.2.0 \"tcp\" \"\"\n"
        "datd-new u2.3 threadsafe nondefault libdat2.so.2 datd.2.0 \"shm\" \"\"\n";

Test(registry, dat_override_names_the_file_and_every_good_line_is_an_entry)
{
        const char *path = use_dat_conf(mixed_conf);
        struct dat_conf conf;

        cr_assert_eq(dat_conf_load(&conf), 0);
        cr_expect_str_eq(conf.path, path);
        cr_expect(conf.overridden);
        cr_expect_eq(conf.read_errno, 0);
        cr_assert_eq(conf.n_entries, 4);
        cr_expect_str_eq(conf.entries[0].ia_name, "datd-shm");
        cr_expect_eq(conf.entries[0].line, 3);
        cr_expect_str_eq(conf.entries[1].ia_name, "ofa-v2-ib0");
        cr_expect_eq(conf.entries[1].line, 5);
        cr_expect_str_eq(conf.entries[2].ia_name, "datd-tcp");
        cr_expect_str_eq(conf.entries[3].ia_name, "datd-new");
        cr_expect_eq(conf.entries[3].api_minor, 3);
        dat_conf_free(&conf);
}

Test(registry, without_dat_override_the_file_is_sysconfdir_dat_conf)
{
        struct dat_conf conf;

        unsetenv("DAT_OVERRIDE");
        cr_assert_eq(dat_conf_load(&conf), 0);
        cr_expect_str_eq(conf.path, SYSCONFDIR "/dat.conf");
        cr_expect_not(conf.overridden);
        dat_conf_free(&conf);
        setenv("DAT_OVERRIDE", "", 1);
        cr_assert_eq(dat_conf_load(&conf), 0);
        cr_expect_str_eq(conf.path, SYSCONFDIR "/dat.conf");
        dat_conf_free(&conf);
}

Test(registry, a_missing_file_is_an_empty_registry_with_the_reason_kept)
{
        struct dat_conf conf;

        setenv("DAT_OVERRIDE", "/nonexistent/dat.conf", 1);
        cr_assert_eq(dat_conf_load(&conf), 0);
        cr_expect_eq(conf.n_entries, 0);
        cr_expect_eq(conf.read_errno, ENOENT);
        dat_conf_free(&conf);
}

Test(registry, skipped_lines_give_their_reason_in_the_debug_trace)
{
        const char *path = use_dat_conf(mixed_conf);
        struct dat_conf conf;
        char *trace, expect[256];

        trace_capture_begin();
        cr_assert_eq(dat_conf_load(&conf), 0);
        trace = trace_capture_end();
        snprintf(expect, sizeof(expect), "libdat: %s:4: skipped: fewer than 8 fields", path);
        cr_expect_not_null(strstr(trace, expect), "trace: %s", trace);
        dat_conf_free(&conf);
        free(trace);
}

Test(registry, without_the_debug_variables_nothing_is_printed)
{
        struct dat_conf conf;
        char *trace;

        use_dat_conf(mixed_conf);
        trace_capture_begin();
        unsetenv("DAT_DBG_TYPE");
        unsetenv("DATD_DEBUG");
        cr_assert_eq(dat_conf_load(&conf), 0);
        trace = trace_capture_end();
        cr_expect_str_eq(trace, "");
        dat_conf_free(&conf);
        free(trace);
}

Test(registry, datd_debug_turns_the_trace_on_too)
{
        struct dat_conf conf;
        char *trace;

        use_dat_conf(mixed_conf);
        trace_capture_begin();
        unsetenv("DAT_DBG_TYPE");
        setenv("DATD_DEBUG", "1", 1);
        cr_assert_eq(dat_conf_load(&conf), 0);
        trace = trace_capture_end();
        cr_expect_not_null(strstr(trace, "skipped: fewer than 8 fields"), "trace: %s", trace);
        dat_conf_free(&conf);
        free(trace);
}

/* ---- dat_registry_list_providers(3DAT) ---------------------------------- */

#define MAX_LIST 8

struct provider_list {
        DAT_PROVIDER_INFO info[MAX_LIST];
        DAT_PROVIDER_INFO *ptr[MAX_LIST];
};

static void provider_list_init(struct provider_list *l)
{
        memset(l->info, 0xa5, sizeof(l->info));
        for (int i = 0; i < MAX_LIST; i++)
                l->ptr[i] = &l->info[i];
}

Test(list_providers, lists_every_entry_of_this_library_and_of_others)
{
        struct provider_list l;
        DAT_COUNT n = -1;

        use_dat_conf(mixed_conf);
        provider_list_init(&l);
        cr_assert_eq(dat_registry_list_providers(MAX_LIST, &n, l.ptr), DAT_SUCCESS);
        cr_assert_eq(n, 4);
        cr_expect_str_eq(l.info[0].ia_name, "datd-shm");
        cr_expect_eq(l.info[0].dapl_version_major, 2);
        cr_expect_eq(l.info[0].dapl_version_minor, 0);
        cr_expect_eq(l.info[0].is_thread_safe, DAT_TRUE);
        /* Another library's: dat_ia_open loads it (test_providers). */
        cr_expect_str_eq(l.info[1].ia_name, "ofa-v2-ib0");
        cr_expect_eq(l.info[1].is_thread_safe, DAT_FALSE);
        cr_expect_str_eq(l.info[2].ia_name, "datd-tcp");
        cr_expect_eq(l.info[2].is_thread_safe, DAT_FALSE);
        cr_expect_str_eq(l.info[3].ia_name, "datd-new");
        cr_expect_eq(l.info[3].dapl_version_minor, 3);
        /* Entries past the count are not written. */
        cr_expect_eq(((unsigned char *)&l.info[4])[0], 0xa5);
}

Test(list_providers, a_short_array_gets_the_first_entries_and_their_count)
{
        struct provider_list l;
        DAT_COUNT n = -1;

        use_dat_conf(mixed_conf);
        provider_list_init(&l);
        cr_assert_eq(dat_registry_list_providers(2, &n, l.ptr), DAT_SUCCESS);
        cr_expect_eq(n, 2);
        cr_expect_str_eq(l.info[0].ia_name, "datd-shm");
        cr_expect_str_eq(l.info[1].ia_name, "ofa-v2-ib0");
        cr_expect_eq(((unsigned char *)&l.info[2])[0], 0xa5);
}

Test(list_providers, max_zero_reports_the_count_with_invalid_parameter)
{
        DAT_COUNT n = -1;

        use_dat_conf(mixed_conf);
        cr_expect_eq(dat_registry_list_providers(0, &n, NULL),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG1);
        cr_expect_eq(n, 4);
        n = -1;
        cr_expect_eq(dat_registry_list_providers(-5, &n, NULL),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG1);
        cr_expect_eq(n, 4);
}

Test(list_providers, null_arguments_are_invalid_parameters)
{
        struct provider_list l;
        DAT_COUNT n = -1;

        use_dat_conf(mixed_conf);
        provider_list_init(&l);
        cr_expect_eq(dat_registry_list_providers(MAX_LIST, NULL, l.ptr),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG2);
        cr_expect_eq(dat_registry_list_providers(MAX_LIST, &n, NULL),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
        l.ptr[1] = NULL;
        cr_expect_eq(dat_registry_list_providers(MAX_LIST, &n, l.ptr),
                     DAT_CLASS_ERROR | DAT_INVALID_PARAMETER | DAT_INVALID_ARG3);
}

Test(list_providers, no_file_means_no_providers)
{
        struct provider_list l;
        DAT_COUNT n = -1;

        setenv("DAT_OVERRIDE", "/nonexistent/dat.conf", 1);
        provider_list_init(&l);
        cr_expect_eq(dat_registry_list_providers(MAX_LIST, &n, l.ptr), DAT_SUCCESS);
        cr_expect_eq(n, 0);
}

Test(list_providers, the_shipped_dat_conf_lists_datd_shm_and_datd_tcp)
{
        char *path = source_path("etc/dat.conf");
        struct provider_list l;
        DAT_COUNT n = -1;

        cr_assert_not_null(path);
        setenv("DAT_OVERRIDE", path, 1);
        provider_list_init(&l);
        cr_assert_eq(dat_registry_list_providers(MAX_LIST, &n, l.ptr), DAT_SUCCESS);
        cr_assert_eq(n, 2);
        cr_expect_str_eq(l.info[0].ia_name, "datd-shm");
        cr_expect_str_eq(l.info[1].ia_name, "datd-tcp");
        free(path);
}
