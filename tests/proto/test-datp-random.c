/* datp_validate() on random input (fixed seed, bounded): it never crashes,
 * never reads past the bytes given (each input is an exact-size heap block,
 * so ASan builds catch any overread), and never accepts a message that breaks
 * the framing rules.  libFuzzer (proto/fuzz_datp_validate.c) goes further;
 * this keeps the rule in every `make check`. */
#include "config.h"

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "tests/proto/datp_samples.h"

#define ITERATIONS 200000

static uint64_t rng_state = 0x9e3779b97f4a7c15ull;

/* xorshift64*: deterministic across libcs, unlike rand(). */
static uint64_t rng(void)
{
        rng_state ^= rng_state >> 12;
        rng_state ^= rng_state << 25;
        rng_state ^= rng_state >> 27;
        return rng_state * 0x2545f4914f6cdd1dull;
}

static size_t rng_below(size_t n)
{
        return (size_t) (rng() % n);
}

static void fill_random(unsigned char *p, size_t n)
{
        for (size_t i = 0; i < n; i++)
                p[i] = (unsigned char) rng();
}

/* Random bytes of a random length, sometimes a little past the maximum. */
static size_t make_noise(union datp_message *m)
{
        size_t len = rng_below(DATP_MAX_MESSAGE + 1);

        fill_random(m->bytes, len);
        return len;
}

/* Random bytes behind a header that passes framing: magic and length right,
 * type and version drawn from near the real ones. */
static size_t make_framed_noise(union datp_message *m)
{
        const struct datp_sample *s = &datp_samples[rng_below(datp_n_samples)];
        size_t len = rng_below(4) ? datp_message_size(s->type) : rng_below(DATP_MAX_MESSAGE + 1);

        if (len < sizeof(struct datp_header))
                len = sizeof(struct datp_header);
        fill_random(m->bytes, len);
        /* Every version state the loop below validates in, the rules of
         * later versions (kept channels) included. */
        datp_header_init(&m->hdr, rng_below(8) ? s->type : (uint16_t) rng(),
                         (uint16_t) rng_below(DATP_VERSION_MAX + 2), len, (uint32_t) rng());
        return len;
}

/* A valid sample with a few bytes flipped and, now and then, a new length. */
static size_t make_mutated_sample(union datp_message *m)
{
        const struct datp_sample *s = &datp_samples[rng_below(datp_n_samples)];
        size_t len = datp_sample_build(s, m);
        size_t flips = 1 + rng_below(8);

        for (size_t i = 0; i < flips; i++)
                m->bytes[rng_below(len)] ^= (unsigned char) (1u << rng_below(8));
        if (rng_below(4) == 0) {
                len = sizeof(struct datp_header) + rng_below(DATP_MAX_MESSAGE - sizeof(struct datp_header) + 1);
                if (rng_below(2))
                        m->hdr.length = len;
        }
        return len;
}

/* Validates and checks what an acceptance implies; returns the result. */
static int validate_checked(const unsigned char *buf, size_t len, unsigned nfds,
                            enum datp_direction dir, uint16_t version)
{
        struct datp_header hdr;
        int r = datp_validate(buf, len, nfds, dir, version, NULL);

        cr_assert(r <= DATP_OK && r >= -DATP_E_STATE, "result %d out of range", r);
        if (r != DATP_OK)
                return r;
        memcpy(&hdr, buf, sizeof(hdr));
        cr_assert_eq(hdr.magic, DATP_MAGIC);
        cr_assert_eq(hdr.length, len);
        cr_assert_eq(datp_message_size(hdr.type), len, "accepted %s of %zu bytes",
                     datp_type_name(hdr.type), len);
        cr_assert_eq(nfds, 0);
        cr_assert(version == 0 || hdr.version == version);
        return r;
}

Test(datp_random, random_input_never_crashes_and_never_breaks_framing, .timeout = 120)
{
        static size_t (*const makers[])(union datp_message *) = {
                make_noise, make_framed_noise, make_mutated_sample,
        };
        static const enum datp_direction dirs[] = { DATP_TO_DAEMON, DATP_TO_CLIENT };
        size_t accepted = 0;

        for (unsigned i = 0; i < ITERATIONS; i++) {
                union datp_message m;
                size_t len = makers[i % 3](&m);
                unsigned char *exact = malloc(len ? len : 1);

                cr_assert_not_null(exact);
                memcpy(exact, &m, len);
                for (uint16_t version = 0; version <= DATP_VERSION_MAX + 1; version++)
                        for (size_t d = 0; d < 2; d++)
                                accepted += validate_checked(exact, len, 0, dirs[d], version) == DATP_OK;
                validate_checked(exact, len, 1, dirs[i % 2], 1);
                free(exact);
        }
        /* The mutations must sometimes leave a valid message, or the loop only
         * ever exercised the first checks. */
        cr_expect_gt(accepted, 0);
}
