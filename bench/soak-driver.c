/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The soak driver behind bench/soak.sh: N producers (processes, each a
 * raw producer writing sequence-numbered packets whose payload is a
 * function of the sequence number) across S sessions (ring and discard
 * buffers, the last one write_into_file), producers SIGKILLed and
 * restarted at random, the first session's consumer detaching and
 * attaching again. Every producer reports the count of packets whose
 * CommitData the service answered; at the end each session's trace is
 * checked against those counts: written, read, reported lost (chunks, from
 * TraceStats) and unaccounted (committed but neither read nor counted;
 * must be 0). The service core's RSS and fds are sampled on the way.
 *
 *   soak-driver --producer-socket P --consumer-socket C --pid TRACED_PID
 *               [--seconds 600] [--producers 64] [--sessions 8] [--dir D]
 */

#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
#include <dirent.h>

#include "basic/macro.h"
#include "basic/pbr.h"
#include "raw-producer.h"
#include "test-consumer.h"

#include "perfetto/common/commit_data_request.pb-c.h"
#include "perfetto/common/trace_stats.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"
#include "perfetto/ipc/producer_port.pb-c.h"

#define MAX_INC 8192
#define CTR_BITS 20u
#define CTR_MASK ((1u << CTR_BITS) - 1)

struct inc {
        int session;
        pid_t pid;
        int fd;           /* reports from the producer */
        uint32_t committed; /* packets whose CommitData was answered */
        uint8_t *seen;    /* bitmap of counters read */
        size_t seen_cap;
        uint64_t read, dup;
};

struct sess {
        struct test_consumer c;
        bool file;
        int out_fd;
        uint64_t lost_chunks, bad;
        bool attached;
};

static struct inc incs[MAX_INC];
static unsigned n_incs;
static struct sess sessions[16];
static unsigned n_sessions = 8, n_producers = 64, seconds = 600;
static const char *producer_path, *consumer_path, *self_path, *dir = "/tmp";
static pid_t traced_pid;
static sd_event *ev;

static uint64_t now_ms(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000u + (uint64_t) ts.tv_nsec / 1000000u;
}

/* ---- the producer process ----------------------------------------------- */

static bool replied;
static void on_reply(ipc_client *c, int error, const ProtobufCMessage *reply, bool has_more, int fd, void *ud) {
        replied = true;
}
static bool got_reply(struct raw_producer *p) {
        return replied || p->connection_lost;
}
static bool started(struct raw_producer *p) {
        return p->n_start > 0 || p->connection_lost;
}

static int producer_main(int session, unsigned inc_id, int report_fd) {
        struct raw_producer p;
        char name[64], ds[32];
        snprintf(name, sizeof(name), "soak-%d-%u", session, inc_id);
        snprintf(ds, sizeof(ds), "soak.%d", session);
        if (sd_event_new(&ev) < 0 || raw_producer_connect(&p, ev, producer_path, name, ds, 256 * 1024, 4096) < 0)
                return 2;
        if (!raw_producer_spin_until(&p, started, 60000) || p.connection_lost)
                return 3;
        srand((unsigned) getpid());
        p.next_seq = inc_id << CTR_BITS;
        while (!p.connection_lost && p.n_stop == 0) {
                unsigned n = 5 + (unsigned) rand() % 10;
                for (unsigned i = 0; i < n; i++)
                        if (raw_producer_write_packet(&p, 16 + (size_t) (rand() % 400)) < 0)
                                return 4;
                if (raw_producer_commit(&p, 0) < 0)
                        return 0;
                Perfetto__Protos__CommitDataRequest rq = PERFETTO__PROTOS__COMMIT_DATA_REQUEST__INIT;
                replied = false;
                if (ipc_client_invoke(p.client, "CommitData", &rq.base,
                                      &perfetto__protos__commit_data_response__descriptor, -EBADF, on_reply, NULL) < 0 ||
                    !raw_producer_spin_until(&p, got_reply, 30000) || p.connection_lost)
                        return 0;
                uint32_t committed = p.next_seq & CTR_MASK;
                if (write(report_fd, &committed, sizeof(committed)) != sizeof(committed))
                        return 0;
                spin_ms(ev, 50 + (unsigned) (rand() % 100));
        }
        return 0;
}

