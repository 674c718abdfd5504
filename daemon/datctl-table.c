/* datctl: aligned tables for people.  See datctl-table.h. */
#include <config.h>

#include "datctl-table.h"

#include <errno.h>
#include <langinfo.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <wchar.h>

#include "common/macro.h"
#include "datctl-format.h"

#define TABLE_MIN_SHRINK_WIDTH 6

/* The cells are kept back to back in one buffer, each escaped and
 * NUL-terminated, with its display width computed once: a table of
 * 100 000 rows is a few allocations, not a million. */
struct table_cell {
        size_t offset;          /* into text */
        size_t width;           /* display width */
};

struct table {
        struct table_column *columns;
        size_t n_columns;
        struct table_cell *cells;       /* row-major */
        size_t n_cells;
        size_t cap_cells;
        char *text;
        size_t text_len;
        size_t text_cap;
};

struct table *table_new(const struct table_column *columns, size_t n_columns)
{
        struct table *t;

        if (n_columns == 0)
                return NULL;
        t = calloc(1, sizeof(*t));
        if (!t)
                return NULL;
        t->columns = calloc(n_columns, sizeof(*columns));
        if (!t->columns)
                return table_free(t);
        memcpy(t->columns, columns, n_columns * sizeof(*columns));
        t->n_columns = n_columns;
        return t;
}

struct table *table_free(struct table *t)
{
        if (!t)
                return NULL;
        free(t->cells);
        free(t->text);
        free(t->columns);
        free(t);
        return NULL;
}

/* Printable ASCII other than the backslash: what text_escape() leaves as
 * it is, one column per byte. */
static size_t plain_ascii_length(const char *s)
{
        size_t n = 0;

        while ((unsigned char)s[n] >= 0x20 && (unsigned char)s[n] < 0x7f && s[n] != '\\')
                n++;
        return s[n] == '\0' ? n : SIZE_MAX;
}

static int table_append(struct table *t, const char *cell, size_t len, size_t width)
{
        if (t->n_cells == t->cap_cells) {
                size_t cap = t->cap_cells ? t->cap_cells * 2 : t->n_columns * 8;
                struct table_cell *cells = reallocarray(t->cells, cap, sizeof(*cells));

                if (!cells)
                        return -ENOMEM;
                t->cells = cells;
                t->cap_cells = cap;
        }
        if (t->text_cap - t->text_len < len + 1) {
                size_t cap = t->text_cap ? t->text_cap : 4096;
                char *text;

                while (cap - t->text_len < len + 1)
                        cap *= 2;
                text = realloc(t->text, cap);
                if (!text)
                        return -ENOMEM;
                t->text = text;
                t->text_cap = cap;
        }
        memcpy(t->text + t->text_len, cell, len + 1);
        t->cells[t->n_cells++] = (struct table_cell){ .offset = t->text_len, .width = width };
        t->text_len += len + 1;
        return 0;
}

int table_add(struct table *t, const char *text)
{
        _cleanup_free_ char *escaped = NULL;
        size_t len;

        if (!text || !*text)
                text = "-";
        len = plain_ascii_length(text);
        if (len != SIZE_MAX)
                return table_append(t, text, len, len);
        escaped = text_escape(text);
        if (!escaped)
                return -ENOMEM;
        return table_append(t, escaped, strlen(escaped), text_width(escaped));
}

int table_addf(struct table *t, const char *fmt, ...)
{
        _cleanup_free_ char *text = NULL;
        char buf[128];
        va_list ap;
        int r;

        va_start(ap, fmt);
        r = vsnprintf(buf, sizeof(buf), fmt, ap);
        va_end(ap);
        if (r < 0)
                return -ENOMEM;
        if ((size_t)r < sizeof(buf))
                return table_add(t, buf);
        va_start(ap, fmt);
        r = vasprintf(&text, fmt, ap);
        va_end(ap);
        if (r < 0) {
                text = NULL;
                return -ENOMEM;
        }
        return table_add(t, text);
}

size_t table_n_rows(const struct table *t)
{
        return (t->n_cells + t->n_columns - 1) / t->n_columns;
}

/* Width of one code point; what wcwidth() cannot classify (the C locale
 * knows nothing beyond ASCII) counts as one column. */
static size_t code_point_width(uint32_t c)
{
        int w = wcwidth((wchar_t)c);

        return w < 0 ? 1 : (size_t)w;
}

size_t text_width(const char *s)
{
        size_t width = 0;

        while (*s) {
                uint32_t c;
                size_t len = utf8_decode(s, &c);

                if (len == 0) {         /* cells are escaped; only raw callers get here */
                        width++;
                        s++;
                        continue;
                }
                width += code_point_width(c);
                s += len;
        }
        return width;
}

