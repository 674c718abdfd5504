/* The static registry: the dat.conf parser (registry.h), and the registry
 * entry points dat_registry_list_providers, dat_registry_add_provider and
 * dat_registry_remove_provider. */
#include "config.h"

#include "libdat/registry.h"
#include "libdat/provider_registry.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <dat2/dat_registry.h>

/* Splits the next field off *p: a run of non-blank characters, or a
 * double-quoted string (which may hold blanks and be empty).  Returns 1 with
 * the field in buf, 0 at the end of the line (or at a comment), -1 with *why
 * set on an unterminated quote or an over-long field. */
static int next_field(const char **p, char *buf, size_t n, const char **why)
{
        const char *s = *p;
        size_t len = 0;

        while (*s == ' ' || *s == '\t' || *s == '\r' || *s == '\n')
                s++;
        if (*s == '\0' || *s == '#') {
                *p = s;
                return 0;
        }
        if (*s == '"') {
                const char *end = strchr(s + 1, '"');

                if (!end) {
                        *why = "unterminated quoted field";
                        return -1;
                }
                len = (size_t)(end - (s + 1));
                if (len >= n) {
                        *why = "field too long";
                        return -1;
                }
                memcpy(buf, s + 1, len);
                s = end + 1;
                if (*s != '\0' && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n' && *s != '#') {
                        *why = "text right after a closing quote";
                        return -1;
                }
        } else {
                while (*s && *s != ' ' && *s != '\t' && *s != '\r' && *s != '\n' && *s != '#') {
                        if (*s == '"') {
                                *why = "quote inside an unquoted field";
                                return -1;
                        }
                        if (len + 1 >= n) {
                                *why = "field too long";
                                return -1;
                        }
                        buf[len++] = *s++;
                }
        }
        buf[len] = '\0';
        *p = s;
        return 1;
}

/* "<number>" with nothing after it, in [0, 65535]. */
static bool parse_small_number(const char *s, const char *end, unsigned *out)
{
        unsigned v = 0;

        if (s == end)
                return false;
        for (; s < end; s++) {
                if (*s < '0' || *s > '9' || v > 6553)
                        return false;
                v = v * 10 + (unsigned)(*s - '0');
        }
        if (v > 65535)
                return false;
        *out = v;
        return true;
}

/* "<major>.<minor>" */
static bool parse_version(const char *s, unsigned *major, unsigned *minor)
{
        const char *dot = strchr(s, '.');

        return dot && parse_small_number(s, dot, major) &&
               parse_small_number(dot + 1, dot + strlen(dot), minor);
}

enum field {
        F_IA_NAME,
        F_API_VERSION,
        F_THREADSAFETY,
        F_DEFAULT,
        F_LIB_PATH,
        F_PROVIDER_VERSION,
        F_IA_PARAMS,
        F_PLATFORM_PARAMS,
        N_FIELDS,
};

static const char *check_fields(char fields[N_FIELDS][DAT_CONF_FIELD_MAX], struct dat_conf_entry *e)
{
        const char *pv = fields[F_PROVIDER_VERSION], *dot = strchr(pv, '.');
        unsigned pv_major, pv_minor;

        if (!fields[F_IA_NAME][0])
                return "empty IA name";
        if (strlen(fields[F_IA_NAME]) >= sizeof(e->ia_name))
                return "IA name longer than DAT_NAME_MAX_LENGTH";
        /* 'u' is a user-level (uDAPL) entry; 'k' entries are for the kernel. */
        if (fields[F_API_VERSION][0] != 'u')
                return "API version is not of the form u<major>.<minor>";
        if (!parse_version(fields[F_API_VERSION] + 1, &e->api_major, &e->api_minor))
                return "API version is not of the form u<major>.<minor>";
        if (strcmp(fields[F_THREADSAFETY], "threadsafe") == 0)
                e->thread_safe = true;
        else if (strcmp(fields[F_THREADSAFETY], "nonthreadsafe") == 0)
                e->thread_safe = false;
        else
                return "thread safety is neither \"threadsafe\" nor \"nonthreadsafe\"";
        if (strcmp(fields[F_DEFAULT], "default") == 0)
                e->is_default = true;
        else if (strcmp(fields[F_DEFAULT], "nondefault") == 0)
                e->is_default = false;
        else
                return "fourth field is neither \"default\" nor \"nondefault\"";
        if (!fields[F_LIB_PATH][0])
                return "empty library path";
        /* <name>.<major>.<minor>, e.g. datd.2.0 */
        if (!dot || dot == pv || !parse_version(dot + 1, &pv_major, &pv_minor))
                return "provider version is not of the form <name>.<major>.<minor>";
        strcpy(e->ia_name, fields[F_IA_NAME]);
        strcpy(e->lib_path, fields[F_LIB_PATH]);
        strcpy(e->provider_version, pv);
        strcpy(e->ia_params, fields[F_IA_PARAMS]);
        strcpy(e->platform_params, fields[F_PLATFORM_PARAMS]);
        return NULL;
}

