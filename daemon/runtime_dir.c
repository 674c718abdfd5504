#include <config.h>

#include <errno.h>
#include <sys/stat.h>
#include <unistd.h>

#include "daemon/log.h"
#include "daemon/runtime_dir.h"

int runtime_dir_check(const char *dir)
{
        struct stat st;

        if (lstat(dir, &st) < 0)
                return log_error_errno(-errno, "Failed to look at the runtime directory %s: %m", dir);
        if (!S_ISDIR(st.st_mode))
                return log_error_errno(-ENOTDIR, "Refusing the runtime directory %s: it is not a "
                                       "directory (a symbolic link?).", dir);
        /* systemd's RuntimeDirectory= makes it datd's. */
        if (st.st_uid != geteuid())
                return log_error_errno(-EPERM, "Refusing the runtime directory %s: it belongs to "
                                       "uid %u, not to datd's uid %u.", dir, (unsigned) st.st_uid,
                                       (unsigned) geteuid());
        if (st.st_mode & (S_IWGRP | S_IWOTH))
                return log_error_errno(-EPERM, "Refusing the runtime directory %s: mode %04o lets "
                                       "others than its owner write to it.", dir,
                                       (unsigned) (st.st_mode & 07777));
        return 0;
}

int runtime_dir_make(const char *dir)
{
        if (mkdir(dir, 0755) < 0 && errno != EEXIST)
                return log_error_errno(-errno, "Failed to create %s: %m", dir);
        return runtime_dir_check(dir);
}
