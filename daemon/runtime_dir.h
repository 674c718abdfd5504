/* The runtime directory (datd.conf's runtime_dir): whoever may write to it
 * may replace datd's sockets with his own, or plant a link where datd is
 * about to create one.  Checked by the start (manager.c) and by
 * --check-config (datd.c) alike, so that the check says OK to no directory
 * the start then refuses. */
#ifndef DATD_DAEMON_RUNTIME_DIR_H
#define DATD_DAEMON_RUNTIME_DIR_H

/* 0 if dir is a directory (not a symbolic link) of datd's euid that no one
 * else may write to, sticky bit or not; else -errno, logged with the
 * reason (-ENOENT too: the caller decides what a missing one means). */
int runtime_dir_check(const char *dir);

/* Makes dir (0755, so that every user reaches the sockets inside) unless it
 * exists, then runtime_dir_check()s it.  0 or -errno, logged. */
int runtime_dir_make(const char *dir);

#endif