/* ---- the driver --------------------------------------------------------- */

static void spawn(int session) {
        if (n_incs >= MAX_INC)
                return;
        int pfd[2];
        if (pipe2(pfd, O_CLOEXEC) < 0)
                return;
        unsigned id = n_incs;
        pid_t pid = fork();
        if (pid == 0) {
                char s[16], i[16], f[16];
                snprintf(s, sizeof(s), "%d", session);
                snprintf(i, sizeof(i), "%u", id);
                snprintf(f, sizeof(f), "%d", pfd[1]);
                (void) fcntl(pfd[1], F_SETFD, 0);
                execl(self_path, self_path, "--producer-socket", producer_path, "--as-producer", s, i, f, (char *) NULL);
                _exit(127);
        }
        close(pfd[1]);
        if (pid < 0) {
                close(pfd[0]);
                return;
        }
        (void) fcntl(pfd[0], F_SETFL, O_NONBLOCK);
        incs[id] = (struct inc) { .session = session, .pid = pid, .fd = pfd[0] };
        n_incs++;
}

static void drain_reports(void) {
        for (unsigned i = 0; i < n_incs; i++) {
                uint32_t v;
                while (incs[i].fd >= 0) {
                        ssize_t n = read(incs[i].fd, &v, sizeof(v));
                        if (n == sizeof(v)) {
                                if (v > incs[i].committed)
                                        incs[i].committed = v;
                                continue;
                        }
                        if (n == 0) {
                                close(incs[i].fd);
                                incs[i].fd = -1;
                        }
                        break;
                }
        }
}

static void account_packets(struct sess *s, unsigned idx, const uint8_t *buf, size_t len) {
        static struct pbr_field pkts[400000];
        static char expected[1024];
        int n = pbr_split_trace(buf, len, pkts, ELEMENTSOF(pkts));
        if (n < 0) {
                s->bad++;
                return;
        }
        for (int i = 0; i < n; i++) {
                struct pbr_field f, str, seq;
                if (pbr_get(pkts[i].data, pkts[i].len, 35, false, &f)) {
                        Perfetto__Protos__TraceStats *st = perfetto__protos__trace_stats__unpack(NULL, f.len, f.data);
                        if (st) {
                                uint64_t lost = st->chunks_discarded;
                                for (size_t b = 0; b < st->n_buffer_stats; b++)
                                        lost += st->buffer_stats[b]->chunks_discarded +
                                                st->buffer_stats[b]->chunks_overwritten +
                                                st->buffer_stats[b]->readaheads_failed +
                                                st->buffer_stats[b]->abi_violations;
                                s->lost_chunks = lost; /* cumulative: the last one counts */
                                perfetto__protos__trace_stats__free_unpacked(st, NULL);
                        }
                }
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &f))
                        continue;
                if (!pbr_get(f.data, f.len, 1, false, &str) || !pbr_get(f.data, f.len, 2, false, &seq) ||
                    str.len >= sizeof(expected)) {
                        s->bad++;
                        continue;
                }
                unsigned id = (unsigned) (seq.varint >> CTR_BITS);
                uint32_t ctr = (uint32_t) seq.varint & CTR_MASK;
                if (id >= n_incs || incs[id].session != (int) idx) {
                        s->bad++;
                        continue;
                }
                raw_producer_payload((uint32_t) seq.varint, str.len, expected);
                if (memcmp(str.data, expected, str.len) != 0) {
                        s->bad++;
                        continue;
                }
                struct inc *in = &incs[id];
                if (ctr / 8 >= in->seen_cap) {
                        size_t cap = MAX((size_t) ctr / 8 + 1, in->seen_cap * 2);
                        uint8_t *b = realloc(in->seen, cap);
                        if (!b)
                                abort();
                        memset(b + in->seen_cap, 0, cap - in->seen_cap);
                        in->seen = b;
                        in->seen_cap = cap;
                }
                if (in->seen[ctr / 8] & (1u << (ctr % 8)))
                        in->dup++;
                else
                        in->read++;
                in->seen[ctr / 8] |= (uint8_t) (1u << (ctr % 8));
        }
}

