/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "basic/abi-struct.h"
#include "basic/macro.h"
#include "plugin-check.h"

/* A plugin built against a newer minor (or any plugin whose structures
 * are longer than this host's) loads when what this host does not know of
 * them is zero: it uses nothing the host lacks (abi-struct.h). */
static int check_newer(const struct traced_plugin_descriptor *d, char *why, size_t why_size) {
        const struct {
                const char *what;
                const void *s;
                size_t known, size;
        } parts[] = {
                { "descriptor", d, sizeof(*d), d->struct_size },
                { "ops table", d->ops, sizeof(*d->ops), d->ops->struct_size },
        };
        for (size_t k = 0; k < ELEMENTSOF(parts); k++) {
                if (parts[k].size > ABI_STRUCT_MAX) {
                        snprintf(why, why_size, "plugin \"%s\": its %s claims %zu bytes", d->name, parts[k].what,
                                 parts[k].size);
                        return -EINVAL;
                }
                if (abi_check_tail(parts[k].s, parts[k].known, parts[k].size) < 0) {
                        snprintf(why, why_size,
                                 "plugin \"%s\" (ABI %u.%u) uses what this host (ABI %u.%u) lacks: its %s is "
                                 "%zu bytes long, this host knows the first %zu, and the rest is set",
                                 d->name, d->abi_major, d->abi_minor, TRACED_PLUGIN_ABI_MAJOR,
                                 TRACED_PLUGIN_ABI_MINOR, parts[k].what, parts[k].size, parts[k].known);
                        return -E2BIG;
                }
        }
        return 0;
}

int plugin_check_descriptor(const struct traced_plugin_descriptor *d, char *why, size_t why_size) {
        if (!d) {
                snprintf(why, why_size, "the entry point returned no descriptor");
                return -EINVAL;
        }
        if (d->magic != TRACED_PLUGIN_MAGIC) {
                snprintf(why, why_size, "bad magic 0x%08x", d->magic);
                return -EINVAL;
        }
        if (d->abi_major != TRACED_PLUGIN_ABI_MAJOR) {
                snprintf(why, why_size, "plugin ABI %u.%u, this host speaks %u.x", d->abi_major, d->abi_minor,
                         TRACED_PLUGIN_ABI_MAJOR);
                return -EINVAL;
        }
        if (d->struct_size < offsetof(struct traced_plugin_descriptor, ops) + sizeof(void *)) {
                snprintf(why, why_size, "descriptor too small (%u bytes)", d->struct_size);
                return -EINVAL;
        }
        if (!d->name || !d->name[0]) {
                snprintf(why, why_size, "the plugin has no name");
                return -EINVAL;
        }
        if (!d->ops || d->ops->struct_size < offsetof(struct traced_plugin_ops, stop) + sizeof(void *) ||
            !d->ops->create) {
                snprintf(why, why_size, "the plugin's ops table is missing or too small");
                return -EINVAL;
        }
        return check_newer(d, why, why_size);
}
