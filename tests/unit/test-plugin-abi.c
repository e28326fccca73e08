/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The plugin ABI pinned: sizes and offsets of every public structure (on
 * LP64) and the host's descriptor checks. A change here breaks every
 * plugin built against an earlier header. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stddef.h>
#include <string.h>

#include "plugin-check.h"
#include "traced/plugin.h"

Test(plugin_abi, constants) {
        cr_assert_eq(TRACED_PLUGIN_MAGIC, 0x44435254u);
        cr_assert_eq(TRACED_PLUGIN_ABI_MAJOR, 1);
        cr_assert_eq(TRACED_PLUGIN_ABI_MINOR, 3);
        /* The data source flags, each a bit of its own for good. */
        cr_assert_eq(TRACED_PLUGIN_DS_WILL_NOTIFY_ON_STOP, 0x1u);
        cr_assert_eq(TRACED_PLUGIN_DS_HANDLES_INCREMENTAL_STATE_CLEAR, 0x2u);
        cr_assert_eq(TRACED_PLUGIN_DS_STALL_WHEN_FULL, 0x4u);
        cr_assert_str_eq(TRACED_PLUGIN_ENTRY_SYMBOL, "traced_plugin_entry");
        cr_assert_eq(TRACED_CAP(21), (uint64_t) 1 << 21);
}

Test(plugin_abi, descriptor_layout) {
        cr_assert_eq(sizeof(void *), 8, "these pins are for LP64");
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, magic), 0);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, abi_major), 4);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, abi_minor), 8);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, struct_size), 12);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, name), 16);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, version), 24);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, capabilities), 32);
        cr_assert_eq(offsetof(struct traced_plugin_descriptor, ops), 40);
        cr_assert_eq(sizeof(struct traced_plugin_descriptor), 48);
}

Test(plugin_abi, ops_layout) {
        cr_assert_eq(offsetof(struct traced_plugin_ops, struct_size), 0);
        cr_assert_eq(offsetof(struct traced_plugin_ops, create), 8);
        cr_assert_eq(offsetof(struct traced_plugin_ops, destroy), 16);
        cr_assert_eq(offsetof(struct traced_plugin_ops, start), 24);
        cr_assert_eq(offsetof(struct traced_plugin_ops, stop), 32);
        cr_assert_eq(offsetof(struct traced_plugin_ops, flush), 40);
        cr_assert_eq(offsetof(struct traced_plugin_ops, clear_incremental_state), 48); /* 1.1 */
        cr_assert_eq(sizeof(struct traced_plugin_ops), 56);
}

Test(plugin_abi, host_api_layout) {
        cr_assert_eq(offsetof(struct traced_host_api, struct_size), 0);
        cr_assert_eq(offsetof(struct traced_host_api, abi_minor), 4);
        cr_assert_eq(offsetof(struct traced_host_api, log), 8);
        cr_assert_eq(offsetof(struct traced_host_api, register_data_source), 16);
        cr_assert_eq(offsetof(struct traced_host_api, add_fd), 24);
        cr_assert_eq(offsetof(struct traced_host_api, add_timer), 32);
        cr_assert_eq(offsetof(struct traced_host_api, remove_source), 40);
        cr_assert_eq(offsetof(struct traced_host_api, new_writer), 48);
        cr_assert_eq(offsetof(struct traced_host_api, write_packet), 56);
        cr_assert_eq(offsetof(struct traced_host_api, flush_writer), 64);
        cr_assert_eq(offsetof(struct traced_host_api, free_writer), 72);
        cr_assert_eq(offsetof(struct traced_host_api, notify_stopped), 80);
        /* ABI 1.1 */
        cr_assert_eq(offsetof(struct traced_host_api, report_error), 88);
        /* ABI 1.2 */
        cr_assert_eq(offsetof(struct traced_host_api, begin_packet), 96);
        cr_assert_eq(offsetof(struct traced_host_api, end_packet), 104);
        cr_assert_eq(sizeof(struct traced_host_api), 112);
}

static int32_t fake_create(const struct traced_host_api *api, struct traced_host *host, void **ret) {
        return 0;
}

static const struct traced_plugin_ops good_ops = {
        .struct_size = sizeof(struct traced_plugin_ops),
        .create = fake_create,
};

Test(plugin_abi, descriptor_checks) {
        char why[256];
        struct traced_plugin_descriptor d = {
                .magic = TRACED_PLUGIN_MAGIC,
                .abi_major = TRACED_PLUGIN_ABI_MAJOR,
                .abi_minor = TRACED_PLUGIN_ABI_MINOR,
                .struct_size = sizeof(d),
                .name = "x",
                .version = "1",
                .ops = &good_ops,
        };
        cr_assert_eq(plugin_check_descriptor(&d, why, sizeof(why)), 0);

        struct traced_plugin_descriptor bad = d;
        bad.magic = 1;
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        cr_assert(strstr(why, "magic"));
        bad = d;
        bad.abi_major = 0;
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        bad = d;
        bad.struct_size = 16;
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        bad = d;
        bad.name = "";
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        bad = d;
        bad.ops = NULL;
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        struct traced_plugin_ops small = good_ops;
        small.struct_size = 8;
        bad = d;
        bad.ops = &small;
        cr_assert_eq(plugin_check_descriptor(&bad, why, sizeof(why)), -EINVAL);
        cr_assert_eq(plugin_check_descriptor(NULL, why, sizeof(why)), -EINVAL);
}

/* A plugin built against a newer minor: its structures are longer than
 * this host's. It loads while what the host does not know is zero, and is
 * refused, by name, once it is not. */
struct newer_ops {
        struct traced_plugin_ops known;
        void (*added_in_next_minor)(void *state);
};
struct newer_descriptor {
        struct traced_plugin_descriptor known;
        uint64_t added_in_next_minor;
};

static void added(void *state) {
}

Test(plugin_abi, newer_minor_loads_when_it_uses_nothing_new) {
        char why[256] = "";
        struct newer_ops ops = { .known = good_ops };
        ops.known.struct_size = sizeof(ops);
        struct newer_descriptor d = {
                .known = {
                        .magic = TRACED_PLUGIN_MAGIC,
                        .abi_major = TRACED_PLUGIN_ABI_MAJOR,
                        .abi_minor = TRACED_PLUGIN_ABI_MINOR + 1,
                        .struct_size = sizeof(d),
                        .name = "from-the-future",
                        .version = "1",
                        .ops = &ops.known,
                },
        };
        cr_assert_eq(plugin_check_descriptor(&d.known, why, sizeof(why)), 0, "%s", why);

        ops.added_in_next_minor = added;
        cr_assert_eq(plugin_check_descriptor(&d.known, why, sizeof(why)), -E2BIG);
        cr_assert(strstr(why, "\"from-the-future\"") && strstr(why, "lacks") && strstr(why, "ops"), "%s", why);

        ops.added_in_next_minor = NULL;
        d.added_in_next_minor = 1;
        cr_assert_eq(plugin_check_descriptor(&d.known, why, sizeof(why)), -E2BIG);
        cr_assert(strstr(why, "descriptor"), "%s", why);

        /* A size no structure has is garbage, not a newer minor. */
        d.added_in_next_minor = 0;
        d.known.struct_size = 1u << 20;
        cr_assert_eq(plugin_check_descriptor(&d.known, why, sizeof(why)), -EINVAL);
}
