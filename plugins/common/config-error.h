/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The plugins' config parsers report what is wrong with a config as text
 * for the user (err, n bytes) and return -EINVAL; config_error does both in
 * one step. Header-only: the parsers' libraries link nothing else of
 * plugins/common. */

#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

__attribute__((format(printf, 3, 4))) static inline int config_error(char *err, size_t n, const char *fmt, ...) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(err, n, fmt, ap);
        va_end(ap);
        return -EINVAL;
}