int dat_conf_parse_line(const char *line, struct dat_conf_entry *entry, const char **why)
{
        char fields[N_FIELDS][DAT_CONF_FIELD_MAX], extra[DAT_CONF_FIELD_MAX];
        const char *p = line;
        int n = 0, r;

        *why = NULL;
        memset(entry, 0, sizeof(*entry));
        while (n < N_FIELDS) {
                r = next_field(&p, fields[n], sizeof(fields[n]), why);
                if (r < 0)
                        return -1;
                if (r == 0)
                        break;
                n++;
        }
        if (n == 0)
                return 0;
        if (n < N_FIELDS) {
                *why = "fewer than 8 fields";
                return -1;
        }
        r = next_field(&p, extra, sizeof(extra), why);
        if (r != 0) {
                if (r > 0)
                        *why = "more than 8 fields";
                return -1;
        }
        *why = check_fields(fields, entry);
        return *why ? -1 : 1;
}

bool dat_conf_entry_is_ours(const struct dat_conf_entry *entry)
{
        const char *base = strrchr(entry->lib_path, '/');

        base = base ? base + 1 : entry->lib_path;
        return strncmp(base, "libdat2.so", strlen("libdat2.so")) == 0;
}

void dat_conf_entry_datd_name(const struct dat_conf_entry *entry, char *buf, size_t n)
{
        const char *s = entry->ia_params;
        size_t len;

        while (*s == ' ' || *s == '\t')
                s++;
        len = strcspn(s, " \t");
        if (len == 0) {
                s = entry->ia_name;
                len = strlen(s);
        }
        if (len >= n)
                len = n - 1;
        memcpy(buf, s, len);
        buf[len] = '\0';
}

const char *dat_conf_origin(const struct dat_conf *conf)
{
        return conf->overridden ? "set by DAT_OVERRIDE" : "DAT_OVERRIDE unset";
}

/* Whether an entry is one of the kind looked at: this library's (ours) or
 * another provider library's. */
static bool of_kind(const struct dat_conf_entry *e, bool ours)
{
        return dat_conf_entry_is_ours(e) == ours;
}

/* The best entry of the kind for name/major/thread safety with a minor >=
 * the one asked: an exact minor first, else the smallest larger. */
static const struct dat_conf_entry *best_minor(const struct dat_conf *conf, const char *name,
                                               unsigned major, unsigned minor, bool need_ts,
                                               bool ours)
{
        const struct dat_conf_entry *best = NULL;

        for (size_t i = 0; i < conf->n_entries; i++) {
                const struct dat_conf_entry *e = &conf->entries[i];

                if (strcmp(e->ia_name, name) != 0 || !of_kind(e, ours) ||
                    e->api_major != major || e->api_minor < minor || (need_ts && !e->thread_safe))
                        continue;
                if (!best || e->api_minor < best->api_minor)
                        best = e;
        }
        return best;
}

