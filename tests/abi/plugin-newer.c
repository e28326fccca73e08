/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A plugin as if built against the next minor of the plugin ABI: its
 * descriptor says minor TRACED_PLUGIN_ABI_MINOR + 1 and its ops table has
 * one more member than this tree's. Built twice by
 * tests/check-plugin-minor.sh: without USES_NEW the new member is NULL
 * (the plugin uses nothing this host lacks, and loads); with it, the member
 * is set (and the host refuses the plugin by name). */

#include <errno.h>

#include <traced/plugin.h>

#ifdef USES_NEW
#define NAME "newer-uses-new"
#else
#define NAME "newer-uses-nothing-new"
#endif

/* Also what the host refuses of any plugin: a flag bit it does not know,
 * and a promise to handle clears without the operation (this one has
 * none). Accepted, the plugin does not come up. */
static int32_t create(const struct traced_host_api *api, struct traced_host *host, void **ret_state) {
        if (api->register_data_source(host, "test.unknown-flag", 0x80000000u) != -EINVAL ||
            api->register_data_source(host, "test.no-clear-op", TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR) !=
                    -EINVAL)
                return -EPROTO;
        *ret_state = (void *) host;
        return api->register_data_source(host, "test." NAME, 0);
}

static void destroy(void *state) {
        (void) state;
}

static void start(void *state, uint64_t instance_id, const char *ds, const uint8_t *config, size_t size) {
        (void) state, (void) instance_id, (void) ds, (void) config, (void) size;
}

static void stop(void *state, uint64_t instance_id) {
        (void) state, (void) instance_id;
}

#ifdef USES_NEW
static void added_in_next_minor(void *state) {
        (void) state;
}
#endif

/* The next minor's ops: this tree's, then what it appends. */
struct next_ops {
        struct traced_plugin_ops known;
        void (*added_in_next_minor)(void *state);
};

static const struct next_ops ops = {
        .known = { .struct_size = sizeof(struct next_ops), .create = create, .destroy = destroy, .start = start,
                   .stop = stop },
#ifdef USES_NEW
        .added_in_next_minor = added_in_next_minor,
#endif
};

TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void);
TRACED_PLUGIN_EXPORT const struct traced_plugin_descriptor *traced_plugin_entry(void) {
        static const struct traced_plugin_descriptor d = {
                TRACED_PLUGIN_MAGIC, TRACED_PLUGIN_ABI_MAJOR, TRACED_PLUGIN_ABI_MINOR + 1,
                sizeof(struct traced_plugin_descriptor), NAME, "1", 0, &ops.known,
        };
        return &d;
}