/* Bytes of s that fit into width columns, and how many columns they take. */
static size_t text_prefix_fitting(const char *s, size_t width, size_t *used)
{
        size_t bytes = 0;

        *used = 0;
        while (s[bytes]) {
                uint32_t c;
                size_t len = utf8_decode(s + bytes, &c), w;

                if (len == 0) {
                        len = 1;
                        w = 1;
                } else {
                        w = code_point_width(c);
                }
                if (*used + w > width)
                        break;
                *used += w;
                bytes += len;
        }
        return bytes;
}

static const char *table_cell(const struct table *t, size_t row, size_t col, size_t *width)
{
        size_t i = row * t->n_columns + col;

        if (i >= t->n_cells) {
                *width = 1;
                return "-";
        }
        *width = t->cells[i].width;
        return t->text + t->cells[i].offset;
}

static void table_fit(const struct table *t, size_t *widths, size_t max_width)
{
        size_t total = t->n_columns - 1;        /* separators */

        for (size_t c = 0; c < t->n_columns; c++)
                total += widths[c];

        /* One column at a time, always the widest that may still give, so
         * that a long command line does not squeeze a short state column. */
        while (total > max_width) {
                size_t best = SIZE_MAX;

                for (size_t c = 0; c < t->n_columns; c++) {
                        size_t min = text_width(t->columns[c].header);

                        if (min < TABLE_MIN_SHRINK_WIDTH)
                                min = TABLE_MIN_SHRINK_WIDTH;
                        if (!t->columns[c].may_shrink || widths[c] <= min)
                                continue;
                        if (best == SIZE_MAX || widths[c] > widths[best])
                                best = c;
                }
                if (best == SIZE_MAX)
                        return;         /* cannot fit: the terminal wraps */
                widths[best]--;
                total--;
        }
}

static void print_padding(FILE *f, size_t n)
{
        static const char spaces[] = "                                                                ";

        while (n > 0) {
                size_t chunk = n < sizeof(spaces) - 1 ? n : sizeof(spaces) - 1;

                fwrite(spaces, 1, chunk, f);
                n -= chunk;
        }
}

/* w: the display width of text. */
static void print_cell(FILE *f, const char *text, size_t w, size_t width, bool align_right,
                       bool last, const char *ellipsis)
{
        size_t used;

        if (w > width) {
                size_t ellipsis_width = text_width(ellipsis);
                size_t bytes = text_prefix_fitting(text, width - ellipsis_width, &used);

                /* "a note..." reads better than "a note ...". */
                while (bytes > 0 && text[bytes - 1] == ' ') {
                        bytes--;
                        used--;
                }
                fwrite(text, 1, bytes, f);
                fputs(ellipsis, f);
                if (!last)      /* a wide character may leave a column over */
                        print_padding(f, width - ellipsis_width - used);
                return;
        }
        if (align_right)
                print_padding(f, width - w);
        fputs(text, f);
        if (!align_right && !last)
                print_padding(f, width - w);
}

static void print_row(const struct table *t, FILE *f, const size_t *widths, size_t row,
                      const char *ellipsis)
{
        for (size_t c = 0; c < t->n_columns; c++) {
                bool last = c + 1 == t->n_columns;
                const char *text;
                size_t w;

                if (row == SIZE_MAX) {
                        text = t->columns[c].header;
                        w = text_width(text);
                } else {
                        text = table_cell(t, row, c, &w);
                }
                print_cell(f, text, w, widths[c], t->columns[c].align_right, last, ellipsis);
                fputc(last ? '\n' : ' ', f);
        }
}

int table_print(const struct table *t, FILE *f, const struct table_print_options *o)
{
        _cleanup_free_ size_t *widths = calloc(t->n_columns, sizeof(*widths));
        size_t n_rows = table_n_rows(t);
        const char *ellipsis = strcmp(nl_langinfo(CODESET), "UTF-8") == 0 ? "\u2026" : "...";

        if (!widths)
                return -ENOMEM;
        for (size_t c = 0; c < t->n_columns; c++) {
                if (o->header)
                        widths[c] = text_width(t->columns[c].header);
                for (size_t r = 0; r < n_rows; r++) {
                        size_t w;

                        table_cell(t, r, c, &w);
                        if (w > widths[c])
                                widths[c] = w;
                }
        }
        if (o->max_width > 0)
                table_fit(t, widths, o->max_width);

        if (o->header)
                print_row(t, f, widths, SIZE_MAX, ellipsis);
        for (size_t r = 0; r < n_rows; r++)
                print_row(t, f, widths, r, ellipsis);
        return ferror(f) ? -EIO : 0;
}
