/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Replays a fuzz target's corpus without libFuzzer, so that `make check`
 * runs every saved input (seeds and past crashers) with any compiler.
 * Usage: <replayer> [DIR|FILE...]; default: the corpus directory the
 * target was built with. */

#include <dirent.h>
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static int replay_file(const char *path) {
        FILE *f = fopen(path, "rb");
        if (!f) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        size_t cap = 4096, len = 0;
        uint8_t *buf = malloc(cap);
        for (;;) {
                if (!buf) {
                        fclose(f);
                        return -1;
                }
                size_t n = fread(buf + len, 1, cap - len, f);
                len += n;
                if (n == 0)
                        break;
                if (len == cap) {
                        cap *= 2;
                        uint8_t *nb = realloc(buf, cap);
                        if (!nb)
                                free(buf);
                        buf = nb;
                }
        }
        fclose(f);
        /* An exact-size copy so ASan catches reads past the input. */
        uint8_t *exact = malloc(len ? len : 1);
        if (!exact) {
                free(buf);
                return -1;
        }
        memcpy(exact, buf, len);
        free(buf);
        LLVMFuzzerTestOneInput(exact, len);
        free(exact);
        return 0;
}

static int replay_path(const char *path, unsigned *count) {
        struct stat st;
        if (stat(path, &st) < 0) {
                fprintf(stderr, "%s: %s\n", path, strerror(errno));
                return -1;
        }
        if (!S_ISDIR(st.st_mode)) {
                if (replay_file(path) < 0)
                        return -1;
                (*count)++;
                return 0;
        }
        DIR *d = opendir(path);
        if (!d)
                return -1;
        struct dirent *de;
        int r = 0;
        while ((de = readdir(d))) {
                if (de->d_name[0] == '.')
                        continue;
                char p[4096];
                snprintf(p, sizeof(p), "%s/%s", path, de->d_name);
                if (replay_path(p, count) < 0)
                        r = -1;
        }
        closedir(d);
        return r;
}

int main(int argc, char **argv) {
        unsigned count = 0;
        int r = 0;

        if (argc > 1) {
                for (int i = 1; i < argc; i++)
                        if (replay_path(argv[i], &count) < 0)
                                r = 1;
        } else if (replay_path(FUZZ_CORPUS_DIR, &count) < 0)
                r = 1;
        if (count == 0) {
                fprintf(stderr, "no corpus inputs found\n");
                return 1;
        }
        printf("%s: replayed %u inputs\n", argv[0], count);
        printf("%u passed, %u failed\n", r ? 0 : count, r ? 1u : 0u);
        return r;
}
