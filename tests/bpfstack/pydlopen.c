/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A program that loads CPython late: it runs on the CPU for a while
 * (sampled, and looked at, with no interpreter mapped), then dlopen()s
 * libpython and runs its arguments as python3 would. */

#include <dlfcn.h>
#include <stdio.h>
#include <time.h>

static double now(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double) ts.tv_sec + (double) ts.tv_nsec / 1e9;
}

int main(int argc, char **argv) {
        volatile unsigned long spin = 0;
        for (double end = now() + 0.5; now() < end;)
                spin++;
        void *lib = dlopen(LIBPYTHON, RTLD_NOW | RTLD_GLOBAL);
        if (!lib) {
                fprintf(stderr, "%s\n", dlerror());
                return 1;
        }
        int (*bytes_main)(int, char **) = (int (*)(int, char **)) dlsym(lib, "Py_BytesMain");
        if (!bytes_main) {
                fprintf(stderr, "%s\n", dlerror());
                return 1;
        }
        return bytes_main(argc, argv);
}