static void read_session(unsigned i) {
        struct sess *s = &sessions[i];
        if (s->file || !s->attached)
                return;
        if (test_consumer_read(&s->c, 60000) < 0) {
                fprintf(stderr, "soak: reading session %u failed\n", i);
                s->bad++;
        }
        account_packets(s, i, s->c.data, s->c.len);
        free(s->c.data);
        s->c.data = NULL;
        s->c.len = s->c.cap = 0;
        s->c.n_packets = 0;
}

static void start_sessions(void) {
        for (unsigned i = 0; i < n_sessions; i++) {
                struct sess *s = &sessions[i];
                char ds[32];
                snprintf(ds, sizeof(ds), "soak.%u", i);
                s->out_fd = -EBADF;
                s->file = i == n_sessions - 1;
                if (test_consumer_connect(&s->c, ev, consumer_path) < 0) {
                        fprintf(stderr, "soak: cannot connect to %s\n", consumer_path);
                        exit(1);
                }
                Perfetto__Protos__TraceConfig *cfg = test_config_new(8 * 1024, ds, 0);
                cfg->buffers[0]->has_fill_policy = true;
                cfg->buffers[0]->fill_policy = i % 2 ? PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD
                                                     : PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER;
                if (s->file) {
                        char path[512];
                        snprintf(path, sizeof(path), "%s/soak-session-%u.pftrace", dir, i);
                        s->out_fd = open(path, O_RDWR | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
                        cfg->has_write_into_file = cfg->write_into_file = true;
                        cfg->has_file_write_period_ms = true;
                        cfg->file_write_period_ms = 500;
                }
                if (test_consumer_enable(&s->c, cfg, s->out_fd) < 0) {
                        fprintf(stderr, "soak: EnableTracing failed\n");
                        exit(1);
                }
                test_config_free(cfg);
                s->attached = true;
        }
}

static void detach_first(void) {
        struct sess *s = &sessions[0];
        Perfetto__Protos__DetachRequest dr = PERFETTO__PROTOS__DETACH_REQUEST__INIT;
        dr.key = (char *) "soak-0";
        read_session(0);
        if (test_consumer_call(&s->c, "Detach", &dr.base, &perfetto__protos__detach_response__descriptor, NULL, 10000) <
            0) {
                fprintf(stderr, "soak: Detach failed\n");
                s->bad++;
                return;
        }
        test_consumer_free(&s->c);
        s->attached = false;
}

static void attach_first(void) {
        struct sess *s = &sessions[0];
        Perfetto__Protos__AttachRequest ar = PERFETTO__PROTOS__ATTACH_REQUEST__INIT;
        ar.key = (char *) "soak-0";
        ProtobufCMessage *reply = NULL;
        if (test_consumer_connect(&s->c, ev, consumer_path) < 0 ||
            test_consumer_call(&s->c, "Attach", &ar.base, &perfetto__protos__attach_response__descriptor, &reply,
                               10000) < 0) {
                fprintf(stderr, "soak: Attach failed\n");
                s->bad++;
                return;
        }
        protobuf_c_message_free_unpacked(reply, NULL);
        s->attached = true;
}

static pid_t core_pid(void) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int) traced_pid, (int) traced_pid);
        FILE *f = fopen(path, "re");
        int pid = -1;
        if (f) {
                if (fscanf(f, "%d", &pid) != 1)
                        pid = -1;
                fclose(f);
        }
        return pid > 0 ? pid : traced_pid;
}

static long rss_kb(pid_t pid) {
        char path[64], line[256];
        long kb = -1;
        snprintf(path, sizeof(path), "/proc/%d/status", (int) pid);
        FILE *f = fopen(path, "re");
        while (f && fgets(line, sizeof(line), f))
                if (sscanf(line, "VmRSS: %ld", &kb) == 1)
                        break;
        if (f)
                fclose(f);
        return kb;
}

static void list_fds(pid_t pid, const char *when) {
        char path[64], target[512], link[600];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return;
        printf("fds %s:", when);
        for (struct dirent *e; (e = readdir(d));) {
                if (e->d_name[0] == '.')
                        continue;
                snprintf(link, sizeof(link), "%s/%s", path, e->d_name);
                ssize_t n = readlink(link, target, sizeof(target) - 1);
                target[n > 0 ? n : 0] = '\0';
                printf(" %s=%s", e->d_name, target);
        }
        printf("\n");
        closedir(d);
}

