/* Our public headers (include/dat2) against the reference: Debian's
 * libdapl-dev headers in /usr/include/dat2.  Programs built against either
 * must see the same ABI: layouts, values, types, prototypes, macros.
 *
 * abi_probe.py reads one set of headers through $(CC) and writes a probe
 * program listing every fact it found there; each probe is built against
 * its own headers and the two outputs must be identical line for line, so
 * anything that exists on one side only is a difference too.  The tests that
 * need the reference skip when it is not installed. */
#include <criterion/criterion.h>
#include <criterion/logging.h>
#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <wordexp.h>

#include "common/macro.h"
#include "tests/harness.h"

/* Where the reference dat2/ lives; DATD_TEST_DEBIAN_INCLUDE overrides. */
#define DEBIAN_INCLUDE_DIR "/usr/include"
#define STEP_TIMEOUT_MS 60000
#define MAX_REPORTED_DIFFERENCES 200

/* libdapl-dev's file set; ours must have each, each must stand alone. */
static const char *const dat_headers[] = {
        "dat.h", "dat_error.h", "dat_ib_extensions.h", "dat_platform_specific.h",
        "dat_redirection.h", "dat_registry.h", "dat_vendor_specific.h", "udat.h",
        "udat_config.h", "udat_redirection.h", "udat_vendor_specific.h",
};

/* Generated files and binaries go to a private directory, emptied after
 * each test even when it fails. */
static char workdir[PATH_MAX];

static void workdir_create(void)
{
        const char *tmp = getenv("TMPDIR");

        snprintf(workdir, sizeof(workdir), "%s/datd-abi-XXXXXX", tmp && *tmp ? tmp : "/tmp");
        cr_assert_not_null(mkdtemp(workdir), "cannot create %s: %m", workdir);
}

/* The directory is flat: only files this test wrote. */
static void workdir_remove(void)
{
        DIR *d = opendir(workdir);
        struct dirent *e;

        if (!d)
                return;
        while ((e = readdir(d))) {
                char path[PATH_MAX + 256];

                if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, ".."))
                        continue;
                snprintf(path, sizeof(path), "%s/%s", workdir, e->d_name);
                unlink(path);
        }
        closedir(d);
        rmdir(workdir);
}

TestSuite(abi, .init = workdir_create, .fini = workdir_remove, .timeout = 120);

static char *work_path(const char *name)
{
        char *p;

        cr_assert_geq(asprintf(&p, "%s/%s", workdir, name), 0);
        return p;
}

static char *our_include_dir(void)
{
        char *dir = source_path("include");

        cr_assert_not_null(dir);
        return dir;
}

static const char *env_or(const char *name, const char *fallback)
{
        const char *v = getenv(name);

        return v && *v ? v : fallback;
}

static const char *debian_include_dir(void)
{
        return env_or("DATD_TEST_DEBIAN_INCLUDE", DEBIAN_INCLUDE_DIR);
}

static void require_debian_headers(void)
{
        char udat[PATH_MAX];

        snprintf(udat, sizeof(udat), "%s/dat2/udat.h", debian_include_dir());
        if (access(udat, R_OK) != 0)
                cr_skip_test("skipped: %s/dat2 not installed", debian_include_dir());
}

/* Runs a command given as shell words (so $(CC) may carry flags) followed
 * by args; returns its exit status and, in *output, what it printed. */
static int run_words(const char *command, const char *const *args, char **output)
{
        _cleanup_free_ char **argv = NULL;
        size_t nargs = 0;
        wordexp_t words;
        int r;

        while (args[nargs])
                nargs++;
        if (wordexp(command, &words, WRDE_NOCMD) != 0 || words.we_wordc == 0)
                cr_assert_fail("cannot split the command \"%s\"", command);
        argv = calloc(words.we_wordc + nargs + 1, sizeof(*argv));
        cr_assert_not_null(argv);
        memcpy(argv, words.we_wordv, words.we_wordc * sizeof(*argv));
        memcpy(argv + words.we_wordc, args, nargs * sizeof(*argv));
        r = run_capture(argv, output, STEP_TIMEOUT_MS);
        wordfree(&words);
        return r;
}

/* $(CC) from configure, passed in by tests/abi/local.mk. */
static const char *cc(void)
{
        return env_or("DATD_TEST_CC", "cc");
}

/* Runs one step that must succeed; on failure the test fails showing the
 * step's output.  Returns the output (malloc'd). */
static char *must_run(const char *what, const char *command, const char *const *args)
{
        char *output = NULL;
        int r = run_words(command, args, &output);

        cr_assert_eq(r, 0, "%s failed (exit status %d):\n%s", what, r, output ? output : "");
        return output;
}

/* Writes probe-<label>.c, decls-<label>.c and linkage-<label>.cc for the
 * headers under include_dir. */
