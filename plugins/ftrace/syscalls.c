/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "syscalls.h"

struct syscall_entry {
        const char *name;
        int number;
};

/* { "name", number }, sorted by name; generated from <asm/unistd.h>. */
static const struct syscall_entry table[] = {
#include "plugins/ftrace/syscall-table.h"
};

static int cmp(const void *key, const void *elem) {
        return strcmp(key, ((const struct syscall_entry *) elem)->name);
}

int syscall_number(const char *name) {
        if (!name)
                return -EINVAL;
        if (strncmp(name, "sys_", 4) == 0)
                name += 4;
        const struct syscall_entry *e =
                bsearch(name, table, sizeof(table) / sizeof(table[0]), sizeof(table[0]), cmp);
        return e ? e->number : -ENOENT;
}

int syscall_filter(const char *const *names, size_t n, char *buf, size_t size, size_t *ret_unknown,
                   char *first_unknown, size_t first_unknown_size) {
        size_t len = 0, unknown = 0;
        int used = 0;
        if (size == 0)
                return -ENOSPC;
        buf[0] = '\0';
        for (size_t i = 0; i < n; i++) {
                int nr = syscall_number(names[i]);
                if (nr < 0) {
                        if (unknown++ == 0 && first_unknown_size)
                                snprintf(first_unknown, first_unknown_size, "%s", names[i]);
                        continue;
                }
                int k = snprintf(buf + len, size - len, "%sid == %d", used ? " || " : "", nr);
                if (k < 0 || (size_t) k >= size - len)
                        return -ENOSPC;
                len += (size_t) k;
                used++;
        }
        if (ret_unknown)
                *ret_unknown = unknown;
        return used;
}
