/* The field tests' one pattern: build a valid sample of a type (start()),
 * break one rule in m, and expect datp_validate()'s verdict (expect()).
 * Included by each criterion program that follows it; the message under
 * test is that program's own. */
#ifndef DATD_TESTS_PROTO_DATP_EXPECT_H
#define DATD_TESTS_PROTO_DATP_EXPECT_H

#include <criterion/criterion.h>

#include "tests/proto/datp_samples.h"

/* The message under test and the sample it was built from. */
static union datp_message m;
static const struct datp_sample *s;

static void start(uint16_t type)
{
        s = datp_sample_build_type(type, &m);
}

/* A refusal always comes with its reason.  version: the negotiated one. */
static void expect_validated(uint16_t version, int code)
{
        const char *reason = NULL;
        int r = datp_validate(&m, m.hdr.length, 0, s->dir, version, &reason);

        cr_expect_eq(r, code, "%s: got %d (%s), want %d", datp_type_name(s->type), r,
                     reason ? reason : "accepted", code);
        if (r < 0)
                cr_expect_not_null(reason);
}

static void expect(int code)
{
        expect_validated(s->version, code);
}

/* The same with version negotiated instead of the sample's: the header
 * carries it. */
static inline void expect_in_version(uint16_t version, int code)
{
        m.hdr.version = version;
        expect_validated(version, code);
}

#endif