static void generate(const char *label, const char *include_dir)
{
        _cleanup_free_ char *script = source_path("tests/abi/abi_probe.py");
        _cleanup_free_ char *summary = must_run(
                "abi_probe.py", env_or("DATD_TEST_PYTHON", "python3"),
                (const char *const[]){ script, "--cc", cc(), "--include-dir", include_dir,
                                       "--label", label, "--out-dir", workdir, NULL });

        cr_log_info("%s", summary);
}

/* Builds source against include_dir and runs it; returns its output. */
static char *build_and_run(const char *source, const char *include_dir)
{
        _cleanup_free_ char *binary = NULL;

        cr_assert_geq(asprintf(&binary, "%s.bin", source), 0);
        free(must_run(source, cc(),
                      (const char *const[]){ "-std=gnu11", "-I", include_dir, "-o", binary,
                                             source, NULL }));
        return must_run(binary, binary, (const char *const[]){ NULL });
}

static char *probe_output(const char *label, const char *include_dir)
{
        _cleanup_free_ char *name = NULL, *source = NULL;

        generate(label, include_dir);
        cr_assert_geq(asprintf(&name, "probe-%s.c", label), 0);
        source = work_path(name);
        return build_and_run(source, include_dir);
}

static int compare_strings(const void *a, const void *b)
{
        return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The lines of text, sorted; they point into text, which is modified. */
static char **sorted_lines(char *text, size_t *n)
{
        size_t cap = 1;
        char **lines, *save = NULL;

        for (const char *c = text; *c; c++)
                cap += *c == '\n';
        lines = calloc(cap, sizeof(*lines));
        cr_assert_not_null(lines);
        *n = 0;
        for (char *line = strtok_r(text, "\n", &save); line; line = strtok_r(NULL, "\n", &save))
                lines[(*n)++] = line;
        qsort(lines, *n, sizeof(*lines), compare_strings);
        return lines;
}

/* Prints every line found in only one of the outputs; returns how many. */
static size_t report_differences(char *debian, char *ours)
{
        size_t nd, no, i = 0, j = 0, differences = 0;
        _cleanup_free_ char **d = sorted_lines(debian, &nd);
        _cleanup_free_ char **o = sorted_lines(ours, &no);

        while (i < nd || j < no) {
                int c = i == nd ? 1 : j == no ? -1 : strcmp(d[i], o[j]);

                if (c == 0) {
                        i++;
                        j++;
                        continue;
                }
                if (++differences <= MAX_REPORTED_DIFFERENCES)
                        cr_log_error("%s %s", c < 0 ? "only in Debian's:" : "only in ours:    ",
                                     c < 0 ? d[i] : o[j]);
                if (c < 0)
                        i++;
                else
                        j++;
        }
        if (differences > MAX_REPORTED_DIFFERENCES)
                cr_log_error("... and %zu more differing lines",
                             differences - MAX_REPORTED_DIFFERENCES);
        return differences;
}

/* How many lines of text start with prefix. */
static size_t count_prefixed(const char *text, const char *prefix)
{
        size_t n = 0, len = strlen(prefix);

        while (text && *text) {
                n += !strncmp(text, prefix, len);
                text = strchr(text, '\n');
                if (text)
                        text++;
        }
        return n;
}

Test(abi, every_layout_value_and_name_matches_debian)
{
        _cleanup_free_ char *ours_dir = our_include_dir();
        _cleanup_free_ char *debian = NULL, *ours = NULL;
        size_t fields, constants, aggregates, typedefs;

        require_debian_headers();
        debian = probe_output("debian", debian_include_dir());
        ours = probe_output("ours", ours_dir);

        /* Guards against a probe that lists (almost) nothing on both sides:
         * libdapl 2.1 has 320 members and 743 constants. */
        fields = count_prefixed(debian, "field ");
        constants = count_prefixed(debian, "const ");
        aggregates = count_prefixed(debian, "aggregate ");
        typedefs = count_prefixed(debian, "typedef ");
        cr_assert_geq(fields, 300, "the probe lists only %zu struct members", fields);
        cr_assert_geq(constants, 700, "the probe lists only %zu constants", constants);
        cr_log_info("compared %zu structs/unions with %zu members, %zu typedefs, %zu constants, "
                    "%zu lines in all", aggregates, fields, typedefs, constants,
                    count_prefixed(debian, ""));

        cr_assert_eq(report_differences(debian, ours), 0,
                     "our headers differ from Debian's (lines above)");
}

/* The C compiler accepts a redeclaration only with the same type, so
 * declaring one side's functions and typedefs again after including the
 * other side's headers compares every prototype and typedef exactly; the
 * generated _Static_asserts compare every struct member's type. */
static void check_declarations(const char *label, const char *generated_from,
                               const char *checked_against)
{
        _cleanup_free_ char *name = NULL, *decls = NULL;

        generate(label, generated_from);
        cr_assert_geq(asprintf(&name, "decls-%s.c", label), 0);
        decls = work_path(name);
        free(must_run("redeclaring every function, typedef and member type", cc(),
                      (const char *const[]){ "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                             "-fsyntax-only", "-I", checked_against, decls,
                                             NULL }));
}

Test(abi, debian_prototypes_typedefs_and_member_types_hold_for_ours)
{
        _cleanup_free_ char *ours_dir = our_include_dir();

        require_debian_headers();
        check_declarations("debian", debian_include_dir(), ours_dir);
}

Test(abi, our_prototypes_typedefs_and_member_types_hold_for_debian)
{
        _cleanup_free_ char *ours_dir = our_include_dir();

        require_debian_headers();
        check_declarations("ours", ours_dir, debian_include_dir());
}

Test(abi, each_header_compiles_on_its_own)
{
        _cleanup_free_ char *ours_dir = our_include_dir();

        for (size_t i = 0; i < ARRAY_SIZE(dat_headers); i++) {
                _cleanup_free_ char *header = NULL;

                cr_assert_geq(asprintf(&header, "%s/dat2/%s", ours_dir, dat_headers[i]), 0);
                free(must_run(header, cc(),
                              (const char *const[]){ "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                                     "-fsyntax-only", "-I", ours_dir, "-include",
                                                     header, "-x", "c", "/dev/null", NULL }));
        }
}

/* C++ consumers: each header compiles as C++, and every function keeps C
 * linkage (re-declaring it inside extern "C" is an error otherwise). */
Test(abi, headers_work_from_cxx_with_c_linkage)
{
        _cleanup_free_ char *ours_dir = our_include_dir(), *probe = NULL, *version = NULL;
        const char *cxx = env_or("DATD_TEST_CXX", "c++");

        if (run_words(cxx, (const char *const[]){ "--version", NULL }, &version) != 0)
                cr_skip_test("skipped: no C++ compiler (%s; set DATD_TEST_CXX)", cxx);
        for (size_t i = 0; i < ARRAY_SIZE(dat_headers); i++) {
                _cleanup_free_ char *header = NULL;

                cr_assert_geq(asprintf(&header, "%s/dat2/%s", ours_dir, dat_headers[i]), 0);
                free(must_run(header, cxx,
                              (const char *const[]){ "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                                                     "-I", ours_dir, "-include", header, "-x",
                                                     "c++", "/dev/null", NULL }));
        }
        generate("ours", ours_dir);
        probe = work_path("linkage-ours.cc");
        free(must_run("extern \"C\" redeclarations", cxx,
                      (const char *const[]){ "-Wall", "-Wextra", "-Werror", "-fsyntax-only",
                                             "-I", ours_dir, probe, NULL }));
}

/* A consumer that includes only <dat2/udat.h> and <dat2/dat_ib_extensions.h>
 * and uses the call macros builds warning-free against ours. */
Test(abi, consumer_using_the_macros_compiles)
{
        _cleanup_free_ char *ours_dir = our_include_dir();
        _cleanup_free_ char *consumer = source_path("tests/abi/consumer.c");
        _cleanup_free_ char *object = work_path("consumer.o");

        free(must_run("consumer.c", cc(),
                      (const char *const[]){ "-std=gnu11", "-Wall", "-Wextra", "-Werror",
                                             "-DDATD_ABI_REPAIRED_MACROS", "-I", ours_dir, "-c",
                                             "-o", object, consumer, NULL }));
}

/* A copy of consumer.c in the work directory, after <netinet/in.h>
 * (Debian's dat_ib_extensions.h needs it first; both builds get it). */
static char *consumer_copy(const char *name)
{
        _cleanup_free_ char *consumer = source_path("tests/abi/consumer.c");
        _cleanup_free_ char *text = read_file_str(consumer);
        char *copy = work_path(name);
        FILE *f;

        cr_assert_not_null(text, "cannot read %s", consumer);
        cr_assert_not_null(f = fopen(copy, "w"), "cannot write %s", copy);
        fprintf(f, "#include <netinet/in.h>\n#line 1 \"%s\"\n%s", consumer, text);
        cr_assert_eq(fclose(f), 0, "cannot write %s", copy);
        return copy;
}

/* ... and its macros hand the entry points the same arguments, of the same
 * types, as Debian's do. */
Test(abi, consumer_macros_pass_what_debian_passes)
{
        _cleanup_free_ char *ours_dir = our_include_dir();
        _cleanup_free_ char *debian_source = NULL, *ours_source = NULL;
        _cleanup_free_ char *debian = NULL, *ours = NULL;

        require_debian_headers();
        debian_source = consumer_copy("consumer-debian.c");
        ours_source = consumer_copy("consumer-ours.c");
        debian = build_and_run(debian_source, debian_include_dir());
        ours = build_and_run(ours_source, ours_dir);
        cr_assert_geq(count_prefixed(debian, "dat_extension_op "), 25,
                      "the consumer made too few extension calls:\n%s", debian);
        cr_assert_eq(report_differences(debian, ours), 0,
                     "the macros of our headers pass other arguments than Debian's (lines above)");
}
