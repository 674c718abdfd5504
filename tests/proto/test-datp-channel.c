/* datp_validate(): EV_DATA_CHANNEL (PROTOCOL.md, "EV_DATA_CHANNEL", "Kept
 * channels" and section 8), the one message that carries descriptors.
 * Each test starts from a valid shm or tcp channel, breaks one rule and
 * expects the refusal; where a rule has a boundary, the value just inside
 * is accepted. */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include "tests/proto/datp_samples.h"

TestSuite(datp_channel, .timeout = 10);

static union datp_message m;
static unsigned attached;       /* descriptors "attached" to m */
static uint16_t version;        /* negotiated, and m's */

/* A valid shm channel of version 1: side 0, 4 descriptors (with the
 * pidfd). */
static void start_shm(void)
{
        memset(&m, 0, sizeof(m));
        version = 1;
        datp_header_init(&m.hdr, DATP_EV_DATA_CHANNEL, version, sizeof(m.ev_data_channel), 0);
        m.ev_data_channel.ia_id = 7;
        m.ev_data_channel.conn_id = 11;
        m.ev_data_channel.ep_handle = 0x7f0000000700ull;
        m.ev_data_channel.kind = DATP_CHANNEL_SHM;
        m.ev_data_channel.nfds = attached = 4;
        m.ev_data_channel.ring_size = 262144;
        m.ev_data_channel.region_size = 4096 + 2 * (4096 + 262144);
        m.ev_data_channel.peer_pid = 4242;
        m.ev_data_channel.peer_uid = 1000;
}

/* A valid shm channel of version 3 with pipes for doorbells: 5
 * descriptors (with the pidfd). */
static void start_shm_pipes(void)
{
        start_shm();
        version = 3;
        m.hdr.version = version;
        m.ev_data_channel.flags = DATP_CHANNEL_PIPES;
        m.ev_data_channel.nfds = attached = 5;
}

/* A valid kept shm channel of version 4, sent for the first time: pipes,
 * KEEP, a channel_id, 5 descriptors (with the pidfd). */
static void start_shm_kept(void)
{
        start_shm_pipes();
        version = 4;
        m.hdr.version = version;
        m.ev_data_channel.flags = DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP;
        m.ev_data_channel.channel_id = 9;
}

/* The same channel handed out again: REUSE, no descriptors. */
static void start_shm_reused(void)
{
        start_shm_kept();
        m.ev_data_channel.flags |= DATP_CHANNEL_REUSE;
        m.ev_data_channel.nfds = attached = 0;
}

static void start_tcp(void)
{
        start_shm();
        m.ev_data_channel.kind = DATP_CHANNEL_TCP;
        m.ev_data_channel.nfds = attached = 1;
        m.ev_data_channel.ring_size = 0;
        m.ev_data_channel.region_size = 0;
        m.ev_data_channel.peer_pid = 0;
        m.ev_data_channel.peer_uid = 0;
}

static void expect_as(enum datp_direction dir, int code)
{
        const char *reason = NULL;
        int r = datp_validate(&m, m.hdr.length, attached, dir, version, &reason);

        cr_expect_eq(r, code, "got %d (%s), want %d", r, reason ? reason : "accepted", code);
        if (r < 0)
                cr_expect_not_null(reason);
}

static void expect(int code)
{
        expect_as(DATP_TO_CLIENT, code);
}

/* PROTOCOL.md: EV_DATA_CHANNEL, 72 bytes, datd -> client. */
Test(datp_channel, valid_shm_and_tcp_channels_are_accepted)
{
        cr_expect_eq(datp_message_size(DATP_EV_DATA_CHANNEL), 72);
        cr_expect_str_eq(datp_type_name(DATP_EV_DATA_CHANNEL), "EV_DATA_CHANNEL");
        start_shm();
        expect(DATP_OK);
        m.ev_data_channel.side = 1;
        expect(DATP_OK);
        /* nfds 3: no pidfd of the peer. */
        m.ev_data_channel.nfds = attached = 3;
        expect(DATP_OK);
        start_tcp();
        expect(DATP_OK);
}

/* Section 5: events go datd -> client only. */
Test(datp_channel, is_refused_sent_to_datd)
{
        start_shm();
        expect_as(DATP_TO_DAEMON, -DATP_E_DIRECTION);
}

/* Section 8: exactly nfds descriptors, 1..4. */
Test(datp_channel, descriptor_count_must_match_nfds)
{
        start_shm();
        attached = 3;
        expect(-DATP_E_FDS);
        attached = 5;
        expect(-DATP_E_FDS);
        attached = 0;
        expect(-DATP_E_FDS);
        start_tcp();
        attached = 0;
        expect(-DATP_E_FDS);
        attached = 2;
        expect(-DATP_E_FDS);
        m.ev_data_channel.nfds = attached = DATP_CHANNEL_MAX_FDS + 1;
        expect(-DATP_E_FDS);
}

