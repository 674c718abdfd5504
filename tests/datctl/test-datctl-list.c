/* datctl's list commands as data (daemon/datctl-list.c): the D-Bus types
 * they expect and how their JSON rows become table cells. */
#include <config.h>

#include <criterion/criterion.h>
#include <jansson.h>
#include <stdio.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/datctl-json.h"
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
        json_t *row = json_pack("{sI sI sI sI ss so ss sI si si sI}", "id", id, "pid", (json_int_t)4242,
                                "uid", uid, "gid", uid, "command", command, "ias", ias,
                                "connected_since", "(not read by the table)",
                                "connected_since_usec", (json_int_t)since, "objects", 5, "eps", 2,
                                "lmr_bytes", (json_int_t)1536);

        cr_assert_not_null(row);
        return row;
}

Test(datctl_list, client_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_clients);

        /* DBUS-API.md: ListClients() -> a(tuuusastuut) */
        cr_assert_str_eq(sig, "a(tuuusastuut)");
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
                         "ID  PID UID USER GID COMMAND IAS     EPS LMR BYTES SINCE                   AGE\n"
                         " 1 4242   0 root   0 mpirun  shm,tcp   2      1.5K 2001-09-09 01:46:40 UTC 1min 15s\n");
}

Test(datctl_list, a_client_without_ias_or_user_name_shows_dashes)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        _cleanup_free_ char *out = NULL;

        json_array_append_new(rows, client_row(2, 3999999999, "x", json_array(), BILLENNIUM_USEC));
        out = render(rows, &list_view_clients, BILLENNIUM_USEC);
        cr_assert_not_null(strstr(out, " 3999999999 -    3999999999 x       -     2      1.5K 2001"),
                           "%s", out);
}

Test(datctl_list, an_empty_list_is_just_the_header)
{
        _cleanup_(json_decrefp) json_t *rows = json_array();
        _cleanup_free_ char *out = render(rows, &list_view_ias, 0);

        cr_assert_str_eq(out, "NAME TRANSPORT ADAPTER ADDRESS STATE OPEN\n");
}

Test(datctl_list, ep_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_endpoints);

        /* DBUS-API.md: ListEndpoints() -> a(tussttsuuuuuu) */
        cr_assert_str_eq(sig, "a(tussttsuuuuuu)");
}

Test(datctl_list, object_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_objects);

        /* DBUS-API.md: ListObjects() -> a(tusssttstuu) */
        cr_assert_str_eq(sig, "a(tusssttstuu)");
}

Test(datctl_list, ep_rows_show_owner_handles_state_and_limits)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{sI sI ss ss ss ss ss si si si si si si}]", "client_id", (json_int_t)3, "pid",
                (json_int_t)4242, "command", "mpirun", "ia", "shm", "handle", "0x7f0010", "pz_handle",
                "0x7f0020", "state", "CONNECTED", "max_recv_dtos", 16, "max_request_dtos", 32,
                "max_recv_iov", 2, "max_request_iov", 3, "max_message_size", 65536, "id", 9);
        _cleanup_free_ char *out = render(rows, &list_view_endpoints, 0);

        cr_assert_str_eq(out,
                         "OWNER       IA  HANDLE   STATE     PZ       RECV REQUEST RECV-IOV REQ-IOV MAX-MSG ID\n"
                         "4242/mpirun shm 0x7f0010 CONNECTED 0x7f0020   16      32        2       3   64.0K  9\n");
}

Test(datctl_list, an_ep_without_a_pz_shows_a_dash)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{sI sI ss ss ss so ss si si si si si si}]", "client_id", (json_int_t)3, "pid",
                (json_int_t)1, "command", "x", "ia", "shm", "handle", "0x10", "pz_handle", json_null(),
                "state", "UNCONFIGURED_UNCONNECTED", "max_recv_dtos", 0, "max_request_dtos", 0,
                "max_recv_iov", 0, "max_request_iov", 0, "max_message_size", 0, "id", 1);
        _cleanup_free_ char *out = render(rows, &list_view_endpoints, 0);

        cr_assert_not_null(strstr(out, " 0x10   UNCONFIGURED_UNCONNECTED -  "), "%s", out);
}

