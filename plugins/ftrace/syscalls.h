/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* System call names and numbers of the architecture this was built for
 * (from the kernel headers, at build time). */

#include <stddef.h>

/* The number of "read" or "sys_read"; -ENOENT for a name not known. */
int syscall_number(const char *name);

/*
 * Writes the ftrace filter for raw_syscalls events that keeps only the
 * named system calls ("id == 0 || id == 39") into buf. Names not known
 * are skipped and counted in *ret_unknown (the first one is copied into
 * first_unknown). Returns the number of names used, -ENOSPC if the
 * filter does not fit.
 */
int syscall_filter(const char *const *names, size_t n, char *buf, size_t size, size_t *ret_unknown,
                   char *first_unknown, size_t first_unknown_size);
