/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What the profilers' kernel-name program (kernelnames.bpf.c) and its user
 * (kernel-names.c) share: the plugin writes up to KERNEL_NAMES_BATCH kernel
 * addresses into the program's global data, runs it (BPF_PROG_RUN), and
 * reads back each address's name as the kernel's own %ps prints it:
 * "function", "function [module]", or the address in hex when no symbol
 * holds it. len is what the name needed with its NUL (more than
 * KERNEL_NAMES_NAME_MAX: cut short), or a negative errno. */

#define KERNEL_NAMES_BATCH 32
/* The kernel's KSYM_NAME_LEN (512 since Linux 6.1), with room for the
 * module's name. */
#define KERNEL_NAMES_NAME_MAX 576
