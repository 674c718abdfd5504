/* daemon/host_addrs.c: which addresses are this host's, kept between
 * connects and read again when the kernel announces a change.  Each test
 * runs in a network namespace of its own (criterion forks a process per
 * test), where it adds and removes addresses on the loopback. */
#include "config.h"

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "daemon/host_addrs.h"

static sd_event *event;
static HostAddrs *addrs;

static void setup(void)
{
        cr_assert_eq(unshare(CLONE_NEWNET), 0, "unshare(CLONE_NEWNET): %m (needs root)");
        cr_assert_eq(system("ip link set lo up"), 0);
        cr_assert_geq(sd_event_new(&event), 0);
        cr_assert_eq(host_addrs_new(event, &addrs), 0);
}

static void teardown(void)
{
        addrs = host_addrs_free(addrs);
        event = sd_event_unref(event);
}

TestSuite(datd_host_addrs, .init = setup, .fini = teardown, .timeout = 30);

static bool holds(const char *text)
{
        struct sockaddr_storage ss = { 0 };

        if (strchr(text, ':')) {
                struct sockaddr_in6 *a = (struct sockaddr_in6 *) &ss;

                a->sin6_family = AF_INET6;
                cr_assert_eq(inet_pton(AF_INET6, text, &a->sin6_addr), 1);
        } else {
                struct sockaddr_in *a = (struct sockaddr_in *) &ss;

                a->sin_family = AF_INET;
                cr_assert_eq(inet_pton(AF_INET, text, &a->sin_addr), 1);
        }
        return host_addrs_holds(addrs, (const struct sockaddr *) &ss);
}

static void ip(const char *args)
{
        char cmd[256];

        snprintf(cmd, sizeof(cmd), "ip %s", args);
        cr_assert_eq(system(cmd), 0, "%s", cmd);
}

Test(datd_host_addrs, the_loopback_is_the_hosts_and_others_are_not)
{
        cr_expect(holds("127.0.0.1"));
        cr_expect(holds("::1"));
        cr_expect_not(holds("10.213.251.7"));
        cr_expect_not(holds("fd00:da7d:fb::7"));
}

/* Asked before and after each change, without the event loop running in
 * between: the announcements waiting are read by the question itself. */
Test(datd_host_addrs, an_address_added_or_removed_counts_at_the_next_question)
{
        cr_assert_not(holds("10.213.251.7"));
        cr_assert_not(holds("fd00:da7d:fb::7"));
        ip("addr add 10.213.251.7/32 dev lo");
        ip("-6 addr add fd00:da7d:fb::7/128 dev lo nodad");
        cr_expect(holds("10.213.251.7"), "an address added is still unknown");
        cr_expect(holds("fd00:da7d:fb::7"), "an IPv6 address added is still unknown");
        cr_expect_not(holds("10.213.251.8"));
        ip("addr del 10.213.251.7/32 dev lo");
        cr_expect_not(holds("10.213.251.7"), "an address removed is still known");
        cr_expect(holds("fd00:da7d:fb::7"));
        ip("-6 addr del fd00:da7d:fb::7/128 dev lo");
        cr_expect_not(holds("fd00:da7d:fb::7"), "an IPv6 address removed is still known");
}

/* The same with the event loop dispatching the announcements between the
 * questions, as datd's loop does. */
Test(datd_host_addrs, announcements_dispatched_by_the_loop_count_too)
{
        cr_assert_not(holds("10.213.251.9"));
        ip("addr add 10.213.251.9/32 dev lo");
        while (sd_event_run(event, 0) > 0)
                ;
        cr_expect(holds("10.213.251.9"));
        ip("addr del 10.213.251.9/32 dev lo");
        while (sd_event_run(event, 0) > 0)
                ;
        cr_expect_not(holds("10.213.251.9"));
}
