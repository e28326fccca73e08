/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A relayed producer's TCP link cut in the middle of a CommitData frame
 * and restored: the session keeps what arrived whole, the packet torn by
 * the cut is counted as lost (not written half), the producer connects
 * again into the running session and its data source starts there anew,
 * and traced serves on. The link is a proxy in this process between the
 * example producer (libtraced-client, emulating shared memory over TCP,
 * as behind upstream traced_relay) and traced's TCP producer socket; it
 * parses the IPC frames going to traced and cuts the second large one
 * half-way. */

#include <arpa/inet.h>
#include <criterion/criterion.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <spawn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "test-consumer.h"
#include "traced-instance.h"

#include "perfetto/common/trace_stats.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

extern char **environ;

#define PACKETS 100u
#define PAYLOAD 5000u          /* each packet spans five 1 KiB chunks */
#define BIG_FRAME (32u * 1024u) /* a CommitData that carries chunks */

static struct traced_instance inst;
static sd_event *ev;
static unsigned traced_port;

struct proxy {
        int listen_fd;
        unsigned port;
        atomic_bool stop;
        atomic_uint connections;
        atomic_bool cut;
        bool cut_first;  /* cut the first connection half-way */
        bool slow;       /* about 16 MB/s towards traced */
        pthread_t thread;
};

static int connect_traced(void) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_port = htons((uint16_t) traced_port),
                                  .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd >= 0 && connect(fd, (struct sockaddr *) &sa, sizeof(sa)) < 0) {
                close(fd);
                return -1;
        }
        return fd;
}

static bool send_all(int fd, const uint8_t *b, size_t n) {
        while (n > 0) {
                ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
                if (k <= 0)
                        return false;
                b += k;
                n -= (size_t) k;
        }
        return true;
}

/* Follows the frames going to traced: a 4-byte little-endian length,
 * then that many bytes. */
struct frame_state {
        uint8_t hdr[4];
        size_t hdr_have;
        size_t left;  /* bytes of the current frame still to come */
        bool big;     /* the current frame is a large one */
        unsigned bigs;
};

/* Forwards one connection. With cut set, forwards the stream to traced
 * up to the middle of its second large frame and then closes both ends.
 * Returns when either side closes or the proxy stops. */
static void forward(struct proxy *px, int down, bool cut) {
        int up = connect_traced();
        struct frame_state fs = {};
        uint8_t buf[16384];

        if (up < 0) {
                close(down);
                return;
        }
        while (!atomic_load(&px->stop)) {
                struct pollfd p[2] = { { .fd = down, .events = POLLIN }, { .fd = up, .events = POLLIN } };
                if (poll(p, 2, 100) <= 0)
                        continue;
                if (p[1].revents) {
                        ssize_t n = recv(up, buf, sizeof(buf), 0);
                        if (n <= 0 || !send_all(down, buf, (size_t) n))
                                break;
                }
                if (!p[0].revents)
                        continue;
                ssize_t n = recv(down, buf, sizeof(buf), 0);
                if (n <= 0)
                        break;
                size_t pass = (size_t) n;
                bool cut_now = false;
                if (cut) {
                        /* Walk the bytes; stop at half of the second
                         * large frame. */
                        for (size_t i = 0; i < (size_t) n; i++) {
                                if (fs.left == 0) {
                                        fs.hdr[fs.hdr_have++] = buf[i];
                                        if (fs.hdr_have == 4) {
                                                fs.left = (size_t) fs.hdr[0] | (size_t) fs.hdr[1] << 8 |
                                                          (size_t) fs.hdr[2] << 16 | (size_t) fs.hdr[3] << 24;
                                                fs.hdr_have = 0;
                                                fs.big = fs.left >= BIG_FRAME;
                                                if (fs.big)
                                                        fs.bigs++;
                                        }
                                        continue;
                                }
                                if (fs.big && fs.bigs == 2 && fs.left <= BIG_FRAME / 2) {
                                        pass = i;
                                        cut_now = true;
                                        break;
                                }
                                fs.left--;
                        }
                }
                if (!send_all(up, buf, pass))
                        break;
                if (px->slow)
                        (void) usleep(1000);
                if (cut_now) {
                        atomic_store(&px->cut, true);
                        break;
                }
        }
        close(up);
        close(down);
}