Test(datctl_list, object_rows_show_length_and_qlen_only_where_they_apply)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{sI sI ss ss ss ss ss ss sI si si}, {sI sI ss ss ss ss so ss sI si si}]",
                "client_id", (json_int_t)3, "pid", (json_int_t)7, "command", "app", "ia", "tcp",
                "kind", "LMR", "handle", "0xa0", "pz_handle", "0xb0", "state", "", "length",
                (json_int_t)(3 << 20), "qlen", 0, "id", 1,
                "client_id", (json_int_t)3, "pid", (json_int_t)7, "command", "app", "ia", "tcp",
                "kind", "EVD", "handle", "0xc0", "pz_handle", json_null(), "state", "", "length",
                (json_int_t)0, "qlen", 1024, "id", 2);
        _cleanup_free_ char *out = render(rows, &list_view_objects, 0);

        cr_assert_str_eq(out,
                         "OWNER IA  KIND HANDLE PZ   STATE LENGTH QLEN ID\n"
                         "7/app tcp LMR  0xa0   0xb0 -       3.0M    -  1\n"
                         "7/app tcp EVD  0xc0   -    -          - 1024  2\n");
}

Test(datctl_list, listener_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_listeners);

        /* DBUS-API.md: ListListeners() -> a(tussstutu) */
        cr_assert_str_eq(sig, "a(tussstutu)");
}

Test(datctl_list, connection_list_expects_the_dbus_api_type)
{
        _cleanup_free_ char *sig = list_signature(&list_view_connections);
        _cleanup_free_ char *before = list_signature_n(&list_view_connections,
                                                       list_view_connections.n_fields_required);

        /* DBUS-API.md: ListConnections() -> a(utussssststttut); shm_bytes is
         * optional, for a datd from before the shm data channel. */
        cr_assert_str_eq(sig, "a(utussssststttut)");
        cr_assert_str_eq(before, "a(utussssststttu)");
}

Test(datctl_list, listener_rows_show_kind_conn_qual_and_requests)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{sI sI ss ss ss sI si sI si}]", "client_id", (json_int_t)3, "pid", (json_int_t)4242,
                "command", "server", "ia", "tcp", "kind", "PSP_ANY", "conn_qual", (json_int_t)49152,
                "pending", 2, "accepted", (json_int_t)17, "id", 5);
        _cleanup_free_ char *out = render(rows, &list_view_listeners, 0);

        cr_assert_str_eq(out,
                         "OWNER       IA  KIND    CONN_QUAL PENDING ACCEPTED ID\n"
                         "4242/server tcp PSP_ANY     49152       2       17  5\n");
}

Test(datctl_list, connection_rows_show_both_addresses_state_and_age)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{si sI sI ss ss ss ss ss sI ss sI sI sI si}]", "id", 7, "client_id", (json_int_t)3,
                "pid", (json_int_t)4242, "command", "client", "ia", "tcp", "role", "active",
                "local_address", "10.0.0.1", "remote_address", "10.0.0.2", "remote_conn_qual",
                (json_int_t)4000, "state", "ESTABLISHED", "age_usec", (json_int_t)(90 * SEC),
                "bytes_sent", (json_int_t)0, "bytes_received", (json_int_t)0, "peer_pid", 0);
        _cleanup_free_ char *out = render(rows, &list_view_connections, 0);

        cr_assert_not_null(strstr(out, "4242/client tcp active 10.0.0.1 10.0.0.2      4000    - "
                                       "ESTABLISHED 1min 30s"), "%s", out);
        cr_assert_null(strstr(out, "SHM"), "a column for a field datd did not send:\n%s", out);
}

/* DBUS-API.md, ListConnections(): shm_bytes, when datd sends it, is a
 * column of its own (a dash for 0: no shm channel). */
