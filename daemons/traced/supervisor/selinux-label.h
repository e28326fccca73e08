/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* SELinux domains of traced's processes (selinux/traced.te). The
 * supervisor runs in traced_t; the core, forked without exec, enters
 * traced_core_t with setcon(); each plugin host is exec'd into the domain
 * the plugin file's type names (traced_ftrace_plugin_t ->
 * traced_ftrace_host_t, ...; any other plugin: traced_plugin_host_t).
 * Without SELinux, or when traced does not run in traced_t (not started
 * through the policy), these do nothing and return 0. */

#include <stddef.h>

/* In the core's process, before it handles any input. */
int selinux_label_enter_core(void);

/* The context to exec the plugin host of plugin_path in, into buf ("" when
 * none applies). */
int selinux_label_host_context(const char *plugin_path, char *buf, size_t size);

/* In the host's child before execve(): context from the above. */
int selinux_label_set_exec(const char *context);