static void *proxy_main(void *arg) {
        struct proxy *px = arg;
        while (!atomic_load(&px->stop)) {
                struct pollfd p = { .fd = px->listen_fd, .events = POLLIN };
                if (poll(&p, 1, 100) <= 0)
                        continue;
                int down = accept4(px->listen_fd, NULL, NULL, SOCK_CLOEXEC);
                if (down < 0)
                        continue;
                unsigned k = atomic_fetch_add(&px->connections, 1);
                forward(px, down, k == 0 && px->cut_first);
        }
        return NULL;
}

static void proxy_start(struct proxy *px, bool cut_first, bool slow) {
        struct sockaddr_in sa = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
        socklen_t l = sizeof(sa);
        memset(px, 0, sizeof(*px));
        px->cut_first = cut_first;
        px->slow = slow;
        px->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        cr_assert_geq(px->listen_fd, 0);
        cr_assert_eq(bind(px->listen_fd, (struct sockaddr *) &sa, sizeof(sa)), 0);
        cr_assert_eq(listen(px->listen_fd, 4), 0);
        cr_assert_eq(getsockname(px->listen_fd, (struct sockaddr *) &sa, &l), 0);
        px->port = ntohs(sa.sin_port);
        cr_assert_eq(pthread_create(&px->thread, NULL, proxy_main, px), 0);
}

static void proxy_stop(struct proxy *px) {
        atomic_store(&px->stop, true);
        pthread_join(px->thread, NULL);
        close(px->listen_fd);
}

static void setup(void) {
        cr_assert_eq(sd_event_new(&ev), 0);
        int r = traced_instance_start_tcp(&inst, &traced_port);
        cr_assert_eq(r, 0, "could not start traced with a TCP producer socket: %s", strerror(-r));
}

static void teardown(void) {
        cr_expect(traced_test_teardown(&inst, &ev), "traced did not exit cleanly");
}

struct sequence {
        uint64_t id;
        unsigned long next; /* packets 0..next-1 arrived in order */
        bool bad;
};

struct outcome {
        struct sequence seqs[8];
        unsigned n_seqs;
        uint64_t readaheads_failed, abi_violations;
};

static void decode(const uint8_t *buf, size_t len, struct outcome *o) {
        static struct pbr_field pkts[20000];
        char expected[PAYLOAD];
        int n = pbr_split_trace(buf, len, pkts, ELEMENTSOF(pkts));
        cr_assert_geq(n, 0, "the trace does not parse");
        memset(o, 0, sizeof(*o));
        for (int i = 0; i < n; i++) {
                struct pbr_field t, str, seq, sid, f;
                if (pbr_get(pkts[i].data, pkts[i].len, 35, false, &f)) {
                        Perfetto__Protos__TraceStats *st = perfetto__protos__trace_stats__unpack(NULL, f.len, f.data);
                        cr_assert_not_null(st, "TraceStats does not decode");
                        for (size_t b = 0; b < st->n_buffer_stats; b++) {
                                o->readaheads_failed += st->buffer_stats[b]->readaheads_failed;
                                o->abi_violations += st->buffer_stats[b]->abi_violations;
                        }
                        perfetto__protos__trace_stats__free_unpacked(st, NULL);
                }
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(pkts[i].data, pkts[i].len, 10, false, &sid), "no trusted sequence id");
                unsigned k = 0;
                while (k < o->n_seqs && o->seqs[k].id != sid.varint)
                        k++;
                if (k == o->n_seqs) {
                        cr_assert_lt(o->n_seqs, ELEMENTSOF(o->seqs));
                        o->seqs[o->n_seqs++].id = sid.varint;
                }
                struct sequence *s = &o->seqs[k];
                uint64_t v = pbr_get(t.data, t.len, 2, false, &seq) ? seq.varint : 0;
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                for (size_t b = 0; b < PAYLOAD; b++)
                        expected[b] = (char) ('a' + (v + b) % 26);
                if (v != s->next || str.len != PAYLOAD || memcmp(str.data, expected, PAYLOAD) != 0)
                        s->bad = true;
                s->next = v + 1;
        }
}

