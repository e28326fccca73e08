/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "supervisor/selinux-label.h"

#if HAVE_SELINUX
#include <selinux/context.h>
#include <selinux/selinux.h>

#define SUPERVISOR_TYPE "traced_t"

/* A copy of the current context with its type replaced, or NULL when
 * traced does not run in SUPERVISOR_TYPE. */
static int context_with_type(const char *type, char *buf, size_t size) {
        char *cur = NULL;
        int r = 0;

        buf[0] = '\0';
        if (is_selinux_enabled() <= 0)
                return 0;
        if (getcon(&cur) < 0)
                return -errno;
        context_t c = context_new(cur);
        if (!c) {
                r = -errno;
                goto out;
        }
        if (strcmp(context_type_get(c), SUPERVISOR_TYPE) != 0)
                goto out;
        if (context_type_set(c, type) < 0) {
                r = -errno;
                goto out;
        }
        const char *s = context_str(c);
        if (!s || strlen(s) >= size) {
                r = -ENAMETOOLONG;
                goto out;
        }
        snprintf(buf, size, "%s", s);
out:
        if (c)
                context_free(c);
        freecon(cur);
        return r;
}

int selinux_label_enter_core(void) {
        char ctx[512];
        int r = context_with_type("traced_core_t", ctx, sizeof(ctx));
        if (r < 0 || !ctx[0])
                return r;
        return setcon(ctx) < 0 ? -errno : 0;
}

int selinux_label_host_context(const char *plugin_path, char *buf, size_t size) {
        static const struct {
                const char *file, *domain;
        } map[] = {
                { "traced_ftrace_plugin_t", "traced_ftrace_host_t" },
                { "traced_perf_plugin_t", "traced_perf_host_t" },
                { "traced_bpf_plugin_t", "traced_bpf_host_t" },
                { "traced_journald_plugin_t", "traced_journald_host_t" },
                { "traced_sysstats_plugin_t", "traced_sysstats_host_t" },
                { "traced_heap_plugin_t", "traced_heap_host_t" },
        };
        const char *domain = "traced_plugin_host_t";
        char *fcon = NULL;

        buf[0] = '\0';
        if (is_selinux_enabled() <= 0)
                return 0;
        if (getfilecon(plugin_path, &fcon) >= 0) {
                context_t c = context_new(fcon);
                const char *t = c ? context_type_get(c) : NULL;
                for (size_t i = 0; t && i < sizeof(map) / sizeof(map[0]); i++)
                        if (strcmp(t, map[i].file) == 0)
                                domain = map[i].domain;
                if (c)
                        context_free(c);
                freecon(fcon);
        }
        return context_with_type(domain, buf, size);
}

int selinux_label_set_exec(const char *context) {
        if (!context || !context[0])
                return 0;
        return setexeccon(context) < 0 ? -errno : 0;
}

#else

int selinux_label_enter_core(void) {
        return 0;
}

int selinux_label_host_context(const char *plugin_path, char *buf, size_t size) {
        if (size > 0)
                buf[0] = '\0';
        return 0;
}

int selinux_label_set_exec(const char *context) {
        return 0;
}
#endif
