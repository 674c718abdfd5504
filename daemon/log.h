/* datd's logging: syslog levels, to stderr with a level prefix or to the
 * journal.  The *_errno() forms take a negative (or positive) errno, make it
 * available to %m and return it negative, so that a caller can write
 * "return log_error_errno(r, "Failed to ...: %m");". */
#ifndef DATD_DAEMON_LOG_H
#define DATD_DAEMON_LOG_H

#include <stdlib.h>
#include <syslog.h>

typedef enum LogTarget {
        LOG_TARGET_AUTO,     /* the journal if stderr is connected to it, else the console */
        LOG_TARGET_CONSOLE,  /* stderr, "warning: ..." */
        LOG_TARGET_JOURNAL,
} LogTarget;

void log_set_target(LogTarget target);
void log_set_max_level(int level);
int log_get_max_level(void);

/* "err", "warning", "notice", "info", "debug" <-> LOG_ERR..LOG_DEBUG; -EINVAL
 * for anything else. */
int log_level_from_string(const char *s);
const char *log_level_to_string(int level);
int log_target_from_string(const char *s);

int log_internal(int level, int error, const char *file, int line, const char *func,
                 const char *format, ...) __attribute__((format(printf, 6, 7)));

/* The arguments are only evaluated when the level is enabled. */
#define log_full_errno(level, error, ...)                                       \
        ({                                                                      \
                int _level = (level), _e = (error);                             \
                log_get_max_level() >= _level                                   \
                        ? log_internal(_level, _e, __FILE__, __LINE__, __func__, __VA_ARGS__) \
                        : -abs(_e);                                             \
        })

#define log_full(level, ...) ((void) log_full_errno((level), 0, __VA_ARGS__))

#define log_debug(...) log_full(LOG_DEBUG, __VA_ARGS__)
#define log_info(...) log_full(LOG_INFO, __VA_ARGS__)
#define log_notice(...) log_full(LOG_NOTICE, __VA_ARGS__)
#define log_warning(...) log_full(LOG_WARNING, __VA_ARGS__)
#define log_error(...) log_full(LOG_ERR, __VA_ARGS__)

#define log_debug_errno(error, ...) log_full_errno(LOG_DEBUG, error, __VA_ARGS__)
#define log_info_errno(error, ...) log_full_errno(LOG_INFO, error, __VA_ARGS__)
#define log_notice_errno(error, ...) log_full_errno(LOG_NOTICE, error, __VA_ARGS__)
#define log_warning_errno(error, ...) log_full_errno(LOG_WARNING, error, __VA_ARGS__)
#define log_error_errno(error, ...) log_full_errno(LOG_ERR, error, __VA_ARGS__)

#define log_oom() log_error_errno(-ENOMEM, "Out of memory.")

#endif
