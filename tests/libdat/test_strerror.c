/* dat_strerror(3DAT): a text for every major type and every minor subtype
 * of dat_error.h, and DAT_INVALID_PARAMETER with an "unknown" text for
 * anything else. */
#include "config.h"

#include <criterion/criterion.h>
#include <string.h>

#include <dat2/udat.h>

#include "common/macro.h"

#define CODE(c) { c, #c }

static const struct {
        DAT_RETURN code;
        const char *name;
} majors[] = {
        CODE(DAT_SUCCESS), CODE(DAT_ABORT), CODE(DAT_CONN_QUAL_IN_USE),
        CODE(DAT_INSUFFICIENT_RESOURCES), CODE(DAT_INTERNAL_ERROR), CODE(DAT_INVALID_HANDLE),
        CODE(DAT_INVALID_PARAMETER), CODE(DAT_INVALID_STATE), CODE(DAT_LENGTH_ERROR),
        CODE(DAT_MODEL_NOT_SUPPORTED), CODE(DAT_PROVIDER_NOT_FOUND),
        CODE(DAT_PRIVILEGES_VIOLATION), CODE(DAT_PROTECTION_VIOLATION), CODE(DAT_QUEUE_EMPTY),
        CODE(DAT_QUEUE_FULL), CODE(DAT_TIMEOUT_EXPIRED), CODE(DAT_PROVIDER_ALREADY_REGISTERED),
        CODE(DAT_PROVIDER_IN_USE), CODE(DAT_INVALID_ADDRESS), CODE(DAT_INTERRUPTED_CALL),
        CODE(DAT_CONN_QUAL_UNAVAILABLE), CODE(DAT_RESERVED_LMR), CODE(DAT_PORT_IN_USE),
        CODE(DAT_COMM_NOT_SUPPORTED), CODE(DAT_EXTENSION_BASE), CODE(DAT_NOT_IMPLEMENTED),
};

static bool is_unknown(const char *s)
{
        return strstr(s, "unknown") != NULL;
}

/* The minors of dat_error.h are one enum counted up from DAT_NO_SUBTYPE to
 * DAT_THREAD_SAFETY_NOT_FOUND: this walks every one of them. */
Test(strerror, every_minor_subtype_has_its_own_text)
{
        for (unsigned m = DAT_NO_SUBTYPE; m <= DAT_THREAD_SAFETY_NOT_FOUND; m++) {
                const char *major = NULL, *minor = NULL;
                DAT_RETURN r = dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_HANDLE | m, &major, &minor);

                cr_expect_eq(r, DAT_SUCCESS, "subtype %u: 0x%x", m, r);
                cr_assert_not_null(minor);
                cr_expect_not(is_unknown(minor), "subtype %u: \"%s\"", m, minor);
                cr_expect_gt(strlen(minor), 3);
        }
}

Test(strerror, every_major_type_has_its_own_text_named_after_it)
{
        for (size_t i = 0; i < ARRAY_SIZE(majors); i++) {
                const char *major = NULL, *minor = NULL;
                DAT_RETURN r = dat_strerror(majors[i].code, &major, &minor);

                cr_expect_eq(r, DAT_SUCCESS, "%s: 0x%x", majors[i].name, r);
                cr_assert_not_null(major);
                cr_expect_not(is_unknown(major), "%s: \"%s\"", majors[i].name, major);
                cr_expect(strncmp(major, majors[i].name, strlen(majors[i].name)) == 0,
                          "%s: \"%s\"", majors[i].name, major);
        }
}

Test(strerror, minor_texts_are_named_after_their_subtype)
{
        const char *major, *minor;

        dat_strerror(DAT_CLASS_ERROR | DAT_PROVIDER_NOT_FOUND | DAT_NAME_NOT_REGISTERED, &major, &minor);
        cr_expect(strncmp(major, "DAT_PROVIDER_NOT_FOUND", 22) == 0, "%s", major);
        cr_expect(strncmp(minor, "DAT_NAME_NOT_REGISTERED", 23) == 0, "%s", minor);
        dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_STATE | DAT_INVALID_STATE_IA_IN_USE, &major, &minor);
        cr_expect(strncmp(minor, "DAT_INVALID_STATE_IA_IN_USE", 27) == 0, "%s", minor);
}

Test(strerror, class_bits_do_not_change_the_texts)
{
        const char *a, *b, *c, *d;

        cr_assert_eq(dat_strerror(DAT_QUEUE_EMPTY, &a, &b), DAT_SUCCESS);
        cr_assert_eq(dat_strerror(DAT_CLASS_WARNING | DAT_QUEUE_EMPTY, &c, &d), DAT_SUCCESS);
        cr_expect_str_eq(a, c);
        cr_expect_str_eq(b, d);
        cr_assert_eq(dat_strerror(DAT_CLASS_ERROR | DAT_QUEUE_EMPTY, &c, &d), DAT_SUCCESS);
        cr_expect_str_eq(a, c);
}

Test(strerror, unknown_major_is_invalid_parameter_with_unknown_text)
{
        const char *major = NULL, *minor = NULL;
        DAT_RETURN r = dat_strerror(DAT_CLASS_ERROR | 0x00330000, &major, &minor);

        cr_expect_eq(DAT_GET_TYPE(r), DAT_INVALID_PARAMETER);
        cr_expect(DAT_IS_WARNING(r) == 0);
        cr_assert_not_null(major);
        cr_expect(is_unknown(major), "%s", major);
        cr_expect_not(is_unknown(minor), "%s", minor);
}

Test(strerror, unknown_minor_is_invalid_parameter_with_unknown_text)
{
        const char *major = NULL, *minor = NULL;
        DAT_RETURN r = dat_strerror(DAT_CLASS_ERROR | DAT_INVALID_HANDLE |
                                            (DAT_THREAD_SAFETY_NOT_FOUND + 1),
                                    &major, &minor);

        cr_expect_eq(DAT_GET_TYPE(r), DAT_INVALID_PARAMETER);
        cr_expect_not(is_unknown(major), "%s", major);
        cr_assert_not_null(minor);
        cr_expect(is_unknown(minor), "%s", minor);
        r = dat_strerror(DAT_INVALID_HANDLE | 0xffff, &major, &minor);
        cr_expect_eq(DAT_GET_TYPE(r), DAT_INVALID_PARAMETER);
}

Test(strerror, null_output_pointers_are_accepted)
{
        const char *major = NULL;

        cr_expect_eq(dat_strerror(DAT_ABORT, NULL, NULL), DAT_SUCCESS);
        cr_expect_eq(dat_strerror(DAT_ABORT, &major, NULL), DAT_SUCCESS);
        cr_expect_not_null(major);
        cr_expect_eq(DAT_GET_TYPE(dat_strerror(0x00330000, NULL, NULL)), DAT_INVALID_PARAMETER);
}
