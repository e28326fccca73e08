/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* The CPUs online now (/sys/devices/system/cpu/online), in order, at most
 * max of them. Returns -errno when the list cannot be read. */
int cpus_online(uint32_t *cpus, size_t max, size_t *ret_n);

/* Whether cpu is among the n CPUs of the list. */
bool cpus_contain(const uint32_t *cpus, size_t n, uint32_t cpu);
