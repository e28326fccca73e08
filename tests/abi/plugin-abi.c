/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Not a plugin: an exported function taking every structure of the plugin
 * ABI, so that abidw (tests/check-abi.sh) records their layout from the
 * debug information of this object, built from include/traced/plugin.h
 * alone. */

#include "traced/plugin.h"

TRACED_PLUGIN_EXPORT void traced_plugin_abi_types(const struct traced_plugin_descriptor *d,
                                                  const struct traced_host_api *api,
                                                  const struct traced_plugin_ops *ops, traced_plugin_entry_fn entry);

TRACED_PLUGIN_EXPORT void traced_plugin_abi_types(const struct traced_plugin_descriptor *d,
                                                  const struct traced_host_api *api,
                                                  const struct traced_plugin_ops *ops, traced_plugin_entry_fn entry) {
        (void) d;
        (void) api;
        (void) ops;
        (void) entry;
}
