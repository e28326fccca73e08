/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <stdio.h>

#include "plugin-check.h"

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
        if (d->abi_minor > TRACED_PLUGIN_ABI_MINOR) {
                snprintf(why, why_size, "plugin ABI %u.%u is newer than this host's %u.%u", d->abi_major,
                         d->abi_minor, TRACED_PLUGIN_ABI_MAJOR, TRACED_PLUGIN_ABI_MINOR);
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
        return 0;
}
