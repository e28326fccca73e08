/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "pbtxt/pbtxt.h"
#include "summary-json.h"
#include "syscalls.h"
#include "journald-view.h"
#include "summary.h"
#include "trace-reader.h"
#include "tracectl.h"

#include "perfetto/trace/trace_packet.pb-c.h"

#define LINE_MAX_CHARS 240

static void print_short(const ProtobufCMessage *m) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        if (!f)
                return;
        pbtxt_print_line(f, m);
        fclose(f);
        if (len > LINE_MAX_CHARS)
                printf("%.*s ...", LINE_MAX_CHARS, buf);
        else
                fputs(buf, stdout);
        free(buf);
}

static const char *data_name(const Perfetto__Protos__TracePacket *p, const ProtobufCMessage **ret_sub) {
        *ret_sub = NULL;
        for (unsigned i = 0; i < p->base.descriptor->n_fields; i++) {
                const ProtobufCFieldDescriptor *f = &p->base.descriptor->fields[i];
                if (!(f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) || f->id != (unsigned) p->data_case ||
                    f->quantifier_offset != offsetof(Perfetto__Protos__TracePacket, data_case))
                        continue;
                if (f->type == PROTOBUF_C_TYPE_MESSAGE)
                        *ret_sub = *(const ProtobufCMessage *const *) ((const uint8_t *) p + f->offset);
                return f->name;
        }
        return p->base.n_unknown_fields ? "unknown" : "empty";
}

/* The task state letters of sched_switch's prev_state, as the kernel's
 * format prints them ("R+" for a preempted task). */
static const char *task_state(int64_t st, char *buf, size_t size) {
        static const char letters[] = "SDTtXZPI";
        size_t n = 0;
        if (st < 0 || size < 12)
                return "?";
        if ((st & 0xff) == 0)
                buf[n++] = 'R';
        for (unsigned i = 0; i < 8; i++)
                if (st & (1 << i)) {
                        if (n && n + 2 < size)
                                buf[n++] = '|';
                        if (n + 1 < size)
                                buf[n++] = letters[i];
                }
        if ((st & ~(int64_t) 0xff) && n + 1 < size)
                buf[n++] = '+';
        buf[n] = 0;
        return buf;
}

/* What each CPU last switched to, across bundles: the prev side of
 * compact switches, which record only the next task. */
struct cpu_current {
        int32_t *pid;
        char **comm;
        size_t n;
};

static void cpu_current_done(struct cpu_current *c) {
        for (size_t i = 0; i < c->n; i++)
                free(c->comm[i]);
        free(c->pid);
        free(c->comm);
        *c = (struct cpu_current) {};
}

static bool cpu_current_grow(struct cpu_current *c, uint32_t cpu) {
        if (cpu < c->n)
                return true;
        if (cpu >= 65536)
                return false;
        size_t n = (size_t) cpu + 1;
        int32_t *p = realloc(c->pid, n * sizeof(*p));
        if (!p)
                return false;
        c->pid = p;
        char **s = realloc(c->comm, n * sizeof(*s));
        if (!s)
                return false;
        c->comm = s;
        for (size_t i = c->n; i < n; i++) {
                c->pid[i] = -1;
                c->comm[i] = NULL;
        }
        c->n = n;
        return true;
}

static const char *interned(const Perfetto__Protos__FtraceEventBundle__CompactSched *c, size_t n_idx, const uint32_t *idx,
                            size_t i) {
        if (i >= n_idx || idx[i] >= c->n_intern_table)
                return "?";
        return c->intern_table[idx[i]];
}

/* One line per switch and waking of a compact bundle, in time order
 * (the two columns are delta-encoded separately). */
