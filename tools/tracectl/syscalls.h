/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* System call names by number, from libseccomp's tables of the kernel's
 * system calls for an architecture: the trace's (SystemInfo's utsname
 * machine, e.g. "x86_64", "aarch64"), else the one tracectl runs on. */

#include <stdint.h>

/* The name of nr on machine (NULL or "": this machine's), or NULL when
 * the table does not know it. The string lives until syscalls_done. */
const char *syscall_name(const char *machine, int64_t nr);
void syscalls_done(void);
