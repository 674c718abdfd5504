/* The static registry: dat.conf, read on every dat_registry_list_providers()
 * and dat_ia_openv() so that an edit (or a changed DAT_OVERRIDE) takes effect
 * without restarting the consumer.  The file is small; reading it costs a
 * few microseconds on a control path.
 *
 * Line format (one IA per line, fields separated by blanks, "#" starts a
 * comment outside quotes, a field with blanks is double-quoted):
 *   <ia_name> <api_version> <threadsafety> <default|nondefault> <lib_path>
 *   <provider_version> "<ia_params>" "<platform_params>"
 * e.g.  datd-shm u2.0 threadsafe default libdat2.so.2 datd.2.0 "shm" ""
 *
 * A line that does not parse is skipped; its reason goes to the debug trace. */
#ifndef DATD_LIBDAT_REGISTRY_H
#define DATD_LIBDAT_REGISTRY_H

#include <stdbool.h>
#include <stddef.h>

#include "libdat/libdat.h"

#ifndef SYSCONFDIR
#define SYSCONFDIR "/etc"
#endif

#define DAT_CONF_FIELD_MAX 512   /* longest field accepted */
#define DAT_CONF_LINE_MAX 4096   /* longest line accepted */
#define DAT_CONF_MAX_ENTRIES 1024

struct dat_conf_entry {
        char ia_name[DAT_NAME_MAX_LENGTH];
        unsigned api_major, api_minor;
        bool thread_safe;
        bool is_default;
        char lib_path[DAT_CONF_FIELD_MAX];
        char provider_version[DAT_CONF_FIELD_MAX];
        char ia_params[DAT_CONF_FIELD_MAX];
        char platform_params[DAT_CONF_FIELD_MAX];
        unsigned line;                  /* where it came from, for traces */
};

struct dat_conf {
        char path[4096];                /* the file read */
        bool overridden;                /* path came from DAT_OVERRIDE */
        int read_errno;                 /* 0, or why the file could not be read */
        size_t n_entries;
        struct dat_conf_entry *entries; /* every line that parsed */
};

/* Reads the registry file: $DAT_OVERRIDE if set and non-empty, else
 * SYSCONFDIR/dat.conf.  A missing or unreadable file is an empty registry
 * (read_errno says why).  Returns 0, or -ENOMEM. */
int dat_conf_load(struct dat_conf *conf);
void dat_conf_free(struct dat_conf *conf);

/* Parses one line of text.  Returns 1 and fills *entry for an entry, 0 for a
 * blank or comment-only line, -1 for a malformed one with *why set to a
 * static reason. */
int dat_conf_parse_line(const char *line, struct dat_conf_entry *entry, const char **why);

/* True when the entry is served by this library through datd: its library
 * is libdat2.so (any suffix), i.e. one library is registry and provider. */
bool dat_conf_entry_is_ours(const struct dat_conf_entry *entry);

/* datd's name of the IA: the first word of ia_params, or the DAT name when
 * ia_params is empty.  Writes at most n bytes, NUL terminated. */
void dat_conf_entry_datd_name(const struct dat_conf_entry *entry, char *buf, size_t n);

/* The entry dat_ia_openv() uses for (name, major, minor, thread safety),
 * following dat_registry_list_providers(3DAT): same name and major, a minor
 * equal to the one asked or (if none is equal) larger.  Thread safety: a
 * consumer asking for a thread-safe provider needs a "threadsafe" entry; one
 * that does not ask (DAT_THREADSAFE is DAT_FALSE in the DAT 2.0 headers, so
 * every dat_ia_open() caller) takes either kind, because a thread-safe
 * provider serves a single-threaded consumer just as well.  This library's
 * entries for the name count if it has any, else those naming other
 * provider libraries (dat_conf_entry_is_ours tells the caller which it got).
 * Returns DAT_SUCCESS with *entry, or
 * DAT_PROVIDER_NOT_FOUND with the subtype (DAT_NAME_NOT_REGISTERED,
 * DAT_MAJOR_NOT_FOUND, DAT_MINOR_NOT_FOUND, DAT_THREAD_SAFETY_NOT_FOUND) and
 * the full reason in why. */
DAT_RETURN dat_conf_find(const struct dat_conf *conf, const char *name, unsigned major,
                         unsigned minor, bool thread_safe, const struct dat_conf_entry **entry,
                         char *why, size_t why_len);

/* "DAT_OVERRIDE=<path>" or "DAT_OVERRIDE unset", for traces. */
const char *dat_conf_origin(const struct dat_conf *conf);

#endif
