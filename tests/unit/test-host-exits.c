/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Instances lost with their plugin host (core/sessions/host-exits.c) and
 * how the supervisor says a host ended (shared/control.c). */

#include <criterion/criterion.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "core/service.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/producer.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-stats.h"
#include "shared/control.h"

static struct traced_service svc;
static struct session sess;
static struct producer prod;
static struct ds_instance inst;

static void setup(void) {
        svc = (struct traced_service) {};
        cr_assert_eq(sd_event_new(&svc.event), 0);
        sess = (struct session) { .svc = &svc, .id = 7 };
        prod = (struct producer) { .plugin_host = true, .pid = 4321, .name = (char *) "traced.test" };
        inst = (struct ds_instance) { .session = &sess, .name = (char *) "test.plugin" };
}

static void teardown(void) {
        host_exits_free(&svc);
        session_free_ds_errors(&sess);
        svc.event = sd_event_unref(svc.event);
}

TestSuite(host_exits, .init = setup, .fini = teardown, .timeout = 20);

static const Perfetto__Protos__TraceStats__TracedDataSourceError *only_error(void) {
        cr_assert_eq(sess.n_ds_errors, 1, "%zu errors", sess.n_ds_errors);
        const Perfetto__Protos__TraceStats__TracedDataSourceError *e = sess.ds_errors[0];
        cr_assert(e->has_kind);
        cr_assert_eq(e->kind, PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_INSTANCE_LOST);
        cr_assert_str_eq(e->producer_name, "traced.test");
        cr_assert_str_eq(e->data_source_name, "test.plugin");
        cr_assert_null(e->field);
        return e;
}

Test(host_exits, the_connection_closes_before_the_supervisor_says_how) {
        host_exits_instance_lost(&sess, &prod, &inst, true);
        cr_assert_eq(sess.n_ds_errors, 0, "reported before its cause is known");
        /* Another host's end changes nothing. */
        sessions_host_exited(&svc, 999, "other", "exited with status 1", false, "");
        cr_assert_eq(sess.n_ds_errors, 0);
        sessions_host_exited(&svc, 4321, "crashy", "was killed by SIGSEGV", false, "");
        cr_assert_str_eq(only_error()->message,
                         "lost before it started: its plugin host (crashy.so, pid 4321) was killed by SIGSEGV");
        /* Told once: the session's end adds nothing. */
        host_exits_settle_session(&sess);
        cr_assert_eq(sess.n_ds_errors, 1);
}

Test(host_exits, the_supervisor_says_how_before_the_connection_closes) {
        sessions_host_exited(&svc, 4321, "crashy", "exited with status 3", false, "");
        cr_assert_eq(sess.n_ds_errors, 0);
        host_exits_instance_lost(&sess, &prod, &inst, false);
        cr_assert_str_eq(only_error()->message,
                         "lost while it ran: its plugin host (crashy.so, pid 4321) exited with status 3");
}

Test(host_exits, without_the_supervisors_word_the_loss_is_told_all_the_same) {
        host_exits_instance_lost(&sess, &prod, &inst, true);
        /* The wait is over after HOST_EXITS_WAIT_USEC. */
        for (int i = 0; i < 40 && sess.n_ds_errors == 0; i++)
                cr_assert_geq(sd_event_run(svc.event, 100000), 0);
        cr_assert_str_eq(only_error()->message, "lost before it started: its plugin host (pid 4321) closed its "
                                                "connection");
}

Test(host_exits, a_session_that_ends_first_tells_the_loss_in_its_last_stats) {
        host_exits_instance_lost(&sess, &prod, &inst, false);
        host_exits_settle_session(&sess);
        cr_assert_str_eq(only_error()->message, "lost while it ran: its plugin host (pid 4321) closed its connection");
        /* The supervisor's word, late, finds nothing left to tell. */
        sessions_host_exited(&svc, 4321, "crashy", "was killed by SIGSEGV", false, "");
        cr_assert_eq(sess.n_ds_errors, 1);
}

