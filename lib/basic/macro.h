/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Leaf utilities: no dependency on anything else in the tree. */

#include <errno.h>
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#define _unused_ __attribute__((__unused__))
#define _pure_ __attribute__((__pure__))
#define _likely_(x) (__builtin_expect(!!(x), 1))
#define _unlikely_(x) (__builtin_expect(!!(x), 0))
#define _printf_(a, b) __attribute__((__format__(printf, a, b)))
#define _warn_unused_result_ __attribute__((__warn_unused_result__))
#define _public_ __attribute__((__visibility__("default")))
#define _hidden_ __attribute__((__visibility__("hidden")))
#define _fallthrough_ __attribute__((__fallthrough__))
#define _always_inline_ inline __attribute__((__always_inline__))

#define ELEMENTSOF(x) (sizeof(x) / sizeof((x)[0]))
#define MIN(a, b) ((a) < (b) ? (a) : (b))
#define MAX(a, b) ((a) > (b) ? (a) : (b))
#define ALIGN_TO(x, a) (((x) + ((a) - 1)) & ~((__typeof__(x))(a) - 1))

/* Hands ownership of a pointer out of a _cleanup_ variable. */
#define TAKE_PTR(p)                          \
        ({                                   \
                __typeof__(p) _tp_ = (p);    \
                (p) = NULL;                  \
                _tp_;                        \
        })
#define TAKE_FD(fd)                          \
        ({                                   \
                int _tf_ = (fd);             \
                (fd) = -EBADF;               \
                _tf_;                        \
        })

static inline void freep(void *p) {
        free(*(void **) p);
}
#define _cleanup_(f) __attribute__((__cleanup__(f)))
#define _cleanup_free_ _cleanup_(freep)

static inline int safe_close(int fd) {
        if (fd >= 0) {
                int saved = errno;
                (void) close(fd);
                errno = saved;
        }
        return -EBADF;
}
static inline void closep(int *fd) {
        safe_close(*fd);
}
#define _cleanup_close_ _cleanup_(closep)

/* Declares a cleanup helper fooq(T **p) that calls func(*p) when non-NULL. */
#define DEFINE_TRIVIAL_CLEANUP_FUNC(type, func)          \
        static inline void func##p(type *p) {           \
                if (*p)                                 \
                        func(*p);                       \
        }

/* Returns -errno of the last failing libc call, never 0. */
static inline int negative_errno(void) {
        return errno > 0 ? -errno : -EIO;
}

static inline const char *strna(const char *s) {
        return s ? s : "n/a";
}
