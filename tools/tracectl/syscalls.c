/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <stdlib.h>
#include <string.h>

#include <seccomp.h>

#include "basic/hashmap.h"
#include "syscalls.h"

/* Names already asked for: (arch, nr) -> the malloc'd name (or 1: none). */
static struct hashmap cache;

/* uname's machine to libseccomp's architecture name, where they differ. */
static uint32_t arch_of(const char *machine) {
        static const struct {
                const char *machine, *arch;
        } aliases[] = {
                { "i386", "x86" }, { "i486", "x86" }, { "i586", "x86" }, { "i686", "x86" },
                { "armv7l", "arm" }, { "armv6l", "arm" }, { "arm64", "aarch64" },
        };
        if (!machine || !machine[0])
                return SCMP_ARCH_NATIVE;
        for (size_t i = 0; i < sizeof(aliases) / sizeof(aliases[0]); i++)
                if (strcmp(machine, aliases[i].machine) == 0)
                        machine = aliases[i].arch;
        uint32_t a = seccomp_arch_resolve_name(machine);
        return a ? a : SCMP_ARCH_NATIVE;
}

const char *syscall_name(const char *machine, int64_t nr) {
        if (nr < 0 || nr > INT32_MAX)
                return NULL;
        uint32_t arch = arch_of(machine);
        uint64_t key = ((uint64_t) arch << 32) | (uint64_t) nr, v;
        if (hashmap_get(&cache, key, &v))
                return v == 1 ? NULL : (const char *) (uintptr_t) v;
        char *name = seccomp_syscall_resolve_num_arch(arch, (int) nr);
        if (hashmap_put(&cache, key, name ? (uint64_t) (uintptr_t) name : 1) < 0) {
                free(name);
                return NULL;
        }
        return name;
}

void syscalls_done(void) {
        size_t iter = 0;
        uint64_t key, v;
        while (hashmap_next(&cache, &iter, &key, &v))
                if (v != 1)
                        free((void *) (uintptr_t) v);
        hashmap_clear(&cache);
}