/* Section 8: every other type still refuses descriptors, both ways. */
Test(datp_channel, other_types_still_refuse_descriptors)
{
        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message x;
                size_t len = datp_sample_build(s, &x);

                for (unsigned n = 1; n <= DATP_CHANNEL_MAX_FDS; n++)
                        cr_expect_eq(datp_validate(&x, len, n, s->dir, s->version, NULL), -DATP_E_FDS,
                                     "%s with %u descriptors", datp_type_name(s->type), n);
        }
}

/* The count must fit the kind: shm 3 or 4, tcp 1. */
Test(datp_channel, nfds_must_fit_the_kind)
{
        start_shm();
        m.ev_data_channel.nfds = attached = 2;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.nfds = attached = 1;
        expect(-DATP_E_FIELD);
        start_tcp();
        m.ev_data_channel.nfds = attached = 3;
        expect(-DATP_E_FIELD);
}

Test(datp_channel, kind_must_be_shm_or_tcp)
{
        start_tcp();
        m.ev_data_channel.kind = 0;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.kind = 3;
        expect(-DATP_E_FIELD);
}

/* shm: side 0 or 1. */
Test(datp_channel, shm_side_is_0_or_1)
{
        start_shm();
        m.ev_data_channel.side = 2;
        expect(-DATP_E_FIELD);
}

/* shm: ring_size a power of two in [4096, 64 MiB]. */
Test(datp_channel, shm_ring_size_is_a_power_of_two_in_range)
{
        start_shm();
        m.ev_data_channel.ring_size = 4096;
        m.ev_data_channel.region_size = 3 * 4096 + 2 * 4096;
        expect(DATP_OK);
        m.ev_data_channel.ring_size = 2048;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.ring_size = 12288;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.ring_size = 64u << 20;
        m.ev_data_channel.region_size = 3 * 4096 + 2 * (64ull << 20);
        expect(DATP_OK);
        m.ev_data_channel.ring_size = 128u << 20;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.ring_size = 0;
        expect(-DATP_E_FIELD);
}

/* shm: the region must at least hold the two rings. */
Test(datp_channel, shm_region_size_holds_two_rings)
{
        start_shm();
        m.ev_data_channel.region_size = 2 * 262144;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.region_size = 2 * 262144 + 1;
        expect(DATP_OK);
        m.ev_data_channel.region_size = (256ull << 20) + 1;
        expect(-DATP_E_FIELD);
}

/* tcp: the shm fields are 0. */
Test(datp_channel, tcp_has_no_shm_fields)
{
        start_tcp();
        m.ev_data_channel.ring_size = 4096;
        expect(-DATP_E_FIELD);
        start_tcp();
        m.ev_data_channel.region_size = 1;
        expect(-DATP_E_FIELD);
        start_tcp();
        m.ev_data_channel.side = 1;
        expect(-DATP_E_FIELD);
}

Test(datp_channel, ids_flags_reserved_and_request_id)
{
        start_shm();
        m.ev_data_channel.conn_id = 0;
        expect(-DATP_E_FIELD);
        start_shm();
        m.ev_data_channel.ep_handle = 0;
        expect(-DATP_E_FIELD);
        start_shm();
        m.ev_data_channel.flags = 1;
        expect(-DATP_E_FIELD);
        start_shm();
        m.ev_data_channel.flags = 2;
        expect(-DATP_E_FIELD);
        start_shm();
        m.ev_data_channel.channel_id = 1;
        expect(-DATP_E_FIELD);
        start_shm();
        m.hdr.request_id = 1;
        expect(-DATP_E_FIELD);
}

/* peer_pid >= 0; peer_uid only with a peer_pid. */
Test(datp_channel, peer_pid_and_uid)
{
        start_shm();
        m.ev_data_channel.peer_pid = -1;
        expect(-DATP_E_FIELD);
        start_tcp();
        m.ev_data_channel.peer_uid = 5;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.peer_pid = 77;
        expect(DATP_OK);
}

/* Section 7: framing and size come before descriptors. */
Test(datp_channel, wrong_size_is_a_size_error_not_a_descriptor_error)
{
        start_shm();
        m.hdr.length = sizeof(m.ev_data_channel) + 8;
        cr_expect_eq(datp_validate(&m, m.hdr.length, attached, DATP_TO_CLIENT, 1, NULL), -DATP_E_SIZE);
        start_shm();
        cr_expect_eq(datp_validate(&m, m.hdr.length, attached, DATP_TO_CLIENT, 0, NULL), -DATP_E_STATE);
}