static void print_compact_sched(uint32_t cpu, const Perfetto__Protos__FtraceEventBundle__CompactSched *c,
                                struct cpu_current *cur) {
        uint64_t sw_ts = c->n_switch_timestamp ? c->switch_timestamp[0] : 0;
        uint64_t wk_ts = c->n_waking_timestamp ? c->waking_timestamp[0] : 0;
        size_t i = 0, k = 0;
        bool known = cpu_current_grow(cur, cpu);
        while (i < c->n_switch_timestamp || k < c->n_waking_timestamp) {
                if (k < c->n_waking_timestamp && (i >= c->n_switch_timestamp || wk_ts <= sw_ts)) {
                        printf("         %" PRIu64 " cpu %u sched_waking comm=%s pid=%d prio=%d target_cpu=%d\n", wk_ts, cpu,
                               interned(c, c->n_waking_comm_index, c->waking_comm_index, k),
                               k < c->n_waking_pid ? c->waking_pid[k] : -1, k < c->n_waking_prio ? c->waking_prio[k] : -1,
                               k < c->n_waking_target_cpu ? c->waking_target_cpu[k] : -1);
                        if (++k < c->n_waking_timestamp)
                                wk_ts += c->waking_timestamp[k];
                        continue;
                }
                char st[32];
                int32_t next = i < c->n_switch_next_pid ? c->switch_next_pid[i] : -1;
                const char *next_comm = interned(c, c->n_switch_next_comm_index, c->switch_next_comm_index, i);
                int64_t state = i < c->n_switch_prev_state ? c->switch_prev_state[i] : -1;
                /* Idle never sleeps: a sleeping task leaving a CPU thought
                 * idle was switched in without a record (it happens for
                 * tasks woken onto an idle CPU): who it was is unknown. */
                bool prev_known = known && cur->pid[cpu] >= 0 && !(cur->pid[cpu] == 0 && state > 0);
                printf("         %" PRIu64 " cpu %u sched_switch prev_comm=%s prev_pid=", sw_ts, cpu,
                       prev_known && cur->comm[cpu] ? cur->comm[cpu] : "?");
                if (prev_known)
                        printf("%d", cur->pid[cpu]);
                else
                        putchar('?');
                printf(" prev_state=%s ==> next_comm=%s next_pid=%d next_prio=%d\n",
                       task_state(state, st, sizeof(st)), next_comm,
                       next, i < c->n_switch_next_prio ? c->switch_next_prio[i] : -1);
                if (known) {
                        cur->pid[cpu] = next;
                        free(cur->comm[cpu]);
                        cur->comm[cpu] = strcmp(next_comm, "?") ? strdup(next_comm) : NULL;
                }
                if (++i < c->n_switch_timestamp)
                        sw_ts += c->switch_timestamp[i];
        }
}

/* raw_syscalls events carry the number: the name follows. */
static void print_syscall(const Perfetto__Protos__FtraceEvent *e, const char *machine) {
        int64_t nr;
        if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_ENTER && e->sys_enter->has_id)
                nr = e->sys_enter->id;
        else if (e->event_case == PERFETTO__PROTOS__FTRACE_EVENT__EVENT_SYS_EXIT && e->sys_exit->has_id)
                nr = e->sys_exit->id;
        else
                return;
        const char *name = syscall_name(machine, nr);
        printf(" (%s)", name ? name : "?");
}

int cmd_print(int argc, char **argv) {
        bool journal = argc == 3 && strcmp(argv[1], "--journal") == 0;
        if (!(argc == 2 || journal) || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl print [--journal] FILE\n\nPrints every packet of a trace on a line: index, timestamp,\n"
                       "sequence, type and its fields; ftrace events one per line below.\n"
                       "--journal prints the journal entries (linux.systemd_journald) alone.\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        const char *path = argv[argc - 1];
        struct trace_reader rd;
        int r = trace_reader_open(&rd, path);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot open %s: %s\n", path, strerror(-r));
                return EXIT_OTHER;
        }
        const uint8_t *data;
        size_t len;
        uint64_t idx = 0;
        struct cpu_current cur = {};
        char machine[64] = ""; /* SystemInfo's: the architecture syscall numbers are of */
        while ((r = trace_reader_next(&rd, &data, &len)) > 0) {
                Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, len, data);
                if (!p) {
                        printf("%6" PRIu64 " undecodable packet (%zu bytes)\n", idx++, len);
                        continue;
                }
                if (journal) {
                        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_JOURNALD_EVENT) {
                                printf("%6" PRIu64 " ts=%-16" PRIu64 " ", idx, p->has_timestamp ? p->timestamp : 0);
                                journald_print_event(stdout, p->journald_event);
                        }
                        idx++;
                        perfetto__protos__trace_packet__free_unpacked(p, NULL);
                        continue;
                }
                const ProtobufCMessage *sub;
                const char *name = data_name(p, &sub);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_SYSTEM_INFO && p->system_info->utsname &&
                    p->system_info->utsname->machine)
                        snprintf(machine, sizeof(machine), "%s", p->system_info->utsname->machine);
                printf("%6" PRIu64 " ts=%-16" PRIu64 " seq=%-4u %s%s: ", idx++, p->has_timestamp ? p->timestamp : 0,
                       p->trusted_packet_sequence_id, p->has_previous_packet_dropped && p->previous_packet_dropped ? "[loss] " : "",
                       name);
                if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_FTRACE_EVENTS) {
                        const Perfetto__Protos__FtraceEventBundle *b = p->ftrace_events;
                        size_t n_compact = b->compact_sched ? b->compact_sched->n_switch_timestamp +
                                                                      b->compact_sched->n_waking_timestamp
                                                            : 0;
                        printf("cpu %u, %zu events", b->cpu, b->n_event + n_compact);
                        if (b->compact_sched)
                                printf(" (%zu switches, %zu wakings compact)", b->compact_sched->n_switch_timestamp,
                                       b->compact_sched->n_waking_timestamp);
                        printf("%s\n", b->has_lost_events && b->lost_events ? ", kernel lost events before" : "");
                        if (b->compact_sched)
                                print_compact_sched(b->cpu, b->compact_sched, &cur);
                        for (size_t i = 0; i < b->n_event; i++) {
                                printf("         %" PRIu64 " pid %u ", b->event[i]->timestamp, b->event[i]->pid);
                                const Perfetto__Protos__FtraceEvent *e = b->event[i];
                                const ProtobufCMessage *ev = NULL;
                                const char *en = "unknown";
                                for (unsigned k = 0; k < e->base.descriptor->n_fields; k++) {
                                        const ProtobufCFieldDescriptor *f = &e->base.descriptor->fields[k];
                                        if ((f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) && f->id == (unsigned) e->event_case) {
                                                en = f->name;
                                                ev = *(const ProtobufCMessage *const *) ((const uint8_t *) e + f->offset);
                                        }
                                }
                                printf("%s ", en);
                                if (ev)
                                        print_short(ev);
                                print_syscall(e, machine);
                                putchar('\n');
                        }
                } else if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_JOURNALD_EVENT) {
                        journald_print_event(stdout, p->journald_event);
                } else if (sub) {
                        print_short(sub);
                        putchar('\n');
                } else
                        putchar('\n');
                perfetto__protos__trace_packet__free_unpacked(p, NULL);
        }
        trace_reader_close(&rd);
        cpu_current_done(&cur);
        syscalls_done();
        if (r < 0) {
                fprintf(stderr, "tracectl: %s is damaged after %" PRIu64 " packets\n", path, idx);
                return EXIT_OTHER;
        }
        return EXIT_OK;
}

