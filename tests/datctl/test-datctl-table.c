/* datctl's table printer (daemon/datctl-table.c): alignment, widths from
 * content, the "-" placeholder, escaping, and fitting into a terminal. */
#include <config.h>

#include <criterion/criterion.h>
#include <locale.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/macro.h"
#include "daemon/datctl-table.h"

static const struct table_column three_columns[] = {
        { "NAME", false, false },
        { "COUNT", true, false },
        { "NOTE", false, true },
};

/* Prints t into a malloc'd string. */
static char *print_to_string(const struct table *t, bool header, size_t max_width)
{
        char *text = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&text, &len);

        cr_assert_not_null(f);
        cr_assert_eq(table_print(t, f, &(struct table_print_options) {
                .header = header,
                .max_width = max_width,
        }), 0);
        fclose(f);
        return text;
}

/* A table of three_columns filled with the cells, row after row, printed
 * without a header and without a width limit. */
static char *print_cells(const char *const *cells, size_t n)
{
        _cleanup_(table_freep) struct table *t = table_new(three_columns, 3);

        cr_assert_not_null(t);
        for (size_t i = 0; i < n; i++)
                cr_assert_eq(table_add(t, cells[i]), 0);
        return print_to_string(t, false, 0);
}

#define PRINT_CELLS(...) \
        print_cells((const char *const[]) { __VA_ARGS__ }, \
                    ARRAY_SIZE(((const char *const[]) { __VA_ARGS__ })))

static struct table *sample_table(void)
{
        struct table *t = table_new(three_columns, ARRAY_SIZE(three_columns));

        cr_assert_not_null(t);
        cr_assert_eq(table_add(t, "shm"), 0);
        cr_assert_eq(table_addf(t, "%d", 7), 0);
        cr_assert_eq(table_add(t, "short"), 0);
        cr_assert_eq(table_add(t, "a-longer-name"), 0);
        cr_assert_eq(table_addf(t, "%d", 12345), 0);
        cr_assert_eq(table_add(t, "a note that is rather long"), 0);
        return t;
}

Test(datctl_table, column_width_is_the_widest_cell_or_header)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 0);

        cr_assert_str_eq(out,
                         "NAME          COUNT NOTE\n"
                         "shm               7 short\n"
                         "a-longer-name 12345 a note that is rather long\n");
}

Test(datctl_table, numbers_are_right_aligned_under_a_right_aligned_header)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 0);

        cr_assert_not_null(strstr(out, " COUNT "));
        cr_assert_not_null(strstr(out, "shm               7 "));
}

Test(datctl_table, lines_have_no_trailing_spaces)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 0);

        cr_assert_null(strstr(out, " \n"));
}

Test(datctl_table, empty_and_null_cells_show_a_dash)
{
        _cleanup_free_ char *out = PRINT_CELLS("", NULL, "x");

        cr_assert_str_eq(out, "- - x\n");
}

Test(datctl_table, unfinished_last_row_is_filled_with_dashes)
{
        _cleanup_free_ char *out = PRINT_CELLS("only");

        cr_assert_str_eq(out, "only - -\n");
}

Test(datctl_table, rows_count_the_rows_started)
{
        _cleanup_(table_freep) struct table *t = table_new(three_columns, 3);

        cr_assert_eq(table_n_rows(t), 0);
        for (int i = 0; i < 4; i++)
                cr_assert_eq(table_add(t, "x"), 0);
        cr_assert_eq(table_n_rows(t), 2);
}

Test(datctl_table, without_header_widths_come_from_cells_only)
{
        _cleanup_free_ char *out = PRINT_CELLS("a", "1", "b");

        cr_assert_str_eq(out, "a 1 b\n");
}

Test(datctl_table, nothing_is_cut_without_a_width_limit)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 0);

        cr_assert_not_null(strstr(out, "a note that is rather long\n"));
}

Test(datctl_table, a_width_limit_cuts_shrinkable_columns_with_an_ellipsis)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 30);
        char *line, *save = NULL;

        cr_assert_not_null(strstr(out, "a-longer-name 12345 a note...\n"), "%s", out);
        for (line = strtok_r(out, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                cr_assert_leq(strlen(line), 30, "too wide: '%s'", line);
}

Test(datctl_table, columns_that_may_not_shrink_are_never_cut)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 10);

        cr_assert_not_null(strstr(out, "a-longer-name 12345 "));
}

Test(datctl_table, a_shrunk_column_keeps_at_least_six_columns)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = print_to_string(t, true, 10);

        cr_assert_not_null(strstr(out, "a-longer-name 12345 a n...\n"));
}

Test(datctl_table, the_widest_shrinkable_column_gives_first)
{
        static const struct table_column cols[] = {
                { "A", false, true },
                { "B", false, true },
        };
        _cleanup_(table_freep) struct table *t = table_new(cols, 2);
        _cleanup_free_ char *out = NULL;

        cr_assert_eq(table_add(t, "aaaaaaaaaa"), 0);
        cr_assert_eq(table_add(t, "bbbbbbbbbbbbbbbbbbbb"), 0);
        out = print_to_string(t, false, 23);
        cr_assert_str_eq(out, "aaaaaaaaaa bbbbbbbbb...\n");
}

Test(datctl_table, control_characters_in_cells_are_escaped)
{
        _cleanup_free_ char *out = PRINT_CELLS("evil\033[2J", "1", "bell\a");

        cr_assert_str_eq(out, "evil\\x1b[2J 1 bell\\x07\n");
}

Test(datctl_table, width_counts_characters_not_bytes)
{
        setlocale(LC_CTYPE, "C.UTF-8");
        cr_assert_eq(text_width("caf\xc3\xa9"), 4);
        /* U+6F22 is a double-width character. */
        cr_assert_eq(text_width("\xe6\xbc\xa2x"), 3);
}

Test(datctl_table, utf8_cells_align_by_display_width)
{
        _cleanup_free_ char *out = NULL;

        setlocale(LC_CTYPE, "C.UTF-8");
        out = PRINT_CELLS("caf\xc3\xa9", "1", "x", "tea", "2", "y");
        cr_assert_str_eq(out, "caf\xc3\xa9 1 x\ntea  2 y\n");
}

Test(datctl_table, a_utf8_terminal_gets_a_one_column_ellipsis)
{
        _cleanup_(table_freep) struct table *t = sample_table();
        _cleanup_free_ char *out = NULL;

        setlocale(LC_CTYPE, "C.UTF-8");
        out = print_to_string(t, true, 10);
        cr_assert_not_null(strstr(out, "a-longer-name 12345 a not\xe2\x80\xa6\n"));
}