/* Version 3: DATP_CHANNEL_PIPES, shm doorbells that are pipes, one more
 * descriptor (a read end of the peer's pipe): 4 or 5 of them. */
Test(datp_channel, pipes_are_version_3s_for_shm_with_4_or_5_descriptors)
{
        start_shm_pipes();
        expect(DATP_OK);
        m.ev_data_channel.nfds = attached = 4;
        expect(DATP_OK);
        m.ev_data_channel.nfds = attached = 3;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.nfds = attached = DATP_CHANNEL_MAX_FDS + 1;
        expect(-DATP_E_FDS);
        /* Without the flag, version 3 is version 1's shm: 3 or 4. */
        start_shm_pipes();
        m.ev_data_channel.flags = 0;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.nfds = attached = 4;
        expect(DATP_OK);
        /* Not before version 3, not on tcp, no other flag. */
        start_shm_pipes();
        version = m.hdr.version = 2;
        expect(-DATP_E_FIELD);
        start_shm_pipes();
        m.ev_data_channel.kind = DATP_CHANNEL_TCP;
        m.ev_data_channel.nfds = attached = 1;
        m.ev_data_channel.ring_size = 0;
        m.ev_data_channel.region_size = 0;
        expect(-DATP_E_FIELD);
        start_shm_pipes();
        m.ev_data_channel.flags |= 4;
        expect(-DATP_E_FIELD);
}

/* Version 4: DATP_CHANNEL_KEEP, on shm with pipes only, and never without
 * the channel_id the client keeps it under. */
Test(datp_channel, keep_is_version_4s_and_needs_pipes_and_an_id)
{
        start_shm_kept();
        expect(DATP_OK);
        m.ev_data_channel.nfds = attached = 4;
        expect(DATP_OK); /* no pidfd */
        m.ev_data_channel.channel_id = UINT32_MAX;
        expect(DATP_OK);
        start_shm_kept();
        version = m.hdr.version = 3;
        expect(-DATP_E_FIELD);
        /* Without pipes: socketpair doorbells, 3 or 4 descriptors. */
        start_shm_kept();
        m.ev_data_channel.flags = DATP_CHANNEL_KEEP;
        m.ev_data_channel.nfds = attached = 4;
        expect(-DATP_E_FIELD);
        start_shm_kept();
        m.ev_data_channel.channel_id = 0;
        expect(-DATP_E_FIELD);
        start_tcp();
        version = m.hdr.version = 4;
        m.ev_data_channel.flags = DATP_CHANNEL_KEEP;
        m.ev_data_channel.channel_id = 9;
        expect(-DATP_E_FIELD);
}

/* channel_id (version 3 and before: reserved) names a kept channel only. */
Test(datp_channel, channel_id_without_keep_is_refused)
{
        start_shm_kept();
        m.ev_data_channel.flags = DATP_CHANNEL_PIPES;
        expect(-DATP_E_FIELD);
        m.ev_data_channel.channel_id = 0;
        expect(DATP_OK);
        start_shm_pipes();
        m.ev_data_channel.channel_id = 9;
        expect(-DATP_E_FIELD);
        start_tcp();
        version = m.hdr.version = 4;
        m.ev_data_channel.channel_id = 9;
        expect(-DATP_E_FIELD);
}

/* Version 4 defines three flags; the others are still refused. */
Test(datp_channel, flags_beyond_reuse_are_refused)
{
        start_shm_kept();
        m.ev_data_channel.flags |= 0x8;
        expect(-DATP_E_FIELD);
        start_shm_kept();
        m.ev_data_channel.flags |= 0x80000000u;
        expect(-DATP_E_FIELD);
}

/* Section 8: an EV_DATA_CHANNEL that travels on its own carries its
 * descriptors; a reused channel (REUSE, nfds 0) is only ever the one an
 * EV_CONN_KEPT stands for. */
Test(datp_channel, a_reused_channel_comes_only_in_ev_conn_kept)
{
        start_shm_reused();
        expect(-DATP_E_FDS);
        attached = 5;
        expect(-DATP_E_FDS);
        m.ev_data_channel.nfds = 5;
        expect(-DATP_E_FIELD);
        /* channel_id 0 too, so that only REUSE (without KEEP) is wrong. */
        m.ev_data_channel.flags = DATP_CHANNEL_PIPES | DATP_CHANNEL_REUSE;
        m.ev_data_channel.channel_id = 0;
        expect(-DATP_E_FIELD);
        /* A kept channel sent the first time still needs its descriptors. */
        start_shm_kept();
        m.ev_data_channel.nfds = attached = 0;
        expect(-DATP_E_FDS);
}

