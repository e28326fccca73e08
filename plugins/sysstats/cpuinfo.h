/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * linux.system_info's CpuInfo message: one Cpu per processor block of
 * /proc/cpuinfo (the online CPUs), with its name ("model name", else the
 * Arm kernels' machine-wide "Processor", else "unknown"), the Arm
 * identifier fields when all five are there, and from sysfs under root its
 * cpufreq frequencies (available and boost, ascending, each once) and
 * cpu_capacity.
 */

#include <stddef.h>

#include "traced/pbzero/perfetto/trace/system_info/cpu_info.pbw.h"

/* Appends CpuInfo.cpus for the cpuinfo text (len bytes) to out. Returns
 * the number of CPUs, or -ENOMEM. */
int cpuinfo_write(const char *text, size_t len, const char *root, CpuInfo *out);
