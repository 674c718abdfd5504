/* Writes one valid message of every type into DIR (default: the current
 * directory), named as tests/proto/corpus/ names them: the seed corpus of
 * proto/fuzz_datp_validate.  Regenerate after a layout change:
 *   make tests/proto/datp-corpus-gen && tests/proto/datp-corpus-gen $srcdir/tests/proto/corpus */
#include "config.h"

#include <limits.h>
#include <stdio.h>

#include "tests/proto/datp_samples.h"

int main(int argc, char **argv)
{
        const char *dir = argc > 1 ? argv[1] : ".";

        for (size_t i = 0; i < datp_n_samples; i++) {
                const struct datp_sample *s = &datp_samples[i];
                union datp_message m;
                size_t len = datp_sample_build(s, &m);
                char path[PATH_MAX];
                FILE *f;

                snprintf(path, sizeof(path), "%s/%s", dir, s->file);
                f = fopen(path, "wb");
                if (!f || fwrite(&m, 1, len, f) != len || fclose(f) != 0) {
                        perror(path);
                        return 1;
                }
        }
        return 0;
}