static int count_fds(pid_t pid) {
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/fd", (int) pid);
        DIR *d = opendir(path);
        if (!d)
                return -1;
        int n = 0;
        for (struct dirent *e; (e = readdir(d));)
                if (e->d_name[0] != '.')
                        n++;
        closedir(d);
        return n;
}

int main(int argc, char **argv) {
        static const struct option opts[] = {
                { "producer-socket", required_argument, NULL, 'p' }, { "consumer-socket", required_argument, NULL, 'c' },
                { "pid", required_argument, NULL, 'P' },             { "seconds", required_argument, NULL, 's' },
                { "producers", required_argument, NULL, 'n' },       { "sessions", required_argument, NULL, 'S' },
                { "dir", required_argument, NULL, 'd' },             { "as-producer", no_argument, NULL, 'A' },
                {},
        };
        bool as_producer = false;
        int o;
        while ((o = getopt_long(argc, argv, "", opts, NULL)) >= 0)
                switch (o) {
                case 'p': producer_path = optarg; break;
                case 'c': consumer_path = optarg; break;
                case 'P': traced_pid = atoi(optarg); break;
                case 's': seconds = (unsigned) atoi(optarg); break;
                case 'n': n_producers = (unsigned) atoi(optarg); break;
                case 'S': n_sessions = MIN((unsigned) atoi(optarg), (unsigned) ELEMENTSOF(sessions)); break;
                case 'd': dir = optarg; break;
                case 'A': as_producer = true; break;
                default: return 2;
                }
        if (as_producer) {
                if (optind + 3 > argc)
                        return 2;
                return producer_main(atoi(argv[optind]), (unsigned) atoi(argv[optind + 1]), atoi(argv[optind + 2]));
        }
        if (!producer_path || !consumer_path || traced_pid <= 0 || n_sessions < 2) {
                fprintf(stderr, "usage: soak-driver --producer-socket P --consumer-socket C --pid PID [--seconds N]\n");
                return 2;
        }
        self_path = "/proc/self/exe";
        static char exe[4096];
        ssize_t l = readlink("/proc/self/exe", exe, sizeof(exe) - 1);
        if (l > 0) {
                exe[l] = '\0';
                self_path = exe;
        }
        signal(SIGPIPE, SIG_IGN);
        srand((unsigned) time(NULL));
        if (sd_event_new(&ev) < 0)
                return 1;

        pid_t core = core_pid();
        int fds_before = count_fds(core);
        list_fds(core, "at start");
        long rss_start = rss_kb(core);
        start_sessions();
        for (unsigned k = 0; k < n_producers; k++)
                spawn((int) (k % n_sessions));

        uint64_t start = now_ms(), end = start + (uint64_t) seconds * 1000u;
        uint64_t next_read = start + 1000, next_kill = start + 500, next_rss = start, next_detach = start + 15000;
        uint64_t reattach_at = 0;
        unsigned kills = 0, detaches = 0;
        printf("time_s rss_kb fds producers_alive\n");
        while (now_ms() < end) {
                spin_ms(ev, 20);
                drain_reports();
                uint64_t t = now_ms();
                if (t >= next_kill) {
                        /* SIGKILL a random live producer, start another in its session. */
                        unsigned tries = 0, victim;
                        do
                                victim = (unsigned) rand() % n_incs;
                        while (incs[victim].pid <= 0 && ++tries < 1000);
                        if (incs[victim].pid > 0) {
                                (void) kill(incs[victim].pid, SIGKILL);
                                (void) waitpid(incs[victim].pid, NULL, 0);
                                incs[victim].pid = 0;
                                kills++;
                                spawn(incs[victim].session);
                        }
                        next_kill = t + 200 + (uint64_t) (rand() % 800);
                }
                if (t >= next_read) {
                        for (unsigned i = 0; i < n_sessions; i++)
                                read_session(i);
                        next_read = now_ms() + 1000;
                }
                if (t >= next_detach && sessions[0].attached) {
                        detach_first();
                        detaches++;
                        reattach_at = t + 2000;
                        next_detach = t + 15000;
                }
                if (reattach_at && t >= reattach_at) {
                        attach_first();
                        reattach_at = 0;
                }
                if (t >= next_rss) {
                        unsigned alive = 0;
                        for (unsigned i = 0; i < n_incs; i++)
                                alive += incs[i].pid > 0;
                        printf("%6.0f %6ld %4d %4u\n", (double) (t - start) / 1000.0, rss_kb(core), count_fds(core), alive);
                        fflush(stdout);
                        next_rss = t + 10000;
                }
        }
        if (reattach_at)
                attach_first();

        /* The end: every producer SIGKILLed (what it had committed is
         * scraped by the service), then each session stopped and read. */
        for (unsigned i = 0; i < n_incs; i++)
                if (incs[i].pid > 0) {
                        (void) kill(incs[i].pid, SIGKILL);
                        (void) waitpid(incs[i].pid, NULL, 0);
                        incs[i].pid = 0;
                }
        spin_ms(ev, 500);
        drain_reports();
        for (unsigned i = 0; i < n_sessions; i++) {
                Perfetto__Protos__DisableTracingRequest dis = PERFETTO__PROTOS__DISABLE_TRACING_REQUEST__INIT;
                if (i == 0) {
                        Perfetto__Protos__EnableTracingRequest en = PERFETTO__PROTOS__ENABLE_TRACING_REQUEST__INIT;
                        en.has_attach_notification_only = en.attach_notification_only = true;
                        (void) ipc_client_invoke(sessions[0].c.client, "EnableTracing", &en.base,
                                                 &perfetto__protos__enable_tracing_response__descriptor, -EBADF, NULL,
                                                 NULL);
                }
                if (test_consumer_call(&sessions[i].c, "DisableTracing", &dis.base,
                                       &perfetto__protos__disable_tracing_response__descriptor, NULL, 30000) < 0)
                        sessions[i].bad++;
        }
        spin_ms(ev, 2000);
        for (unsigned i = 0; i < n_sessions; i++) {
                struct sess *s = &sessions[i];
                if (s->file) {
                        struct stat st;
                        if (fstat(s->out_fd, &st) == 0 && st.st_size > 0) {
                                uint8_t *buf = malloc((size_t) st.st_size);
                                if (buf && pread(s->out_fd, buf, (size_t) st.st_size, 0) == st.st_size)
                                        account_packets(s, i, buf, (size_t) st.st_size);
                                free(buf);
                        }
                } else
                        read_session(i);
        }

        printf("\nsession policy  written      read   lost(chunks)  unaccounted  bad\n");
        uint64_t total_unaccounted = 0, total_bad = 0;
        for (unsigned i = 0; i < n_sessions; i++) {
                uint64_t written = 0, read = 0, unaccounted = 0;
                for (unsigned k = 0; k < n_incs; k++) {
                        struct inc *in = &incs[k];
                        if (in->session != (int) i)
                                continue;
                        written += in->committed;
                        read += in->read;
                        for (uint32_t c = 0; c < in->committed; c++)
                                if (c / 8 >= in->seen_cap || !(in->seen[c / 8] & (1u << (c % 8))))
                                        unaccounted++;
                }
                printf("%7u %-7s %8lu %9lu %14lu %12lu %4lu\n", i,
                       sessions[i].file ? "file" : i % 2 ? "discard" : "ring", (unsigned long) written,
                       (unsigned long) read, (unsigned long) sessions[i].lost_chunks, (unsigned long) unaccounted,
                       (unsigned long) sessions[i].bad);
                total_unaccounted += unaccounted;
                total_bad += sessions[i].bad;
        }
        for (unsigned i = 0; i < n_sessions; i++)
                test_consumer_free(&sessions[i].c);
        spin_ms(ev, 1000);
        printf("\nproducer incarnations %u (%u SIGKILLed), consumer detached/attached %u times\n", n_incs, kills,
               detaches);
        list_fds(core, "at end");
        printf("service core %d: RSS %ld kB at start, %ld kB at end; fds %d before, %d after\n", (int) core, rss_start,
               rss_kb(core), fds_before, count_fds(core));
        return total_unaccounted == 0 && total_bad == 0 ? 0 : 1;
}
