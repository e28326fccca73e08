/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.bpf_stack: one set of BPF programs per data source instance. */

#include <stddef.h>
#include <stdint.h>

#include "common/plugin-common.h"
#include "traced/plugin.h"

struct bpfstack_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
        struct plugin_instance *sessions; /* of struct bpfstack_session */
};

int bpfstack_session_start(struct bpfstack_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size);
/* Stops the instance and tells the service (notify_stopped) once its last
 * packets are committed, before its BPF objects, tables and caches are
 * freed: the recording's end does not wait for that. */
void bpfstack_session_stop(struct bpfstack_plugin *pl, uint64_t instance_id);
void bpfstack_session_flush(struct bpfstack_plugin *pl, uint64_t instance_id);
/* The service's ClearIncrementalState: what is in the ring buffer is
 * written first, then both sequences start their interned state again. */
void bpfstack_session_clear(struct bpfstack_plugin *pl, uint64_t instance_id);
void bpfstack_sessions_free(struct bpfstack_plugin *pl);
