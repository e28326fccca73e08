/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* plugins/common: the log helpers over a host that keeps the last
 * message, the host table check and the instance list. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "common/plugin-common.h"
#include "test-packets.h"

struct fake_host {
        int level;
        char last[2048];
        unsigned calls;
};

static void fake_log(struct traced_host *host, int level, const char *message) {
        struct fake_host *h = (struct fake_host *) host;
        h->level = level;
        snprintf(h->last, sizeof(h->last), "%s", message);
        h->calls++;
}

static const struct traced_host_api api = {
        .struct_size = sizeof(struct traced_host_api),
        .log = fake_log,
        .begin_packet = test_begin_packet,
        .end_packet = test_end_packet,
};

struct fake_plugin {
        const struct traced_host_api *api;
        struct traced_host *host;
};

static struct fake_host fh;
static struct fake_plugin pl = {.api = &api, .host = (struct traced_host *) &fh};

static void reset(void) {
        memset(&fh, 0, sizeof(fh));
}

TestSuite(plugin_common, .init = reset);

Test(plugin_common, log_formats) {
        plugin_log(&pl, TRACED_LOG_WARNING, "%s %d", "answer", 42);
        cr_expect_eq(fh.level, TRACED_LOG_WARNING);
        cr_expect_str_eq(fh.last, "answer 42");
}

Test(plugin_common, log_cuts_at_1k) {
        char big[1500];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        plugin_log(&pl, TRACED_LOG_INFO, "%s", big);
        cr_expect_eq(strlen(fh.last), 1023);
}

Test(plugin_common, start_failed) {
        plugin_log_start_failed(&pl, "linux.x", 7, -ENOENT);
        cr_expect_eq(fh.level, TRACED_LOG_ERR);
        cr_expect_str_eq(fh.last, "linux.x instance 7 failed to start: No such file or directory");
}

Test(plugin_common, cpu_change) {
        plugin_log_cpu_change(&pl, "linux.perf", 3, 5, CPU_HOTPLUG_STOPPED, 0);
        cr_expect_str_eq(fh.last, "linux.perf instance 3: CPU 5 went offline");
        cr_expect_eq(fh.level, TRACED_LOG_INFO);
        plugin_log_cpu_change(&pl, "linux.perf", 3, 5, CPU_HOTPLUG_BACK, 0);
        cr_expect_str_eq(fh.last, "linux.perf instance 3: CPU 5 is back online, sampled again");
        plugin_log_cpu_change(&pl, "linux.bpf_stack", 4, 1, CPU_HOTPLUG_GAVE_UP, -EBUSY);
        cr_expect_str_eq(
                fh.last,
                "linux.bpf_stack instance 4: CPU 1 is back online but cannot be sampled: Device or resource busy");
        cr_expect_eq(fh.level, TRACED_LOG_WARNING);
        cr_expect_eq(fh.calls, 3);
}

Test(plugin_common, check_host) {
        struct traced_host_api old = api;
        cr_expect_eq(plugin_check_host(&api), 0);
        old.struct_size = offsetof(struct traced_host_api, notify_stopped);
        cr_expect_eq(plugin_check_host(&old), -EPROTO);
        /* A host of ABI 1.1: no begin_packet, which every plugin writes with. */
        old.struct_size = offsetof(struct traced_host_api, begin_packet);
        cr_expect_eq(plugin_check_host(&old), -EPROTO);
        old.struct_size = sizeof(struct traced_host_api) + 8; /* a newer host */
        cr_expect_eq(plugin_check_host(&old), 0);
        old.end_packet = NULL;
        cr_expect_eq(plugin_check_host(&old), -EPROTO);
}

struct inst {
        struct plugin_instance i;
        int payload;
};

Test(plugin_common, instance_list) {
        struct plugin_instance *list = NULL;
        struct inst a = {.i.id = 1, .payload = 10}, b = {.i.id = 2, .payload = 20}, c = {.i.id = 3, .payload = 30};
        cr_expect_null(plugin_instance_find(list, 1));
        cr_expect_null(plugin_instance_take(&list, 1));
        cr_expect_null(plugin_instance_pop(&list));
        plugin_instance_add(&list, &a.i);
        plugin_instance_add(&list, &b.i);
        plugin_instance_add(&list, &c.i);

        struct inst *f = (struct inst *) plugin_instance_find(list, 2);
        cr_assert_eq(f, &b);
        cr_expect_eq(f->payload, 20);
        cr_expect_null(plugin_instance_find(list, 4));

        /* From the middle, then the list holds the other two, newest first. */
        cr_expect_eq(plugin_instance_take(&list, 2), &b.i);
        cr_expect_null(b.i.next);
        cr_expect_null(plugin_instance_take(&list, 2));
        cr_expect_eq(list, &c.i);
        cr_expect_eq(list->next, &a.i);

        cr_expect_eq(plugin_instance_pop(&list), &c.i);
        cr_expect_eq(plugin_instance_take(&list, 1), &a.i);
        cr_expect_null(list);
        cr_expect_null(plugin_instance_pop(&list));
}
