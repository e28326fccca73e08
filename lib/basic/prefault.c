/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/prefault.h"

int prefault_write(void *p, size_t n) {
#ifdef MADV_POPULATE_WRITE
        uintptr_t page = (uintptr_t) sysconf(_SC_PAGESIZE);
        uintptr_t from = ((uintptr_t) p + page - 1) & ~(page - 1);
        uintptr_t to = ((uintptr_t) p + n) & ~(page - 1);
        if (n == 0 || to <= from)
                return 0; /* no whole page: the faults are few */
        if (madvise((void *) from, to - from, MADV_POPULATE_WRITE) < 0)
                return -errno;
        return 0;
#else
        (void) p;
        (void) n;
        return -EINVAL;
#endif
}

void *calloc_prefaulted(size_t n, size_t size) {
        void *p = calloc(n, size);
        if (p) {
                int saved = errno;
                (void) prefault_write(p, n * size); /* calloc checked the product */
                errno = saved;
        }
        return p;
}
