/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>

#include "traced/plugin.h"

/* Validates a plugin descriptor against this host's ABI. 0, or -EINVAL
 * with the reason written into why; -E2BIG when the plugin,
 * built against a newer minor, uses what this host lacks. */
int plugin_check_descriptor(const struct traced_plugin_descriptor *d, char *why, size_t why_size);