Test(host_exits, a_freed_session_drops_what_waits) {
        host_exits_instance_lost(&sess, &prod, &inst, false);
        sess.freeing = true;
        host_exits_settle_session(&sess);
        sessions_host_exited(&svc, 4321, "crashy", "was killed by SIGSEGV", false, "");
        cr_assert_eq(sess.n_ds_errors, 0);
}

Test(host_exits, nothing_is_lost_while_the_service_stops_nor_with_other_producers) {
        svc.stopping = true;
        host_exits_instance_lost(&sess, &prod, &inst, false);
        host_exits_settle_session(&sess);
        cr_assert_eq(sess.n_ds_errors, 0);
        svc.stopping = false;
        /* An application's producer may come and go as it likes. */
        prod.plugin_host = false;
        host_exits_instance_lost(&sess, &prod, &inst, false);
        host_exits_settle_session(&sess);
        cr_assert_eq(sess.n_ds_errors, 0);
}

Test(host_exits, refused_plugins_are_kept_once_with_their_reason) {
        size_t n;
        cr_assert_null(host_exits_failed_plugins(&svc, &n));
        cr_assert_eq(n, 0);
        sessions_host_exited(&svc, 10, "broken", "refused its plugin: x", true, "the entry point returned no descriptor");
        sessions_host_exited(&svc, 11, "other", "refused its plugin", true, "");
        sessions_host_exited(&svc, 12, "broken", "refused its plugin: y", true, "ABI major 2, the host speaks 1");
        sessions_host_exited(&svc, 13, "good", "was killed by SIGSEGV", false, "");
        const struct host_failed_plugin *f = host_exits_failed_plugins(&svc, &n);
        cr_assert_eq(n, 2);
        cr_assert_str_eq(f[0].plugin, "broken");
        cr_assert_str_eq(f[0].reason, "ABI major 2, the host speaks 1");
        cr_assert_str_eq(f[1].plugin, "other");
        cr_assert_str_eq(f[1].reason, "its host refused it (see traced's log)");
}

Test(control_exit, each_end_is_described) {
        char buf[400];
        struct control_exit how = { .code = CLD_KILLED, .status = SIGSEGV };
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)), "was killed by SIGSEGV");
        how = (struct control_exit) { .code = CLD_DUMPED, .status = SIGABRT };
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)), "was killed by SIGABRT (core dumped)");
        how = (struct control_exit) { .code = CLD_EXITED, .status = 3 };
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)), "exited with status 3");
        /* The watchdog's SIGKILL is the watchdog's. */
        how = (struct control_exit) { .code = CLD_KILLED, .status = SIGKILL, .hung_usec = 2500000 };
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)),
                         "was killed by traced's watchdog after 2.5 s without a sign of life");
        how = (struct control_exit) { .code = CLD_EXITED, .status = CONTROL_EXIT_PLUGIN_REFUSED, .refused = true };
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)), "refused its plugin: see the plugin host's log");
        strcpy(how.reason, "no traced_plugin_entry symbol");
        cr_assert_str_eq(control_exit_describe(&how, buf, sizeof(buf)),
                         "refused its plugin: no traced_plugin_entry symbol");
}

Test(control_exit, the_end_crosses_the_channel_whole) {
        int fds[2];
        cr_assert_eq(control_pair(fds), 0);
        struct control_exit how = { .code = CLD_EXITED, .status = 78, .refused = true, .stopping = false };
        strcpy(how.reason, "descriptor too small (4 bytes)");
        cr_assert_eq(control_send_plugin_exited(fds[0], 55, "tiny", &how), 0);
        struct control_msg m;
        int fd = 0;
        cr_assert_eq(control_recv(fds[1], &m, &fd), 1);
        cr_assert_eq(fd, -EBADF);
        cr_assert_eq(m.kind, CONTROL_PLUGIN_EXITED);
        cr_assert_eq(m.pid, 55);
        cr_assert_str_eq(m.name, "tiny");
        cr_assert(m.exit.refused && m.exit.code == CLD_EXITED && m.exit.status == 78);
        cr_assert_str_eq(m.exit.reason, "descriptor too small (4 bytes)");
        close(fds[0]);
        close(fds[1]);
}
