/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Attacks on the real traced (issue #19), each run while a legitimate
 * producer records into a legitimate consumer's session: the legitimate
 * client must be answered while the attack is under way and lose nothing,
 * and the attacker must get a clear error. Attacks that any local user can
 * make run in a forked child that has become nobody. */

#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "raw-producer.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

#define NOBODY 65534
/* Generous: tells "answered" from "frozen" on a loaded machine. */
#define ANSWER_TIMEOUT_MS 15000u
#define LEGIT_PACKETS 200u
#define LEGIT_PAYLOAD 100u

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(sd_event_new(&ev), 0);
        int r = traced_instance_start(&inst, true);
        cr_assert_eq(r, 0, "could not start traced: %s", strerror(-r));
        /* Let an unprivileged attacker reach both sockets. */
        cr_assert_eq(chmod(inst.dir, 0755), 0);
        (void) chmod(inst.producer_path, 0666);
        (void) chmod(inst.consumer_path, 0666);
}

static void teardown(void) {
        int st = traced_instance_stop(&inst);
        if (st != 0)
                traced_instance_dump_log(&inst);
        cr_expect_eq(st, 0, "traced exited with status %d", st);
        ev = sd_event_unref(ev);
}

TestSuite(security, .init = setup, .fini = teardown, .timeout = 240);

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* ---- the legitimate client ------------------------------------------- */

struct legit {
        struct raw_producer prod;
        struct test_consumer cons;
};

static bool registered(struct raw_producer *p) {
        return p->registered;
}

static bool started(struct raw_producer *p) {
        return p->n_start > 0;
}

