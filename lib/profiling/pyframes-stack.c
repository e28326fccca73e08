/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <dirent.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "profiling/pyframes-stack.h"
#include "profiling/pyframes.h"

#define MERGE_MAX 1024 /* native and Python frames merged per sample */

size_t py_stack_frames_interned(const uint64_t *native, const bool *is_eval, size_t n_native, const uint64_t *py,
                                const uint64_t *py_iids, size_t n_py, uint64_t *out, size_t cap) {
        bool is_entry[MERGE_MAX / 2];
        struct py_merged m[MERGE_MAX];
        if (n_native > MERGE_MAX / 2)
                n_native = MERGE_MAX / 2;
        if (n_py > MERGE_MAX / 2)
                n_py = MERGE_MAX / 2;
        for (size_t j = 0; j < n_py; j++)
                is_entry[j] = py[2 * j] & PY_FRAME_ENTRY;
        size_t nm = py_merge(is_eval, n_native, is_entry, n_py, m, MERGE_MAX), n = 0;
        for (size_t k = nm; k-- > 0 && n < cap;) {
                uint64_t iid = m[k].python ? py_iids[m[k].index] : native[m[k].index];
                if (iid)
                        out[n++] = iid;
        }
        return n;
}

size_t py_stack_frames(struct py_proc *pp, struct intern_writer *iw, const uint64_t *native, const bool *is_eval,
                       size_t n_native, const uint64_t *py, size_t n_py, uint64_t *out, size_t cap) {
        uint64_t py_iids[MERGE_MAX / 2];
        if (n_py > MERGE_MAX / 2)
                n_py = MERGE_MAX / 2;
        for (size_t j = 0; j < n_py; j++)
                py_iids[j] = py_proc_frame(pp, iw, py[2 * j] & ~PY_FRAME_ENTRY, py[2 * j + 1]);
        return py_stack_frames_interned(native, is_eval, n_native, py, py_iids, n_py, out, cap);
}

void py_scan_processes(void (*seen)(int pid, void *userdata), void *userdata) {
        DIR *d = opendir("/proc");
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT_MAX)
                        continue;
                char path[64], exe[PATH_MAX];
                snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
                ssize_t n = readlink(path, exe, sizeof(exe) - 1);
                unsigned major, minor;
                if (n <= 0)
                        continue;
                exe[n] = 0;
                if (py_version_of_path(exe, &major, &minor))
                        seen((int) pid, userdata);
        }
        closedir(d);
}
