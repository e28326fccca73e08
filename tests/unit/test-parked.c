/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Plugins whose host starts when a session needs it
 * (core/sessions/parked.c), and the control messages that carry them
 * (shared/control.c). */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/service.h"
#include "core/sessions/parked.h"
#include "core/sessions/producer.h"
#include "core/sessions/session-internal.h"
#include "shared/control.h"

#include "perfetto/common/data_source_descriptor.pb-c.h"

static struct traced_service svc;
static char asked[8][64], stopped[8][64];
static unsigned n_asked, n_stopped;
static pid_t stopped_pid;

static int ask(struct traced_service *s, const char *plugin) {
        cr_assert_lt(n_asked, 8);
        snprintf(asked[n_asked++], sizeof(asked[0]), "%s", plugin);
        return 0;
}

static int stop(struct traced_service *s, const char *plugin, pid_t pid) {
        cr_assert_lt(n_stopped, 8);
        snprintf(stopped[n_stopped++], sizeof(stopped[0]), "%s", plugin);
        stopped_pid = pid;
        return 0;
}

static void setup(void) {
        svc = (struct traced_service) { .start_plugin_host = ask, .stop_plugin_host = stop };
        cr_assert_eq(sd_event_new(&svc.event), 0);
        n_asked = n_stopped = 0;
        stopped_pid = 0;
}

static void teardown(void) {
        parked_free(&svc);
        svc.event = sd_event_unref(svc.event);
}

TestSuite(parked, .init = setup, .fini = teardown, .timeout = 20);

#define FTRACE_LIST                                                                                            \
        "linux.ftrace will_notify_on_stop\n"                                                                   \
        "linux.inode_file_map\n"                                                                               \
        "linux.process_stats handles_incremental_state_clear\n"

Test(parked, the_list_becomes_descriptors_as_the_host_would_send_them) {
        cr_assert_eq(parked_set(&svc, "ftrace", FTRACE_LIST, 0), 0);
        size_t n;
        const struct parked_plugin *p = parked_list(&svc, &n);
        cr_assert_eq(n, 1);
        cr_assert_str_eq(p->plugin, "ftrace");
        cr_assert_eq(p->n_data_sources, 3);
        Perfetto__Protos__DataSourceDescriptor *d = perfetto__protos__data_source_descriptor__unpack(
                NULL, p->data_sources[0].descriptor_size, p->data_sources[0].descriptor);
        cr_assert_not_null(d);
        cr_assert_str_eq(d->name, "linux.ftrace");
        cr_assert(d->has_will_notify_on_stop && d->will_notify_on_stop);
        cr_assert(!d->handles_incremental_state_clear);
        perfetto__protos__data_source_descriptor__free_unpacked(d, NULL);
        d = perfetto__protos__data_source_descriptor__unpack(NULL, p->data_sources[2].descriptor_size,
                                                             p->data_sources[2].descriptor);
        cr_assert_not_null(d);
        cr_assert_str_eq(d->name, "linux.process_stats");
        cr_assert(d->handles_incremental_state_clear && !d->will_notify_on_stop);
        perfetto__protos__data_source_descriptor__free_unpacked(d, NULL);
        cr_assert_eq(parked_find(&svc, "linux.inode_file_map"), p);
        cr_assert_null(parked_find(&svc, "linux.perf"));
        cr_assert_null(parked_find(&svc, NULL));
}

Test(parked, a_bad_list_keeps_nothing_and_a_new_one_replaces_the_old) {
        cr_assert_eq(parked_set(&svc, "ftrace", "linux.ftrace will_notify_on_stop\nlinux.bad no_such_flag\n", 0),
                     -EBADMSG);
        size_t n;
        parked_list(&svc, &n);
        cr_assert_eq(n, 0);
        cr_assert_eq(parked_set(&svc, "ftrace", FTRACE_LIST, 0), 0);
        cr_assert_eq(parked_set(&svc, "ftrace", "linux.ftrace\n", 0), 0);
        const struct parked_plugin *p = parked_list(&svc, &n);
        cr_assert_eq(n, 1);
        cr_assert_eq(p->n_data_sources, 1);
        cr_assert_null(parked_find(&svc, "linux.process_stats"));
}

