/* Valid messages of every v1 type, built field by field from a zeroed
 * buffer: the starting point of every test that breaks one rule, and of the
 * fuzzer's seed corpus. */
#ifndef DATD_TESTS_PROTO_DATP_SAMPLES_H
#define DATD_TESTS_PROTO_DATP_SAMPLES_H

#include <stddef.h>
#include <stdint.h>

#include "proto/datp.h"

#define DATP_SAMPLE_REQUEST_ID 0x1234abcdu

struct datp_sample {
        uint16_t type;
        enum datp_direction dir;  /* the side that receives it */
        uint16_t version;         /* the version state it is valid in (0 = before HELLO) */
        const char *file;         /* its name in tests/proto/corpus/ */
};

extern const struct datp_sample datp_samples[];
extern const size_t datp_n_samples;

/* Writes a valid message of the sample's type into m (zeroing it first);
 * returns its length. */
size_t datp_sample_build(const struct datp_sample *s, union datp_message *m);

/* The same for the sample of a type (aborts if there is none); returns it. */
const struct datp_sample *datp_sample_build_type(uint16_t type, union datp_message *m);

/* Validates m as the side and in the state the sample names, taking its
 * length from m's header: the one call most tests make. */
int datp_sample_validate(const struct datp_sample *s, const union datp_message *m);

/* A valid description of an object of kind (1..DATP_OBJ_KIND_MAX): every
 * field its kind allows is set non-zero (EP and SRQ at their highest state),
 * every other field is 0. */
void datp_sample_obj_desc(uint32_t kind, struct datp_obj_desc *d);

/* The sample of a type, or NULL. */
const struct datp_sample *datp_sample_of(uint16_t type);

#endif