static int summarise_file(const char *path, unsigned top_n, bool json) {
        struct trace_reader rd;
        struct summary s;
        int r = trace_reader_open(&rd, path);
        if (r < 0) {
                fprintf(stderr, "tracectl: cannot open %s: %s\n", path, strerror(-r));
                return EXIT_OTHER;
        }
        summary_init(&s);
        const uint8_t *data;
        size_t len;
        while ((r = trace_reader_next(&rd, &data, &len)) > 0)
                summary_add_packet(&s, data, len);
        summary_finish(&s);
        /* The file's size: a truncated or damaged one is larger than what
         * was read of it (rd.offset, where the last whole packet ends). */
        struct stat st;
        uint64_t size = rd.f && fstat(fileno(rd.f), &st) == 0 && S_ISREG(st.st_mode) ? (uint64_t) st.st_size : rd.offset;
        int ret = EXIT_OK;
        if (r == 0 && rd.n_packets == 0) {
                fprintf(stderr, "tracectl: %s is empty: it holds no trace packets\n", path);
                ret = EXIT_OTHER;
        } else {
                if (json) {
                        if (summary_print_json(stdout, &s, path, size, rd.offset, r == 0, top_n) < 0) {
                                fprintf(stderr, "tracectl: out of memory\n");
                                ret = EXIT_OTHER;
                        }
                } else {
                        if (r < 0)
                                printf("File:           %s (%" PRIu64 " bytes, of which %" PRIu64
                                       " hold whole packets)\n",
                                       path, size, rd.offset);
                        else
                                printf("File:           %s (%" PRIu64 " bytes)\n", path, size);
                        summary_print(stdout, &s, top_n);
                }
                fflush(stdout);
                if (r < 0) {
                        fprintf(stderr,
                                "tracectl: %s is truncated or damaged after %" PRIu64 " packets (byte %" PRIu64
                                "): the summary covers only those\n",
                                path, rd.n_packets, rd.offset);
                        ret = EXIT_OTHER;
                }
        }
        trace_reader_close(&rd);
        summary_done(&s);
        return ret;
}

int print_trace_summary(const char *path, unsigned top_n) {
        return summarise_file(path, top_n, false);
}

int cmd_summary(int argc, char **argv) {
        bool json = argc == 3 && strcmp(argv[1], "--json") == 0;
        if (!(argc == 2 || json) || strcmp(argv[1], "--help") == 0) {
                printf("Usage: tracectl summary [--json] FILE\n\nPackets per type and sequence, time span, per-CPU ftrace event\n"
                       "counts, the threads that used the most CPU (from sched_switch),\n"
                       "perf samples and how stacks were walked, and the service's\n"
                       "statistics. --json writes them as one JSON object (keys in tracectl(1)).\n");
                return argc == 2 ? EXIT_OK : EXIT_USAGE;
        }
        return summarise_file(argv[argc - 1], 15, json);
}