Test(parked, a_host_is_asked_for_once_until_it_is_handed_over_or_refused) {
        cr_assert_eq(parked_set(&svc, "ftrace", FTRACE_LIST, 0), 0);
        cr_assert_eq(parked_set(&svc, "perf", "linux.perf will_notify_on_stop handles_incremental_state_clear\n", 0),
                     0);
        cr_assert_str_eq(parked_request(&svc, "linux.ftrace"), "ftrace");
        cr_assert_str_eq(parked_request(&svc, "linux.process_stats"), "ftrace");
        cr_assert_eq(n_asked, 1, "asked %u times", n_asked);
        cr_assert_null(parked_request(&svc, "linux.sys_stats"));
        /* Handed over: no longer parked, not listed as such. */
        parked_host_adopted(&svc, "ftrace", 1234);
        cr_assert_null(parked_find(&svc, "linux.ftrace"));
        cr_assert_null(parked_request(&svc, "linux.ftrace"));
        cr_assert_eq(n_asked, 1);
        /* Another host's end changes nothing; its own parks it again. */
        parked_host_exited(&svc, "ftrace", 999);
        cr_assert_null(parked_find(&svc, "linux.ftrace"));
        parked_host_exited(&svc, "ftrace", 1234);
        cr_assert_str_eq(parked_request(&svc, "linux.ftrace"), "ftrace");
        cr_assert_eq(n_asked, 2);
        /* The supervisor would not start it (pid 0): asked again next time. */
        parked_host_exited(&svc, "ftrace", 0);
        cr_assert_str_eq(parked_request(&svc, "linux.ftrace"), "ftrace");
        cr_assert_eq(n_asked, 3);
        cr_assert_str_eq(asked[2], "ftrace");
}

/* Runs the loop until n_stopped reaches want or timeout_ms passed. */
static void run_until_stopped(unsigned want, unsigned timeout_ms) {
        for (unsigned waited = 0; n_stopped < want && waited < timeout_ms; waited += 10)
                cr_assert_geq(sd_event_run(svc.event, 10000), 0);
}

Test(parked, an_idle_host_is_stopped_a_busy_one_is_not_and_a_retiring_one_gets_no_instance) {
        cr_assert_eq(parked_set(&svc, "ftrace", FTRACE_LIST, 200000), 0);
        cr_assert_eq(parked_set(&svc, "sysstats", "linux.sys_stats\n", 200000), 0);
        parked_host_adopted(&svc, "ftrace", 1234);
        parked_host_adopted(&svc, "sysstats", 1235);
        /* sysstats serves a session that runs. */
        struct producer prod = { .plugin_host = true, .pid = 1235 };
        struct session sess = { .svc = &svc, .state = SESSION_STARTED };
        struct ds_instance inst = { .session = &sess, .producer = &prod, .state = DS_STARTED };
        sess.instances = &inst;
        svc.sessions = &sess;
        run_until_stopped(1, 5000);
        cr_assert_eq(n_stopped, 1);
        cr_assert_str_eq(stopped[0], "ftrace");
        cr_assert_eq(stopped_pid, 1234);
        cr_assert(parked_host_retiring(&svc, 1234));
        cr_assert(!parked_host_retiring(&svc, 1235));
        /* Retiring: a session that names its data sources asks for a new
         * host. */
        cr_assert_str_eq(parked_request(&svc, "linux.ftrace"), "ftrace");
        cr_assert_eq(n_asked, 1);
        /* Its end parks it, the request stands; the next host is adopted. */
        parked_host_exited(&svc, "ftrace", 1234);
        cr_assert(!parked_host_retiring(&svc, 1234));
        cr_assert_str_eq(parked_request(&svc, "linux.ftrace"), "ftrace");
        cr_assert_eq(n_asked, 1);
        parked_host_adopted(&svc, "ftrace", 1240);
        cr_assert_null(parked_find(&svc, "linux.ftrace"));
        /* The busy host is stopped once its session ended (and the new,
         * idle, ftrace host too). */
        sess.state = SESSION_DISABLED;
        run_until_stopped(3, 5000);
        cr_assert_eq(n_stopped, 3);
        cr_assert(strcmp(stopped[1], "sysstats") == 0 || strcmp(stopped[2], "sysstats") == 0);
        cr_assert(parked_host_retiring(&svc, 1235) && parked_host_retiring(&svc, 1240));
        svc.sessions = NULL;
}

Test(parked, control_messages_carry_the_list_and_the_requests) {
        int fds[2];
        cr_assert_eq(control_pair(fds), 0);
        cr_assert_eq(control_send_plugin_parked(fds[0], "ftrace", FTRACE_LIST, 60000000), 0);
        cr_assert_eq(control_send_start_plugin(fds[1], "ftrace"), 0);
        cr_assert_eq(control_send_stop_plugin(fds[1], "ftrace", 77), 0);
        cr_assert_eq(control_send_stop_plugin(fds[1], "ftrace", 0), -EINVAL);
        cr_assert_eq(control_send_start_plugin(fds[1], ""), -EINVAL);
        struct control_msg m;
        int fd;
        cr_assert_eq(control_recv(fds[1], &m, &fd), 1);
        cr_assert_eq(m.kind, CONTROL_PLUGIN_PARKED);
        cr_assert_str_eq(m.name, "ftrace");
        cr_assert_str_eq(m.path, FTRACE_LIST);
        cr_assert_eq(m.idle_usec, 60000000);
        cr_assert_eq(control_recv(fds[0], &m, &fd), 1);
        cr_assert_eq(m.kind, CONTROL_START_PLUGIN);
        cr_assert_str_eq(m.name, "ftrace");
        cr_assert_eq(control_recv(fds[0], &m, &fd), 1);
        cr_assert_eq(m.kind, CONTROL_STOP_PLUGIN);
        cr_assert_eq(m.pid, 77);
        close(fds[0]);
        close(fds[1]);
}
