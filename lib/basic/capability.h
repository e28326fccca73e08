/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Linux capabilities as masks (bit n = capability n, as TRACED_CAP(n)):
 * their names, and what a plugin's declaration means on this kernel. Used
 * by traced's supervisor and by the plugin host, which must agree. */

#include <stddef.h>
#include <stdint.h>

/* The name of capability cap as in capabilities(7), or NULL. */
const char *capability_name(unsigned cap);

/* Writes the names of mask's capabilities, space-separated ("none" for
 * none; an unnamed one as its number), into buf. Returns buf. */
char *capability_mask_names(uint64_t mask, char *buf, size_t size);

/* Limits this process's effective, permitted and inheritable sets to keep
 * (inheritable as permitted, so that the ambient set may hold them; what
 * is not permitted stays not held). Only system calls: safe in a forked
 * child. *ret_kept (may be NULL) is what is held after. Returns 0 or
 * -errno. */
int capability_keep(uint64_t keep, uint64_t *ret_kept);

/* What a plugin declaring mask is given on this kernel: CAP_PERFMON (38)
 * arrived in Linux 5.8, and before it perf_event_open's privileged uses
 * needed CAP_SYS_ADMIN (21), which a kernel that does not know
 * CAP_PERFMON gives in its place. */
uint64_t capability_for_kernel(uint64_t mask);
