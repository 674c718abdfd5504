/* libdat2.so.2 exports exactly the 74 functions of Debian's libdat2.so.2,
 * each with symbol version DAT_2.0, and no other defined dynamic symbol but
 * the version definition itself.  Read from the built library with
 * objdump -T. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "tests/harness.h"

/* objdump -T /usr/lib/x86_64-linux-gnu/libdat2.so.2 (Debian 12, libdat2 2.1.10). */
static const char *const expected[] = {
        "dat_cno_create", "dat_cno_free", "dat_cno_modify_agent", "dat_cno_query",
        "dat_cno_wait", "dat_cr_accept", "dat_cr_handoff", "dat_cr_query", "dat_cr_reject",
        "dat_ep_connect", "dat_ep_create", "dat_ep_create_with_srq", "dat_ep_disconnect",
        "dat_ep_dup_connect", "dat_ep_free", "dat_ep_get_status", "dat_ep_modify",
        "dat_ep_post_rdma_read", "dat_ep_post_rdma_write", "dat_ep_post_recv",
        "dat_ep_post_send", "dat_ep_query", "dat_ep_recv_query", "dat_ep_reset",
        "dat_ep_set_watermark", "dat_evd_clear_unwaitable", "dat_evd_create",
        "dat_evd_dequeue", "dat_evd_disable", "dat_evd_enable", "dat_evd_free",
        "dat_evd_modify_cno", "dat_evd_post_se", "dat_evd_query", "dat_evd_resize",
        "dat_evd_set_unwaitable", "dat_evd_wait", "dat_extension_op",
        "dat_get_consumer_context", "dat_get_handle_type", "dat_ia_close", "dat_ia_openv",
        "dat_ia_query", "dat_lmr_create", "dat_lmr_free", "dat_lmr_query",
        "dat_lmr_sync_rdma_read", "dat_lmr_sync_rdma_write", "dat_psp_create",
        "dat_psp_create_any", "dat_psp_free", "dat_psp_query", "dat_pz_create", "dat_pz_free",
        "dat_pz_query", "dat_registry_add_provider", "dat_registry_list_providers",
        "dat_registry_remove_provider", "dat_rmr_bind", "dat_rmr_create", "dat_rmr_free",
        "dat_rmr_query", "dat_rsp_create", "dat_rsp_free", "dat_rsp_query",
        "dat_set_consumer_context", "dat_srq_create", "dat_srq_free", "dat_srq_post_recv",
        "dat_srq_query", "dat_srq_resize", "dat_srq_set_lw", "dat_strerror",
        "dats_get_ia_handle",
};

static int expected_index(const char *name)
{
        for (size_t i = 0; i < ARRAY_SIZE(expected); i++)
                if (strcmp(expected[i], name) == 0)
                        return (int)i;
        return -1;
}

/* One line of objdump -T: "<addr> <flags...> <section> <size> <version> <name>".
 * The flags column has blanks in it, so the fields are taken from the end. */
struct dynsym {
        char section[64], version[64], name[256];
};

static bool parse_dynsym(char *line, struct dynsym *s)
{
        char *tok[16];
        int n = 0;

        for (char *t = strtok(line, " \t\n"); t && n < 16; t = strtok(NULL, " \t\n"))
                tok[n++] = t;
        /* address, at least one flag, section, size, version, name */
        if (n < 5 || strlen(tok[0]) != 16 || strspn(tok[0], "0123456789abcdef") != 16)
                return false;
        snprintf(s->name, sizeof(s->name), "%s", tok[n - 1]);
        snprintf(s->version, sizeof(s->version), "%s", tok[n - 2]);
        snprintf(s->section, sizeof(s->section), "%s", tok[n - 4]);
        return true;
}

Test(exports, exactly_the_74_debian_functions_with_version_dat_2_0)
{
        _cleanup_free_ char *lib = build_path("libdat/.libs/libdat2.so.2");
        char cmd[4200], line[1024];
        bool seen[ARRAY_SIZE(expected)] = { false };
        bool version_definition = false;
        size_t functions = 0;
        FILE *p;

        cr_assert_not_null(lib);
        cr_assert_eq(ARRAY_SIZE(expected), 74);
        snprintf(cmd, sizeof(cmd), "objdump -T '%s'", lib);
        p = popen(cmd, "r");
        cr_assert_not_null(p, "cannot run objdump");
        while (fgets(line, sizeof(line), p)) {
                struct dynsym s;
                int i;

                if (!parse_dynsym(line, &s) || strcmp(s.section, "*UND*") == 0)
                        continue;
                if (strcmp(s.name, "DAT_2.0") == 0 && strcmp(s.section, "*ABS*") == 0) {
                        version_definition = true;
                        continue;
                }
                i = expected_index(s.name);
                cr_expect_geq(i, 0, "unexpected exported symbol %s (%s)", s.name, s.version);
                cr_expect_str_eq(s.version, "DAT_2.0", "%s has version %s", s.name, s.version);
                if (i >= 0) {
                        cr_expect_not(seen[i], "%s exported twice", s.name);
                        seen[i] = true;
                }
                functions++;
        }
        cr_assert_eq(pclose(p), 0, "objdump -T %s failed", lib);
        cr_expect(version_definition, "no DAT_2.0 version definition");
        for (size_t i = 0; i < ARRAY_SIZE(expected); i++)
                cr_expect(seen[i], "%s is not exported", expected[i]);
        cr_expect_eq(functions, ARRAY_SIZE(expected));
}

Test(exports, soname_is_libdat2_so_2)
{
        _cleanup_free_ char *lib = build_path("libdat/.libs/libdat2.so.2");
        char cmd[4200], line[1024];
        bool soname = false;
        FILE *p;

        snprintf(cmd, sizeof(cmd), "objdump -p '%s'", lib);
        p = popen(cmd, "r");
        cr_assert_not_null(p);
        while (fgets(line, sizeof(line), p)) {
                char key[64], value[256];

                if (sscanf(line, " %63s %255s", key, value) == 2 && strcmp(key, "SONAME") == 0)
                        soname = strcmp(value, "libdat2.so.2") == 0;
        }
        cr_assert_eq(pclose(p), 0);
        cr_expect(soname, "SONAME is not libdat2.so.2");
}
