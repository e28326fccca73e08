/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* libbpf's messages into a plugin's log. libbpf has one print callback per
 * process and no context pointer: the plugin host runs one plugin, whose
 * host gets them. Warnings (verifier logs, missing features) and infos;
 * debug output is dropped. Include it once, where libbpf_log_to is used. */

#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/plugin-common.h"

static const struct traced_host_api *libbpf_log_api;
static struct traced_host *libbpf_log_host;

static int libbpf_log_print(enum libbpf_print_level level, const char *fmt, va_list ap) {
        if (level == LIBBPF_DEBUG || !libbpf_log_api)
                return 0;
        char buf[1024];
        vsnprintf(buf, sizeof(buf), fmt, ap);
        size_t n = strlen(buf);
        while (n > 0 && buf[n - 1] == '\n')
                buf[--n] = '\0';
        plugin_host_log(libbpf_log_api, libbpf_log_host, level == LIBBPF_WARN ? TRACED_LOG_WARNING : TRACED_LOG_INFO,
                        "libbpf: %s", buf);
        return 0;
}

/* libbpf's messages go to host's log from now on (api NULL: nowhere). */
static inline void libbpf_log_to(const struct traced_host_api *api, struct traced_host *host) {
        libbpf_log_api = api;
        libbpf_log_host = host;
        (void) libbpf_set_print(libbpf_log_print);
}