DAT_RETURN dat_conf_find(const struct dat_conf *conf, const char *name, unsigned major,
                         unsigned minor, bool thread_safe, const struct dat_conf_entry **entry,
                         char *why, size_t why_len)
{
        const struct dat_conf_entry *named = NULL, *first = NULL;
        bool major_ok = false, minor_ok = false, ours = false;

        for (size_t i = 0; i < conf->n_entries; i++) {
                const struct dat_conf_entry *e = &conf->entries[i];

                if (strcmp(e->ia_name, name) == 0) {
                        named = named ? named : e;
                        ours |= dat_conf_entry_is_ours(e);
                }
        }
        if (!named) {
                if (conf->read_errno)
                        snprintf(why, why_len, "no such IA: cannot read %s (%s): %s", conf->path,
                                 dat_conf_origin(conf), strerror(conf->read_errno));
                else
                        snprintf(why, why_len, "no such IA in %s (%s)", conf->path,
                                 dat_conf_origin(conf));
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_NAME_NOT_REGISTERED);
        }
        /* This library's entries for the name, if it has any; else those of
         * the other provider libraries that name it. */
        for (size_t i = 0; i < conf->n_entries; i++) {
                const struct dat_conf_entry *e = &conf->entries[i];

                if (strcmp(e->ia_name, name) != 0 || !of_kind(e, ours))
                        continue;
                first = first ? first : e;
                major_ok |= e->api_major == major;
                minor_ok |= e->api_major == major && e->api_minor >= minor;
        }
        if (!major_ok) {
                snprintf(why, why_len, "%s:%u offers API u%u.%u, not major version %u", conf->path,
                         first->line, first->api_major, first->api_minor, major);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_MAJOR_NOT_FOUND);
        }
        if (!minor_ok) {
                snprintf(why, why_len, "no entry in %s offers API u%u.%u or a newer minor",
                         conf->path, major, minor);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_MINOR_NOT_FOUND);
        }
        *entry = best_minor(conf, name, major, minor, thread_safe, ours);
        if (!*entry) {
                snprintf(why, why_len, "thread safety asked for, but every matching entry in %s "
                         "is \"nonthreadsafe\"", conf->path);
                return DAT_ERR(DAT_PROVIDER_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND);
        }
        return DAT_SUCCESS;
}

static int add_entry(struct dat_conf *conf, const struct dat_conf_entry *e, size_t *cap)
{
        if (conf->n_entries == *cap) {
                size_t bigger = *cap ? *cap * 2 : 8;
                struct dat_conf_entry *p = realloc(conf->entries, bigger * sizeof(*p));

                if (!p)
                        return -ENOMEM;
                conf->entries = p;
                *cap = bigger;
        }
        conf->entries[conf->n_entries++] = *e;
        return 0;
}

/* Reads the rest of an over-long line so that the next fgets starts afresh. */
static void skip_rest_of_line(FILE *f)
{
        int c;

        do
                c = fgetc(f);
        while (c != EOF && c != '\n');
}

int dat_conf_load(struct dat_conf *conf)
{
        const char *override = getenv("DAT_OVERRIDE");
        char line[DAT_CONF_LINE_MAX + 2];
        size_t cap = 0;
        unsigned lineno = 0;
        FILE *f;

        memset(conf, 0, sizeof(*conf));
        conf->overridden = override && *override;
        snprintf(conf->path, sizeof(conf->path), "%s",
                 conf->overridden ? override : SYSCONFDIR "/dat.conf");
        f = fopen(conf->path, "re");
        if (!f) {
                conf->read_errno = errno;
                dat_trace("cannot read %s (%s): %s", conf->path, dat_conf_origin(conf),
                          strerror(conf->read_errno));
                return 0;
        }
        while (fgets(line, sizeof(line), f)) {
                struct dat_conf_entry e;
                const char *why;
                size_t len = strlen(line);
                int r;

                lineno++;
                if (len > DAT_CONF_LINE_MAX) {
                        if (line[len - 1] != '\n')
                                skip_rest_of_line(f);
                        dat_trace("%s:%u: skipped: line longer than %d bytes", conf->path,
                                  lineno, DAT_CONF_LINE_MAX);
                        continue;
                }
                r = dat_conf_parse_line(line, &e, &why);
                if (r < 0)
                        dat_trace("%s:%u: skipped: %s", conf->path, lineno, why);
                if (r <= 0)
                        continue;
                if (conf->n_entries >= DAT_CONF_MAX_ENTRIES) {
                        dat_trace("%s:%u: skipped: more than %d entries", conf->path, lineno,
                                  DAT_CONF_MAX_ENTRIES);
                        continue;
                }
                e.line = lineno;
                if (add_entry(conf, &e, &cap) < 0) {
                        fclose(f);
                        dat_conf_free(conf);
                        return -ENOMEM;
                }
        }
        fclose(f);
        return 0;
}