Test(datctl_list, connection_rows_show_the_shm_region_when_datd_sends_it)
{
        _cleanup_(json_decrefp) json_t *rows = json_pack(
                "[{si sI sI ss ss ss ss ss sI ss sI sI sI si sI},"
                " {si sI sI ss ss ss ss ss sI ss sI sI sI si sI}]",
                "id", 7, "client_id", (json_int_t)3, "pid", (json_int_t)4242, "command", "client",
                "ia", "shm", "role", "active", "local_address", "127.0.0.1", "remote_address",
                "127.0.0.1", "remote_conn_qual", (json_int_t)4000, "state", "ESTABLISHED",
                "age_usec", (json_int_t)(90 * SEC), "bytes_sent", (json_int_t)0,
                "bytes_received", (json_int_t)0, "peer_pid", 4243, "shm_bytes",
                (json_int_t)(528 << 10),
                "id", 8, "client_id", (json_int_t)3, "pid", (json_int_t)4242, "command", "client",
                "ia", "tcp", "role", "active", "local_address", "10.0.0.1", "remote_address",
                "10.0.0.2", "remote_conn_qual", (json_int_t)4000, "state", "ESTABLISHED",
                "age_usec", (json_int_t)(90 * SEC), "bytes_sent", (json_int_t)0,
                "bytes_received", (json_int_t)0, "peer_pid", 0, "shm_bytes", (json_int_t)0);
        _cleanup_free_ char *out = render(rows, &list_view_connections, 0);

        cr_assert_not_null(strstr(out, " RECEIVED    SHM ID\n"), "%s", out);
        cr_assert_not_null(strstr(out, "       0B 528.0K  7\n"), "%s", out);
        cr_assert_not_null(strstr(out, "       0B      -  8\n"), "%s", out);
}

/* ---- the JSON writer (daemon/datctl-json.c) ---------------------------------- */

static char *written(void (*write)(struct json_writer *w, const void *arg), const void *arg)
{
        struct json_writer w;
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        cr_assert_not_null(f);
        cr_assert_eq(json_writer_init(&w, f), 0);
        write(&w, arg);
        cr_assert_eq(json_writer_finish(&w), 0);
        fclose(f);
        return text;
}

static void write_string(struct json_writer *w, const void *arg)
{
        json_write_string(w, arg);
}

static void write_int(struct json_writer *w, const void *arg)
{
        json_write_int(w, *(const int64_t *)arg);
}

static void write_u64(struct json_writer *w, const void *arg)
{
        json_write_u64(w, *(const uint64_t *)arg);
}

/* datctl(8), --json: one format; a streamed string is what jansson prints
 * for it, for every ASCII character and for UTF-8 beyond. */
Test(datctl_list, json_strings_are_escaped_as_jansson_escapes_them)
{
        char s[4] = "a?b";

        for (int c = 1; c < 0x80; c++) {
                _cleanup_(json_decrefp) json_t *j = NULL;
                _cleanup_free_ char *ours = NULL, *theirs = NULL;

                s[1] = (char)c;
                j = json_string(s);
                cr_assert_not_null(j);
                theirs = json_dumps(j, JSON_ENCODE_ANY);
                ours = written(write_string, s);
                cr_assert_str_eq(ours, theirs, "character 0x%02x", c);
        }
        {
                static const char utf8[] = "\xc3\xa9\xe2\x80\xae\xf0\x9f\x98\x80 \xef\xbf\xbd";
                _cleanup_(json_decrefp) json_t *j = json_string(utf8);
                _cleanup_free_ char *ours = written(write_string, utf8);
                _cleanup_free_ char *theirs = json_dumps(j, JSON_ENCODE_ANY);

                cr_assert_str_eq(ours, theirs);
        }
}

/* DBUS-API.md: counters are JSON integers; jansson's are signed 64-bit, so
 * a uint64_t above INT64_MAX shows as INT64_MAX in every output. */
Test(datctl_list, json_integers_are_printed_in_full)
{
        static const int64_t ints[] = { 0, 1, -1, 42, INT64_MAX, INT64_MIN, -1234567890123LL };
        static const uint64_t big = UINT64_MAX;

        for (size_t i = 0; i < ARRAY_SIZE(ints); i++) {
                _cleanup_(json_decrefp) json_t *j = json_integer(ints[i]);
                _cleanup_free_ char *ours = written(write_int, &ints[i]);
                _cleanup_free_ char *theirs = json_dumps(j, JSON_ENCODE_ANY);

                cr_assert_str_eq(ours, theirs);
        }
        {
                _cleanup_free_ char *ours = written(write_u64, &big);

                cr_assert_str_eq(ours, "9223372036854775807");
        }
}
