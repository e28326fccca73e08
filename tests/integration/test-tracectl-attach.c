/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* tracectl attach against the real traced: progress on a terminal (a
 * pseudo-terminal here), SIGTERM detaches the session again, SIGINT
 * stops it. */

#include <criterion/criterion.h>
#include <fcntl.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert(traced_test_setup(&inst, &ev), "could not start traced");
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(tracectl_attach, .init = setup, .fini = teardown, .timeout = 60);

/* A session running in the service, detached under key; writing into
 * file when not NULL. */
static void detached_session(const char *key, const char *file) {
        struct test_consumer c;
        cr_assert_eq(test_consumer_connect(&c, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(1024, "test.nobody", 60000);
        int fd = -1;
        if (file) {
                fd = open(file, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                cr_assert_geq(fd, 0);
                cfg->has_write_into_file = cfg->write_into_file = true;
        }
        cr_assert_eq(test_consumer_enable(&c, cfg, fd), 0);
        if (fd >= 0)
                close(fd);
        test_config_free(cfg);
        Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
        dr.key = (char *) key;
        cr_assert_eq(test_consumer_call(&c, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, NULL, 5000),
                     0);
        test_consumer_free(&c);
}

struct run {
        pid_t pid;
        int master; /* the terminal's other end */
        char out[8192];
        size_t len;
};

/* tracectl --socket ... attach KEY on a new pseudo-terminal. */
static void start_attach(struct run *r, const char *key) {
        *r = (struct run) {};
        r->pid = forkpty(&r->master, NULL, NULL, NULL);
        cr_assert_geq(r->pid, 0);
        if (r->pid == 0) {
                execl(TRACECTL_BINARY, TRACECTL_BINARY, "--socket", inst.consumer_path, "attach", key, (char *) NULL);
                _exit(127);
        }
}

/* Reads the terminal (serving the loop) until text shows, or the child
 * exits, or timeout_ms pass. */
static bool read_until(struct run *r, const char *text, unsigned timeout_ms) {
        for (unsigned waited = 0; waited < timeout_ms; waited += 20) {
                struct pollfd p = { .fd = r->master, .events = POLLIN };
                while (poll(&p, 1, 0) > 0 && (p.revents & POLLIN) && r->len + 1 < sizeof(r->out)) {
                        ssize_t n = read(r->master, r->out + r->len, sizeof(r->out) - 1 - r->len);
                        if (n <= 0)
                                break;
                        r->len += (size_t) n;
                        r->out[r->len] = 0;
                }
                if (text && strstr(r->out, text))
                        return true;
                spin_ms(ev, 20);
        }
        return false;
}

static int finish(struct run *r) {
        int st = 0;
        for (unsigned waited = 0; waited < 10000; waited += 20) {
                read_until(r, NULL, 20);
                if (waitpid(r->pid, &st, WNOHANG) == r->pid) {
                        read_until(r, NULL, 20);
                        close(r->master);
                        return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
                }
        }
        kill(r->pid, SIGKILL);
        waitpid(r->pid, NULL, 0);
        close(r->master);
        return -1;
}

Test(tracectl_attach, progress_sigterm_detaches_sigint_stops) {
        detached_session("k2", NULL);
        struct run r;
        start_attach(&r, "k2");
        cr_assert(read_until(&r, "Attached to session \"k2\"", 5000), "%s", r.out);
        /* The progress line, as record shows it. */
        cr_assert(read_until(&r, "KiB  buffer", 5000), "no progress on the terminal: %s", r.out);
        kill(r.pid, SIGTERM);
        cr_assert_eq(finish(&r), 0, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "Session \"k2\" detached again"), "%s", r.out);

        /* Still there, detached: attach again, and Ctrl-C stops it. */
        start_attach(&r, "k2");
        cr_assert(read_until(&r, "Attached to session \"k2\"", 5000), "the session was not detached again: %s", r.out);
        kill(r.pid, SIGINT);
        cr_assert_eq(finish(&r), 0, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "Session \"k2\" ended."), "%s", r.out);

        /* Gone. */
        start_attach(&r, "k2");
        cr_assert_eq(finish(&r), 5, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "no detached session \"k2\""), "%s", r.out);
}

/* tracectl ARGS (no terminal): exit code and stdout. */
static int tracectl(const char *args, char **ret_out) {
        char *cmd, *out = NULL;
        size_t size = 0;
        cr_assert_gt(asprintf(&cmd, "%s --socket %s %s", TRACECTL_BINARY, inst.consumer_path, args), 0);
        FILE *p = popen(cmd, "re");
        cr_assert_not_null(p);
        FILE *m = open_memstream(&out, &size);
        char buf[4096];
        size_t n;
        while ((n = fread(buf, 1, sizeof(buf), p)) > 0)
                fwrite(buf, 1, n, m);
        fclose(m);
        int st = pclose(p);
        free(cmd);
        *ret_out = out;
        return WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

/* query shows a session's key and file; stop works while another
 * terminal is attached to it, and that one is told. */
Test(tracectl_attach, stop_while_attached_and_query_shows_key_and_file) {
        char file[512], want[600], *out;
        snprintf(file, sizeof(file), "%s/k3.pftrace", inst.dir);
        detached_session("k3", file);
        cr_assert_eq(tracectl("query", &out), 0);
        snprintf(want, sizeof(want), "key \"k3\"  file %s\n", file);
        cr_assert_not_null(strstr(out, want), "query does not show \"%s\":\n%s", want, out);
        free(out);

        struct run r;
        start_attach(&r, "k3");
        cr_assert(read_until(&r, "Attached to session \"k3\"", 5000), "%s", r.out);
        /* Attached: still listed under its key. */
        cr_assert_eq(tracectl("query --json", &out), 0);
        cr_assert_not_null(strstr(out, "\"detach_key\":\"k3\""), "%s", out);
        free(out);
        cr_assert_eq(tracectl("stop k3", &out), 0, "stop while attached: %s", out);
        cr_assert_not_null(strstr(out, "Session \"k3\" ended."), "%s", out);
        free(out);
        cr_assert_eq(finish(&r), 0, "%s", r.out);
        cr_assert_not_null(strstr(r.out, "Session \"k3\" was attached from elsewhere"), "%s", r.out);
}
