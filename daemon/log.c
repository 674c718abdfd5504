#include <config.h>

#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <systemd/sd-journal.h>
#include <unistd.h>

#include "common/macro.h"
#include "daemon/log.h"

static LogTarget log_target = LOG_TARGET_CONSOLE;
static int log_max_level = LOG_INFO;

static const char *const log_level_names[] = {
        [LOG_ERR] = "err",
        [LOG_WARNING] = "warning",
        [LOG_NOTICE] = "notice",
        [LOG_INFO] = "info",
        [LOG_DEBUG] = "debug",
};

static const char *const log_target_names[] = {
        [LOG_TARGET_AUTO] = "auto",
        [LOG_TARGET_CONSOLE] = "console",
        [LOG_TARGET_JOURNAL] = "journal",
};

static int string_table_lookup(const char *const *table, size_t n, const char *s)
{
        for (size_t i = 0; i < n; i++)
                if (table[i] && strcmp(table[i], s) == 0)
                        return (int) i;
        return -EINVAL;
}

int log_level_from_string(const char *s)
{
        return string_table_lookup(log_level_names, ARRAY_SIZE(log_level_names), s);
}

const char *log_level_to_string(int level)
{
        if (level < 0 || (size_t) level >= ARRAY_SIZE(log_level_names) || !log_level_names[level])
                return level < LOG_ERR ? "err" : "debug";
        return log_level_names[level];
}

int log_target_from_string(const char *s)
{
        return string_table_lookup(log_target_names, ARRAY_SIZE(log_target_names), s);
}

/* systemd sets JOURNAL_STREAM=<dev>:<inode> for services whose stderr is a
 * journal stream; it only counts if stderr is still that very stream. */
static bool stderr_is_journal(void)
{
        const char *e = getenv("JOURNAL_STREAM");
        unsigned long long dev, ino;
        struct stat st;

        if (!e || sscanf(e, "%llu:%llu", &dev, &ino) != 2)
                return false;
        if (fstat(STDERR_FILENO, &st) < 0)
                return false;
        return st.st_dev == (dev_t) dev && st.st_ino == (ino_t) ino;
}

void log_set_target(LogTarget target)
{
        if (target == LOG_TARGET_AUTO)
                target = stderr_is_journal() ? LOG_TARGET_JOURNAL : LOG_TARGET_CONSOLE;
        log_target = target;
}

void log_set_max_level(int level)
{
        log_max_level = level;
}

int log_get_max_level(void)
{
        return log_max_level;
}

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...)
{
        char buf[2048];
        va_list ap;
        int saved_errno = errno;

        error = abs(error);
        /* %m prints the error we were given, not whatever errno happens to be. */
        errno = error;
        va_start(ap, format);
        vsnprintf(buf, sizeof(buf), format, ap);
        va_end(ap);

        if (log_target == LOG_TARGET_JOURNAL) {
                if (error)
                        sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level,
                                        "ERRNO=%i", error, "CODE_FILE=%s", file,
                                        "CODE_LINE=%i", line, "CODE_FUNC=%s", func, NULL);
                else
                        sd_journal_send("MESSAGE=%s", buf, "PRIORITY=%i", level,
                                        "CODE_FILE=%s", file, "CODE_LINE=%i", line,
                                        "CODE_FUNC=%s", func, NULL);
        } else
                fprintf(stderr, "%s: %s\n", log_level_to_string(level), buf);

        errno = saved_errno;
        return -error;
}
