/* datctl's list commands as data (daemon/datctl-list.c): the D-Bus types
 * they expect and how their JSON rows become table cells. */
#include <config.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/datctl-list.h"

#define SEC UINT64_C(1000000)
#define BILLENNIUM_USEC (UINT64_C(1000000000) * SEC)

static char *render(json_t *rows, const struct list_view *v, uint64_t now)
{
        _cleanup_(table_freep) struct table *t = NULL;
        char *text = NULL;
        size_t len = 0;
        FILE *f;

        cr_assert_eq(list_to_table(rows, v, now, &t), 0);
        f = open_memstream(&text, &len);
        cr_assert_not_null(f);
        cr_assert_eq(table_print(t, f, &(struct table_print_options) { .header = true }), 0);
        fclose(f);
        return text;
}

static json_t *client_row(json_int_t id, json_int_t uid, const char *command, json_t *ias,
                          uint64_t since)
{
        json_t *row = json_pack("{sI sI sI sI ss so ss sI}", "id", id, "pid", (json_int_t)4242,
                                "uid", uid, "gid", uid, "command", command, "ias", ias,
                                "connected_since", "(not read by the table)",
                                "connected_since_usec", (json_int_t)since);

        cr_assert_not_null(row);
        return row;
}

Test(datctl_list, client_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_clients);

        /* DBUS-API.md: ListClients() -> a(tuuusast) */
        cr_assert_str_eq(sig, "a(tuuusast)");
}

Test(datctl_list, ia_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_ias);

        /* DBUS-API.md: ListIAs() -> name, transport, adapter, address, state, open */
        cr_assert_str_eq(sig, "a(sssssu)");
}

Test(datctl_list, ia_rows_show_every_field_in_order)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{ss ss ss ss ss si}]", "name", "tcp", "transport", "tcp", "adapter", "lo",
                "address", "127.0.0.1", "state", "up", "open", 3);
        _cleanup_free_ char *out = render(rows, &list_view_ias, 0);

        cr_assert_str_eq(out, "NAME TRANSPORT ADAPTER ADDRESS   STATE OPEN\n"
                              "tcp  tcp       lo      127.0.0.1 up       3\n");
}

Test(datctl_list, an_empty_address_shows_a_dash)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{ss ss ss ss ss si}]", "name", "shm", "transport", "shm", "adapter", "shm",
                "address", "", "state", "up", "open", 0);
        _cleanup_free_ char *out = render(rows, &list_view_ias, 0);

        cr_assert_not_null(strstr(out, "shm  shm       shm     -       up"), "%s", out);
}

Test(datctl_list, client_rows_show_user_joined_ias_time_and_age)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        _cleanup_free_ char *out = NULL;

        json_array_append_new(rows, client_row(1, 0, "mpirun", json_pack("[ss]", "shm", "tcp"),
                                               BILLENNIUM_USEC));
        out = render(rows, &list_view_clients, BILLENNIUM_USEC + 75 * SEC);
        cr_assert_str_eq(out,
                         "ID  PID UID USER GID COMMAND IAS     SINCE                   AGE\n"
                         " 1 4242   0 root   0 mpirun  shm,tcp 2001-09-09 01:46:40 UTC 1min 15s\n");
}

Test(datctl_list, a_client_without_ias_or_user_name_shows_dashes)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        _cleanup_free_ char *out = NULL;

        json_array_append_new(rows, client_row(2, 3999999999, "x", json_array(), BILLENNIUM_USEC));
        out = render(rows, &list_view_clients, BILLENNIUM_USEC);
        cr_assert_not_null(strstr(out, " 3999999999 -    3999999999 x       -   2001"), "%s", out);
}

Test(datctl_list, an_empty_list_is_just_the_header)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        _cleanup_free_ char *out = render(rows, &list_view_ias, 0);

        cr_assert_str_eq(out, "NAME TRANSPORT ADAPTER ADDRESS STATE OPEN\n");
}