void dat_conf_free(struct dat_conf *conf)
{
        free(conf->entries);
        conf->entries = NULL;
        conf->n_entries = 0;
}

/* dat_registry_list_providers(3DAT).  Lists every entry: this library's
 * own (served by datd) and those naming another provider library, which
 * dat_ia_open loads (provider_registry.h).
 *
 * max_to_return smaller than the number of entries: the first max_to_return
 * are returned with DAT_SUCCESS and *entries_returned says how many were
 * filled (Debian's libdat2 behaves the same, and consumers rely on it).
 * max_to_return <= 0 is the way to ask for the count: DAT_INVALID_PARAMETER
 * (argument 1) with *entries_returned set to the number available, as the man
 * page says a failed call reports; dat_provider_list may then be NULL. */
_public_ DAT_RETURN dat_registry_list_providers(DAT_COUNT max_to_return, DAT_COUNT *entries_returned,
                                                DAT_PROVIDER_INFO *(dat_provider_list[]))
{
        struct dat_conf conf;
        DAT_COUNT available = 0, filled = 0;

        if (!entries_returned)
                return DAT_ERR_ARG(2);
        if (max_to_return > 0 && !dat_provider_list)
                return DAT_ERR_ARG(3);
        if (dat_conf_load(&conf) < 0)
                return DAT_ERR(DAT_INSUFFICIENT_RESOURCES, DAT_RESOURCE_MEMORY);
        for (size_t i = 0; i < conf.n_entries; i++) {
                const struct dat_conf_entry *e = &conf.entries[i];
                DAT_PROVIDER_INFO *info;

                available++;
                if (filled >= max_to_return)
                        continue;
                info = dat_provider_list[filled];
                if (!info) {
                        dat_conf_free(&conf);
                        return DAT_ERR_ARG(3);
                }
                memset(info, 0, sizeof(*info));
                snprintf(info->ia_name, sizeof(info->ia_name), "%s", e->ia_name);
                info->dapl_version_major = e->api_major;
                info->dapl_version_minor = e->api_minor;
                info->is_thread_safe = e->thread_safe ? DAT_TRUE : DAT_FALSE;
                filled++;
        }
        dat_conf_free(&conf);
        if (max_to_return <= 0) {
                *entries_returned = available;
                return DAT_ERR_ARG(1);
        }
        *entries_returned = filled;
        return DAT_SUCCESS;
}

/* dat_registry_add_provider(3DAT), dat_registry_remove_provider(3DAT): the
 * calls a provider library makes from its dat_provider_init() and
 * dat_provider_fini() (or an application that loads a provider itself) to
 * enter and leave the dynamic registry (provider_registry.h). */
_public_ DAT_RETURN dat_registry_add_provider(const DAT_PROVIDER *provider,
                                              const DAT_PROVIDER_INFO *provider_info)
{
        return provider_registry_add(provider, provider_info);
}

_public_ DAT_RETURN dat_registry_remove_provider(const DAT_PROVIDER *provider,
                                                 const DAT_PROVIDER_INFO *provider_info)
{
        return provider_registry_remove(provider, provider_info);
}
