#include "config.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tests/daemon/scratch.h"

static char scratch_dir[64];

/* Everything a test puts there; scratch_remove() knows no other names. */
static const char *const scratch_names[] = {
        "datd.conf", "datd.sock", "bus.sock", "datd.log", "system_bus_socket", "dbus.log",
};

const char *scratch_path(const char *name, char path[SCRATCH_PATH_MAX])
{
        if (!scratch_dir[0]) {
                strcpy(scratch_dir, "/tmp/datd-scratch-XXXXXX");
                if (!mkdtemp(scratch_dir)) {
                        scratch_dir[0] = '\0';
                        return NULL;
                }
        }
        snprintf(path, SCRATCH_PATH_MAX, "%s/%s", scratch_dir, name);
        return path;
}

const char *scratch_write(const char *name, const char *content, char path[SCRATCH_PATH_MAX])
{
        FILE *f;

        if (!scratch_path(name, path))
                return NULL;
        f = fopen(path, "we");
        if (!f)
                return NULL;
        if (fputs(content, f) < 0) {
                fclose(f);
                return NULL;
        }
        return fclose(f) == 0 ? path : NULL;
}

void scratch_remove(void)
{
        char path[SCRATCH_PATH_MAX];

        if (!scratch_dir[0])
                return;
        for (size_t i = 0; i < sizeof(scratch_names) / sizeof(scratch_names[0]); i++)
                unlink(scratch_path(scratch_names[i], path));
        rmdir(scratch_dir);
        scratch_dir[0] = '\0';
}