/* ---- EV_CONN_KEPT (version 4): a reused channel and its ESTABLISHED ------ */

/* The sample (tests/proto/datp_samples.c): valid. */
static void start_conn_kept(void)
{
        memset(&m, 0, sizeof(m));
        version = 4;
        attached = 0;
        datp_sample_build(datp_sample_of(DATP_EV_CONN_KEPT), &m);
}

/* PROTOCOL.md, EV_CONN_KEPT: exactly the EV_DATA_CHANNEL (PIPES | KEEP |
 * REUSE, no descriptors) and the EV_CONN ESTABLISHED it stands for. */
Test(datp_channel, conn_kept_splits_into_a_reused_channel_and_established)
{
        struct datp_ev_data_channel ch;
        struct datp_ev_conn ev;

        start_conn_kept();
        datp_ev_conn_kept_split(&m.ev_conn_kept, &ch, &ev);
        cr_expect_eq(ch.hdr.type, DATP_EV_DATA_CHANNEL);
        cr_expect_eq(ch.hdr.version, 4);
        cr_expect_eq(ch.hdr.length, sizeof(ch));
        cr_expect_eq(ch.hdr.request_id, 0);
        cr_expect_eq(ch.ia_id, 7);
        cr_expect_eq(ch.conn_id, 11);
        cr_expect_eq(ch.ep_handle, 0x7f0000000700ull);
        cr_expect_eq(ch.kind, DATP_CHANNEL_SHM);
        cr_expect_eq(ch.nfds, 0);
        cr_expect_eq(ch.flags, DATP_CHANNEL_PIPES | DATP_CHANNEL_KEEP | DATP_CHANNEL_REUSE);
        cr_expect_eq(ch.channel_id, 9);
        cr_expect_eq(ch.side, 1);
        cr_expect_eq(ch.ring_size, 262144);
        cr_expect_eq(ch.region_size, m.ev_conn_kept.region_size);
        cr_expect_eq(ch.peer_pid, 4242);
        cr_expect_eq(ch.peer_uid, 1000);
        cr_expect_eq(ev.hdr.type, DATP_EV_CONN);
        cr_expect_eq(ev.hdr.length, sizeof(ev));
        cr_expect_eq(ev.conn_id, 11);
        cr_expect_eq(ev.ep_handle, 0x7f0000000700ull);
        cr_expect_eq(ev.event, DATP_EV_CONN_ESTABLISHED);
        cr_expect_eq(ev.pd_len, m.ev_conn_kept.pd_len);
        cr_expect_arr_eq(ev.private_data, m.ev_conn_kept.private_data, sizeof(ev.private_data));
        /* The ESTABLISHED is valid on its own; the reused channel only
         * inside the EV_CONN_KEPT (a_reused_channel_comes_only_in_ev_conn_kept). */
        cr_expect_eq(datp_validate(&ev, sizeof(ev), 0, DATP_TO_CLIENT, 4, NULL), DATP_OK);
        cr_expect_eq(datp_validate(&ch, sizeof(ch), 0, DATP_TO_CLIENT, 4, NULL), -DATP_E_FDS);
        cr_expect_eq(datp_validate(&m, sizeof(m.ev_conn_kept), 0, DATP_TO_CLIENT, 4, NULL),
                     DATP_OK);
}

/* A reused channel keeps each instance's side, whichever end is active. */
Test(datp_channel, conn_kept_may_name_either_side)
{
        start_conn_kept();
        m.ev_conn_kept.side = 0;
        expect(DATP_OK);
        m.ev_conn_kept.side = 1;
        expect(DATP_OK);
        m.ev_conn_kept.side = 2;
        expect(-DATP_E_FIELD);
}

/* Its fields obey the rules of the two events it stands for. */
Test(datp_channel, conn_kept_checks_what_it_stands_for)
{
        start_conn_kept();
        expect(DATP_OK);
        m.ev_conn_kept.channel_id = 0;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.side = 2;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.ring_size = 262144 + 4096;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.ring_size = 12288;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.region_size = 2 * 262144;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.peer_pid = 0;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.conn_id = 0;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.pd_len = DATP_PRIVATE_DATA_MAX + 1;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.ev_conn_kept.private_data[DATP_PRIVATE_DATA_MAX - 1] = 1;
        m.ev_conn_kept.pd_len = 1;
        expect(-DATP_E_FIELD);
        start_conn_kept();
        m.hdr.request_id = 3;
        expect(-DATP_E_FIELD);
}