/* A producer with legit.data and a session recording it for duration_ms. */
static void legit_start(struct legit *l, uint32_t duration_ms) {
        cr_assert_eq(raw_producer_connect(&l->prod, ev, inst.producer_path, "legit-producer", "legit.data", 0, 0), 0);
        cr_assert(raw_producer_spin_until(&l->prod, registered, 5000), "legit.data not registered");
        l->prod.packets_at_start = LEGIT_PACKETS;
        l->prod.payload_size = LEGIT_PAYLOAD;
        cr_assert_eq(test_consumer_connect(&l->cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(4096, "legit.data", duration_ms);
        cr_assert_eq(test_consumer_enable(&l->cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(raw_producer_spin_until(&l->prod, started, 5000), "legit.data never started");
}

/* QueryServiceState on a fresh connection; returns the reply (or NULL
 * when none came in time) and how long it took. */
static Perfetto__Protos__QueryServiceStateResponse *legit_query(const char *what, double *ret_ms) {
        struct test_consumer q;
        ProtobufCMessage *reply = NULL;
        Perfetto__Protos__QueryServiceStateRequest req = PERFETTO__PROTOS__QUERY_SERVICE_STATE_REQUEST__INIT;

        uint64_t t0 = now_usec();
        int r = test_consumer_connect(&q, ev, inst.consumer_path);
        if (r >= 0)
                r = test_consumer_call(&q, "QueryServiceState", &req.base,
                                       &perfetto__protos__query_service_state_response__descriptor, &reply,
                                       ANSWER_TIMEOUT_MS);
        double ms = (double) (now_usec() - t0) / 1000.0;
        fprintf(stderr, "security: %s: QueryServiceState %s after %.1f ms\n", what, r == 0 ? "answered" : "failed",
                ms);
        if (ret_ms)
                *ret_ms = ms;
        test_consumer_free(&q);
        return r == 0 ? (void *) reply : NULL;
}

static void legit_query_ok(const char *what) {
        Perfetto__Protos__QueryServiceStateResponse *r = legit_query(what, NULL);
        cr_assert_not_null(r, "%s: QueryServiceState was not answered", what);
        cr_assert_not_null(r->service_state);
        protobuf_c_message_free_unpacked(&r->base, NULL);
}

/* Waits for the session's end and checks every packet arrived. */
static void legit_finish(struct legit *l, const char *what) {
        cr_assert(test_consumer_wait_disabled(&l->cons, 60000), "%s: the legitimate session never ended", what);
        cr_assert_str_eq(l->cons.error, "", "%s: legitimate session failed", what);
        cr_assert_eq(test_consumer_read(&l->cons, 30000), 0, "%s: ReadBuffers failed", what);
        struct pbr_field pk[4096];
        int n = pbr_split_trace(l->cons.data, l->cons.len, pk, ELEMENTSOF(pk));
        cr_assert_geq(n, 0);
        unsigned got = 0;
        for (int i = 0; i < n; i++)
                if (pbr_count(pk[i].data, pk[i].len, 900) > 0)
                        got++;
        cr_assert_eq(got, LEGIT_PACKETS, "%s: the legitimate trace has %u of %u packets", what, got, LEGIT_PACKETS);
        test_consumer_free(&l->cons);
        raw_producer_free(&l->prod);
}

/* ---- the attacker ---------------------------------------------------- */

struct attacker {
        pid_t pid;
        int ready_fd; /* readable once the attack is sent */
};

typedef int (*attack_fn)(sd_event *e, int ready_fd, void *userdata);

/* Runs fn in a child (as nobody when unprivileged); fn writes a byte to
 * ready_fd once the attack is under way, and returns its exit status: 0
 * when the service answered it with the clear error expected. */
static void attacker_start(struct attacker *a, bool unprivileged, attack_fn fn, void *userdata) {
        int p[2];
        cr_assert_eq(pipe2(p, O_CLOEXEC), 0);
        fflush(NULL);
        pid_t pid = fork();
        cr_assert_geq(pid, 0);
        if (pid == 0) {
                close(p[0]);
                if (unprivileged &&
                    (setgroups(0, NULL) < 0 || setresgid(NOBODY, NOBODY, NOBODY) < 0 ||
                     setresuid(NOBODY, NOBODY, NOBODY) < 0))
                        _exit(90);
                sd_event *e = NULL;
                if (sd_event_new(&e) < 0)
                        _exit(91);
                int st = fn(e, p[1], userdata);
                sd_event_unref(e);
                _exit(st);
        }
        close(p[1]);
        a->pid = pid;
        a->ready_fd = p[0];
}

/* Waits until the attack is under way (or the child ended). */
static void attacker_wait_ready(struct attacker *a) {
        struct pollfd pfd = { .fd = a->ready_fd, .events = POLLIN };
        cr_assert_eq(poll(&pfd, 1, 60000), 1, "the attacker never got going");
}

static int attacker_finish(struct attacker *a, unsigned timeout_ms) {
        int st = -1;
        uint64_t deadline = now_usec() + (uint64_t) timeout_ms * 1000u;
        for (;;) {
                pid_t r = waitpid(a->pid, &st, WNOHANG);
                if (r == a->pid)
                        break;
                if (now_usec() >= deadline) {
                        kill(a->pid, SIGKILL);
                        waitpid(a->pid, &st, 0);
                        st = -1;
                        break;
                }
                spin_ms(ev, 20);
        }
        close(a->ready_fd);
        return st >= 0 && WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void signal_ready(int fd) {
        (void) write(fd, "x", 1);
}

/* ---- 1: regular expressions -------------------------------------------- */

static int attack_regex(sd_event *e, int ready_fd, void *userdata) {
        struct test_consumer c;
        if (test_consumer_connect(&c, e, inst.consumer_path) < 0)
                return 10;
        Perfetto__Protos__TraceConfig *cfg = test_config_new(64, "legit.data", 1000);
        char *filters[1] = { (char *) "((a{1,60}){1,60}){1,60}" };
        Perfetto__Protos__TraceConfig__DataSource *entries[20];
        Perfetto__Protos__TraceConfig__DataSource **old = cfg->data_sources;
        for (size_t i = 0; i < ELEMENTSOF(entries); i++) {
                entries[i] = old[0];
                entries[i]->n_producer_name_regex_filter = 1;
                entries[i]->producer_name_regex_filter = filters;
        }
        cfg->data_sources = entries;
        cfg->n_data_sources = ELEMENTSOF(entries);
        int r = test_consumer_enable(&c, cfg, -EBADF);
        cfg->data_sources = old;
        cfg->n_data_sources = 1;
        old[0]->n_producer_name_regex_filter = 0;
        old[0]->producer_name_regex_filter = NULL;
        test_config_free(cfg);
        if (r < 0)
                return 11;
        spin_ms(e, 100);
        signal_ready(ready_fd);
        if (!test_consumer_wait_disabled(&c, 600000))
                return 12;
        fprintf(stderr, "security: regex attacker was told: %s\n", c.error);
        return strstr(c.error, "producer_name_regex_filter") && strstr(c.error, "expands") ? 0 : 13;
}

Test(security, regex_filters_cannot_freeze_the_core) {
        struct legit l;
        struct attacker a;
        legit_start(&l, 3000);
        attacker_start(&a, true, attack_regex, NULL);
        attacker_wait_ready(&a);
        legit_query_ok("regex attack");
        cr_assert_eq(attacker_finish(&a, ANSWER_TIMEOUT_MS), 0, "the attacker did not get a clear refusal");
        legit_finish(&l, "regex attack");
}