Test(link, cut_mid_frame_and_restored, .init = setup, .fini = teardown, .timeout = 180) {
        struct proxy px;
        proxy_start(&px, true, false);
        char address[64], packets[16], size[16];
        snprintf(address, sizeof(address), "127.0.0.1:%u", px.port);
        snprintf(packets, sizeof(packets), "%u", PACKETS);
        snprintf(size, sizeof(size), "%u", PAYLOAD);
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", address, (char *) "--packets", packets,
                         (char *) "--size", size, (char *) "--page-kb", (char *) "4", (char *) "--reconnect", NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        spin_ms(ev, 500);

        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(8 * 1024, "example.data", 5000);
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 60000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 30000), 0);
        cr_assert(atomic_load(&px.cut), "the link was never cut (no second large CommitData)");
        unsigned conns = atomic_load(&px.connections);

        struct outcome o;
        decode(cons.data, cons.len, &o);
        cr_log_info("connections %u, sequences %u, readaheads_failed %llu", conns, o.n_seqs,
                    (unsigned long long) o.readaheads_failed);
        cr_assert_geq(conns, 2u, "the producer did not connect again after the cut");
        cr_assert_eq(o.n_seqs, 2u, "expected the sequence cut short and the one after the reconnection, got %u",
                     o.n_seqs);
        const struct sequence *before = &o.seqs[0], *after = &o.seqs[1];
        /* What arrived whole before the cut is kept, in order; the rest
         * of that sequence is gone. One 64 KiB CommitData holds twelve
         * whole packets. */
        cr_assert_not(before->bad, "the sequence cut short is out of order or corrupted");
        cr_assert(before->next >= 12 && before->next < PACKETS, "%lu packets before the cut", before->next);
        /* The packet whose first chunks came before the cut and whose
         * last never came is counted, not written half. */
        cr_assert_geq(o.readaheads_failed, 1, "the packet torn by the cut was dropped without being counted");
        cr_assert_eq(o.abi_violations, 0);
        /* The data source started anew in the running session. */
        cr_assert_not(after->bad, "the sequence after the reconnection is out of order or corrupted");
        cr_assert_eq(after->next, PACKETS, "%lu of %u packets after the reconnection", after->next, PACKETS);
        test_consumer_free(&cons);

        cr_assert_eq(kill(pid, SIGTERM), 0);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        proxy_stop(&px);
        cr_assert(traced_instance_alive(&inst), "traced did not survive the cut");
}

/* A link slower than the producer: it writes 16 MB at once, twice what
 * one connection may queue, with the stall policy. The library keeps
 * chunks in its SMB until the socket takes more (without that the queue
 * would overflow and the service cut the producer off), the writer
 * stalls, and every packet arrives over the one connection. */
Test(link, slow_link_paces_the_producer, .init = setup, .fini = teardown, .timeout = 180) {
        struct proxy px;
        proxy_start(&px, false, true);
        char address[64];
        snprintf(address, sizeof(address), "127.0.0.1:%u", px.port);
        char *argv[] = { (char *) EXAMPLE_PRODUCER, (char *) "--socket", address, (char *) "--packets",
                         (char *) "3200", (char *) "--size", (char *) "5000", (char *) "--once", NULL };
        pid_t pid;
        cr_assert_eq(posix_spawn(&pid, EXAMPLE_PRODUCER, NULL, NULL, argv, environ), 0);
        spin_ms(ev, 500);
        struct test_consumer cons;
        cr_assert_eq(test_consumer_connect(&cons, ev, inst.consumer_path), 0);
        Perfetto__Protos__TraceConfig *cfg = test_config_new(48 * 1024, "example.data", 10000);
        cfg->data_sources[0]->config->has_buffer_exhausted_policy = true;
        cfg->data_sources[0]->config->buffer_exhausted_policy =
                PERFETTO__PROTOS__DATA_SOURCE_CONFIG__BUFFER_EXHAUSTED_POLICY__BUFFER_EXHAUSTED_STALL_THEN_DROP;
        cr_assert_eq(test_consumer_enable(&cons, cfg, -EBADF), 0);
        test_config_free(cfg);
        cr_assert(test_consumer_wait_disabled(&cons, 60000), "the session did not end");
        cr_assert_eq(test_consumer_read(&cons, 120000), 0);
        struct outcome o;
        decode(cons.data, cons.len, &o);
        test_consumer_free(&cons);
        int st;
        cr_assert_eq(waitpid(pid, &st, 0), pid);
        proxy_stop(&px);
        cr_assert_eq(atomic_load(&px.connections), 1u, "the producer lost its connection");
        cr_assert_eq(o.n_seqs, 1u);
        cr_assert_not(o.seqs[0].bad, "packets out of order or corrupted");
        cr_assert_eq(o.seqs[0].next, 3200u, "%lu of 3200 packets arrived", o.seqs[0].next);
        cr_assert(WIFEXITED(st) && WEXITSTATUS(st) == 0, "example-producer failed");
}
