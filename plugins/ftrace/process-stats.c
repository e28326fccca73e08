/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.process_stats: the process tree (pid, ppid, uid, cmdline; threads
 * with their names) at start when scan_all_processes_on_start is set, and
 * on demand for the pids the same session's ftrace events name; with
 * proc_stats_poll_ms, ProcessStats (memory counters, oom_score_adj, CPU
 * time) of every process at that period. */

#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/resource.h>
#include <unistd.h>

#include "basic/hashmap.h"
#include "basic/macro.h"
#include "basic/pbr.h"
#include "ftrace-ds.h"
#include "proc.h"
#include "proc-files.h"
#include "traced/pbzero/perfetto/config/data_source_config.pbw.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

#define PROCESSES_PER_PACKET 200
#define MIN_POLL_MS 100u
#define MAX_PENDING 4096
#define SEEN_MAX (1u << 20) /* pids remembered per session */
#define MAX_POLL_PROCESSES 16384 /* bound on one poll's work */
#define COUNTERS 11
/* proc-files.h: processes whose files one session keeps open, the soft
 * RLIMIT_NOFILE asked for to hold them, and descriptors left for the rest. */
#define KEEP_FILES_MAX_PROCESSES 4096u
#define KEEP_FILES_NOFILE 65536u
#define KEEP_FILES_RESERVE 256u
/* proc_stats_cache_ttl_ms: last values per pid, open addressing; a power
 * of two well above MAX_POLL_PROCESSES. */
#define CACHE_SLOTS 32768u

struct cached_counters {
        int32_t pid; /* 0: free */
        uint32_t has; /* bit i: v[i] valid */
        uint64_t v[COUNTERS];
};

struct ps_session {
        struct plugin_instance inst; /* first: the plugin's list, by instance id */
        struct plugin *pl;
        uint64_t tracing_session_id;
        struct traced_writer *writer;
        struct traced_source *poll_timer;
        uint32_t poll_ms;
        /* proc_stats_cache_ttl_ms in polls (rounded down): within it, a
         * counter equal to the value last emitted is left out; the cache is
         * cleared every ttl_polls polls. NULL when every value is sent. */
        uint32_t ttl_polls;
        struct cached_counters *cache;
        struct proc_files *files; /* with poll_ms: what each poll reads */
        bool on_demand, record_runtime;
        long ticks_per_sec;
        struct hashmap seen; /* pids (and tids) already described (a set) */
        int32_t pending[MAX_PENDING];
        size_t n_pending;
        uint64_t described, polls;
        /* Incremental state was cleared: the next packet says so. */
        bool cleared;
};

static uint64_t boottime_ns(void) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static uint64_t pid_key(int32_t pid) {
        return (uint32_t) pid;
}

/* true when pid was not described yet (and now counts as described). */
static bool seen_insert(struct ps_session *ps, int32_t pid) {
        if (pid <= 0 || hashmap_get(&ps->seen, pid_key(pid), NULL))
                return false;
        if (hashmap_size(&ps->seen) >= SEEN_MAX)
                return false; /* enough: stop describing */
        return hashmap_put(&ps->seen, pid_key(pid), 0) > 0;
}

static bool seen_has(const struct ps_session *ps, int32_t pid) {
        return hashmap_get(&ps->seen, pid_key(pid), NULL);
}

/* A packet of ProcessTree (or ProcessStats) being written, of up to
 * PROCESSES_PER_PACKET processes: begun with its first entry, straight
 * into the writer's shared memory. */
struct batch {
        struct ps_session *ps;
        bool stats; /* ProcessStats, else ProcessTree */
        bool open;
        bool refused; /* the writer refused it: its processes are left out */
        unsigned n;   /* processes in it */
        TracePacket pkt;
        ProcessTree tree;
        ProcessStats st;
};

/* Whether the batch's packet is open (begun now if needed). */
static bool batch_open(struct batch *b) {
        if (b->open)
                return true;
        if (b->refused || b->ps->pl->api->begin_packet(b->ps->writer, &b->pkt.msg) < 0) {
                b->refused = true;
                return false;
        }
        if (b->ps->cleared) {
                /* What follows stands without the packets before it (a
                 * rotating session starts its next file here). */
                TracePacket_set_sequence_flags(&b->pkt, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED);
                b->ps->cleared = false;
        }
        if (b->stats)
                TracePacket_begin_process_stats(&b->pkt, &b->st);
        else
                TracePacket_begin_process_tree(&b->pkt, &b->tree);
        b->open = true;
        return true;
}

static void batch_close(struct batch *b) {
        b->refused = false;
        if (!b->open) {
                b->n = 0;
                return;
        }
        uint64_t now = boottime_ns();
        if (b->stats) {
                ProcessStats_set_collection_end_timestamp(&b->st, now);
                TracePacket_end_process_stats(&b->pkt, &b->st);
        } else {
                ProcessTree_set_collection_end_timestamp(&b->tree, now);
                TracePacket_end_process_tree(&b->pkt, &b->tree);
        }
        TracePacket_set_timestamp(&b->pkt, now);
        (void) b->ps->pl->api->end_packet(b->ps->writer, &b->pkt.msg);
        b->open = false;
        b->n = 0;
}

/* A process more in the batch: the packet goes when it holds enough. */
static void batch_count(struct batch *b) {
        if (++b->n >= PROCESSES_PER_PACKET)
                batch_close(b);
}

/* ProcessTree.Process of pid. */
static void add_process(struct batch *b, int pid, const struct proc_status *st) {
        char buf[4096];
        ProcessTree_Process proc;
        if (!batch_open(b))
                return;
        ProcessTree_begin_processes(&b->tree, &proc);
        ProcessTree_Process_set_pid(&proc, pid);
        ProcessTree_Process_set_ppid(&proc, st->ppid >= 0 ? st->ppid : 0);
        /* A kernel thread has no arguments: not asked for them. */
        ssize_t n = st->kthread == 1 ? 0 : proc_read_cmdline("/proc", pid, buf, sizeof(buf));
        if (n > 0) {
                for (ssize_t off = 0; off < n;) {
                        size_t l = strnlen(buf + off, (size_t) (n - off));
                        ProcessTree_Process_add_cmdline_n(&proc, buf + off, l);
                        off += (ssize_t) l + 1;
                }
        } else {
                /* Kernel threads have no cmdline: the comm stands in. */
                ProcessTree_Process_add_cmdline(&proc, st->name);
                ProcessTree_Process_set_cmdline_is_comm(&proc, true);
        }
        if (st->uid >= 0)
                ProcessTree_Process_set_uid(&proc, st->uid);
        ProcessTree_end_processes(&b->tree, &proc);
}

static void add_thread(struct batch *b, int tid, int tgid, const char *name) {
        ProcessTree_Thread th;
        if (!batch_open(b))
                return;
        ProcessTree_begin_threads(&b->tree, &th);
        ProcessTree_Thread_set_tid(&th, tid);
        if (name)
                ProcessTree_Thread_set_name(&th, name);
        ProcessTree_Thread_set_tgid(&th, tgid);
        ProcessTree_end_threads(&b->tree, &th);
}

/* Describes a process and all its threads. */
static void describe_process(struct ps_session *ps, struct batch *b, int pid) {
        struct proc_status st;
        if (proc_read_status("/proc", pid, &st) < 0)
                return; /* gone meanwhile */
        seen_insert(ps, pid);
        add_process(b, pid, &st);
        ps->described++;
        /* Its main thread is named as the process; a kernel thread (most
         * of an idle machine's processes) has no other, and the others'
         * names are their comm, a far cheaper file than status. A clear
         * of the incremental state describes every process again: this
         * is most of what an always-on recording costs an idle machine. */
        add_thread(b, pid, pid, st.name);
        if (st.kthread == 1)
                return;
        char path[64];
        snprintf(path, sizeof(path), "/proc/%d/task", pid);
        DIR *t = opendir(path);
        struct dirent *te;
        while (t && (te = readdir(t))) {
                if (!isdigit((unsigned char) te->d_name[0]))
                        continue;
                int tid = atoi(te->d_name);
                char name[sizeof(st.name)];
                if (tid == pid)
                        continue;
                seen_insert(ps, tid);
                if (proc_read_comm(path, tid, name, sizeof(name)) == 0)
                        add_thread(b, tid, pid, name);
        }
        if (t)
                closedir(t);
}

static void scan_all_processes(struct ps_session *ps) {
        DIR *d = opendir("/proc");
        if (!d)
                return;
        struct batch b = { .ps = ps };
        struct dirent *de;
        while ((de = readdir(d))) {
                if (!isdigit((unsigned char) de->d_name[0]))
                        continue;
                describe_process(ps, &b, atoi(de->d_name));
                batch_count(&b);
        }
        closedir(d);
        batch_close(&b);
}

void process_stats_note_pid(struct ps_session *ps, int32_t pid) {
        if (!ps || !ps->on_demand || pid <= 0 || seen_has(ps, pid))
                return;
        if (ps->n_pending == MAX_PENDING || !seen_insert(ps, pid))
                return;
        ps->pending[ps->n_pending++] = pid;
}

void process_stats_redescribe(struct ps_session *ps, int32_t pid) {
        if (!ps || !ps->on_demand || pid <= 0 || ps->n_pending == MAX_PENDING)
                return;
        for (size_t i = 0; i < ps->n_pending; i++)
                if (ps->pending[i] == pid)
                        return;
        (void) seen_insert(ps, pid);
        ps->pending[ps->n_pending++] = pid;
}

void process_stats_resolve_pending(struct ps_session *ps) {
        if (!ps || ps->n_pending == 0)
                return;
        struct batch b = { .ps = ps };
        for (size_t i = 0; i < ps->n_pending; i++) {
                int tid = ps->pending[i];
                struct proc_status st;
                if (proc_read_status("/proc", tid, &st) < 0)
                        continue; /* exited already */
                if (st.tgid != tid && !seen_has(ps, st.tgid)) {
                        describe_process(ps, &b, st.tgid);
                        batch_count(&b);
                } else if (st.tgid == tid) {
                        add_process(&b, tid, &st);
                        add_thread(&b, tid, tid, st.name);
                        ps->described++;
                        batch_count(&b);
                } else
                        add_thread(&b, tid, st.tgid, st.name);
        }
        batch_close(&b);
        ps->n_pending = 0;
}

static struct cached_counters *cache_slot(struct ps_session *ps, int32_t pid) {
        uint32_t h = ((uint32_t) pid * 2654435761u) & (CACHE_SLOTS - 1);
        for (uint32_t n = 0; n < CACHE_SLOTS; n++, h = (h + 1) & (CACHE_SLOTS - 1))
                if (ps->cache[h].pid == pid || ps->cache[h].pid == 0)
                        return &ps->cache[h];
        return NULL;
}

/* The counters, in order: vm_size .. vm_hwm (kB), oom_score_adj,
 * runtime_user/kernel_mode (ns): their ProcessStats.Process fields. */
static const uint32_t counter_field[COUNTERS] = {
        ProcessStats_Process_FIELD_vm_size_kb,      ProcessStats_Process_FIELD_vm_rss_kb,
        ProcessStats_Process_FIELD_rss_anon_kb,     ProcessStats_Process_FIELD_rss_file_kb,
        ProcessStats_Process_FIELD_rss_shmem_kb,    ProcessStats_Process_FIELD_vm_swap_kb,
        ProcessStats_Process_FIELD_vm_locked_kb,    ProcessStats_Process_FIELD_vm_hwm_kb,
        ProcessStats_Process_FIELD_oom_score_adj,   ProcessStats_Process_FIELD_runtime_user_mode,
        ProcessStats_Process_FIELD_runtime_kernel_mode,
};

/* ProcessStats of every process (at most MAX_POLL_PROCESSES). */
static void poll_stats(struct ps_session *ps) {
        DIR *d = opendir("/proc");
        if (!d)
                return;
        /* The cache renewed: every value is sent, so every value is read. */
        bool fresh = ps->cache && ps->polls % ps->ttl_polls == 0;
        if (fresh)
                memset(ps->cache, 0, CACHE_SLOTS * sizeof(*ps->cache));
        proc_files_begin(ps->files);
        struct batch b = { .ps = ps, .stats = true };
        unsigned total = 0;
        struct dirent *de;
        while (total < MAX_POLL_PROCESSES && (de = readdir(d))) {
                if (!isdigit((unsigned char) de->d_name[0]))
                        continue;
                int pid = atoi(de->d_name);
                struct proc_counters pc;
                if (pid <= 0 || proc_files_read(ps->files, pid, fresh, &pc) < 0)
                        continue;
                const struct proc_status *st = &pc.st;
                struct cached_counters c = { .pid = pid };
                const int64_t kb[8] = { st->vm_size,   st->vm_rss,  st->rss_anon,  st->rss_file,
                                        st->rss_shmem, st->vm_swap, st->vm_locked, st->vm_hwm };
                for (unsigned i = 0; i < 8; i++)
                        if (kb[i] != PROC_NO_VALUE && kb[i] >= 0) {
                                c.v[i] = (uint64_t) kb[i];
                                c.has |= 1u << i;
                        }
                if (pc.has_oom_score_adj) {
                        c.v[8] = (uint64_t) pc.oom_score_adj; /* int64: two's complement */
                        c.has |= 1u << 8;
                }
                if (pc.has_times) {
                        uint64_t ns_per_tick = 1000000000u / (uint64_t) ps->ticks_per_sec;
                        c.v[9] = pc.utime * ns_per_tick;
                        c.v[10] = pc.stime * ns_per_tick;
                        c.has |= 3u << 9;
                }
                struct cached_counters *prev = ps->cache ? cache_slot(ps, pid) : NULL;
                if (batch_open(&b)) {
                        ProcessStats_Process p;
                        ProcessStats_begin_processes(&b.st, &p);
                        ProcessStats_Process_set_pid(&p, pid);
                        /* All of them varints (oom_score_adj an int64,
                         * kept in two's complement). */
                        for (unsigned i = 0; i < COUNTERS; i++)
                                if ((c.has & (1u << i)) &&
                                    !(prev && prev->pid == pid && (prev->has & (1u << i)) && prev->v[i] == c.v[i]))
                                        traced_pb_msg_varint(&p.msg, counter_field[i], c.v[i]);
                        ProcessStats_end_processes(&b.st, &p);
                }
                if (prev)
                        *prev = c;
                total++;
                batch_count(&b);
        }
        closedir(d);
        proc_files_end(ps->files);
        batch_close(&b);
        ps->polls++;
}

static void on_poll(void *userdata) {
        poll_stats(userdata);
        (void) ((struct ps_session *) userdata)->pl->api->flush_writer(((struct ps_session *) userdata)->writer);
}

struct ps_session *process_stats_for_session(struct plugin *pl, uint64_t tracing_session_id) {
        for (struct plugin_instance *i = pl->ps_sessions; i; i = i->next)
                if (((struct ps_session *) i)->tracing_session_id == tracing_session_id)
                        return (struct ps_session *) i;
        return NULL;
}

/* How many processes' /proc files a poll may keep open: the soft limit on
 * open files raised towards its hard one (sd-event uses epoll: nothing
 * here needs descriptors below 1024), minus those open now and a reserve,
 * halved for a second session in this host. */
static size_t kept_processes(struct plugin *pl, bool want_times) {
        struct rlimit rl;
        if (getrlimit(RLIMIT_NOFILE, &rl) < 0)
                return 0;
        if (rl.rlim_cur < KEEP_FILES_NOFILE && rl.rlim_cur < rl.rlim_max) {
                struct rlimit want = { .rlim_cur = MIN(rl.rlim_max, (rlim_t) KEEP_FILES_NOFILE), .rlim_max = rl.rlim_max };
                if (setrlimit(RLIMIT_NOFILE, &want) == 0)
                        rl = want;
        }
        size_t used = 0;
        DIR *d = opendir("/proc/self/fd");
        for (struct dirent *de; d && (de = readdir(d));)
                used += de->d_name[0] != '.';
        if (d)
                closedir(d);
        size_t reserve = used + KEEP_FILES_RESERVE;
        if (rl.rlim_cur == RLIM_INFINITY || rl.rlim_cur > SIZE_MAX)
                return KEEP_FILES_MAX_PROCESSES;
        size_t n = rl.rlim_cur > reserve ? ((size_t) rl.rlim_cur - reserve) / proc_files_fds(2, want_times) : 0;
        if (n < KEEP_FILES_MAX_PROCESSES)
                plugin_log(pl, TRACED_LOG_INFO,
                           "linux.process_stats: %zu open files allowed (RLIMIT_NOFILE); the files of %zu processes "
                           "are kept open between polls, the others opened at each",
                           (size_t) rl.rlim_cur, n);
        return MIN(n, (size_t) KEEP_FILES_MAX_PROCESSES);
}

static void ps_free(struct ps_session *ps) {
        struct plugin *pl = ps->pl;
        if (ps->poll_timer)
                pl->api->remove_source(pl->host, ps->poll_timer);
        if (ps->writer) {
                (void) pl->api->flush_writer(ps->writer);
                pl->api->free_writer(ps->writer);
        }
        hashmap_clear(&ps->seen);
        free(ps->cache);
        proc_files_free(ps->files);
        free(ps);
}

int process_stats_start(struct plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        struct pbr_field f, pc;
        struct ps_session *ps = calloc(1, sizeof(*ps));
        if (!ps)
                return -ENOMEM;
        ps->pl = pl;
        ps->inst.id = instance_id;
        ps->on_demand = true;
        ps->ticks_per_sec = sysconf(_SC_CLK_TCK) > 0 ? sysconf(_SC_CLK_TCK) : 100;
        bool scan_all = false;
        uint64_t ttl_ms = 0;
        if (pbr_get(config, size, DataSourceConfig_FIELD_tracing_session_id, false, &f) && f.wire_type == 0)
                ps->tracing_session_id = f.varint;
        if (pbr_get(config, size, DataSourceConfig_FIELD_process_stats_config, false, &pc) && pc.wire_type == 2) {
                size_t pos = 0;
                while (pbr_next(pc.data, pc.len, &pos, &f) > 0) {
                        if (f.number == ProcessStatsConfig_FIELD_quirks && f.wire_type == 0 &&
                            f.varint == ProcessStatsConfig_DISABLE_ON_DEMAND)
                                ps->on_demand = false;
                        else if (f.number == ProcessStatsConfig_FIELD_quirks && f.wire_type == 2 &&
                                 memchr(f.data, ProcessStatsConfig_DISABLE_ON_DEMAND, f.len)) /* packed */
                                ps->on_demand = false;
                        else if (f.number == ProcessStatsConfig_FIELD_proc_stats_cache_ttl_ms && f.wire_type == 0)
                                ttl_ms = f.varint;
                        else if (f.number == ProcessStatsConfig_FIELD_scan_all_processes_on_start && f.wire_type == 0)
                                scan_all = f.varint != 0;
                        else if (f.number == ProcessStatsConfig_FIELD_proc_stats_poll_ms && f.wire_type == 0)
                                ps->poll_ms = f.varint > UINT32_MAX ? UINT32_MAX : (uint32_t) f.varint;
                        else if (f.number == ProcessStatsConfig_FIELD_record_process_runtime && f.wire_type == 0)
                                ps->record_runtime = f.varint != 0;
                }
        }
        if (ps->poll_ms && ps->poll_ms < MIN_POLL_MS) {
                plugin_log(pl, TRACED_LOG_WARNING, "proc_stats_poll_ms %u is below %u ms; using %u",
                           ps->poll_ms, MIN_POLL_MS, MIN_POLL_MS);
                ps->poll_ms = MIN_POLL_MS;
        }
        /* Upstream: 0 or unset means one poll (no caching); other values are
         * rounded down to a multiple of the poll period. */
        ps->ttl_polls = ps->poll_ms && ttl_ms >= ps->poll_ms ? (uint32_t) MIN(ttl_ms / ps->poll_ms, 100000u) : 1;
        if (ps->ttl_polls > 1 && !(ps->cache = calloc(CACHE_SLOTS, sizeof(*ps->cache)))) {
                ps_free(ps);
                return -ENOMEM;
        }
        int r = pl->api->new_writer(pl->host, instance_id, &ps->writer);
        if (r < 0) {
                ps_free(ps);
                return r;
        }
        if (scan_all)
                scan_all_processes(ps);
        if (ps->poll_ms && !ps->files) {
                r = proc_files_new("/proc", kept_processes(pl, ps->record_runtime), ps->record_runtime, &ps->files);
                if (r < 0) {
                        ps_free(ps);
                        return r;
                }
        }
        if (ps->poll_ms) {
                poll_stats(ps);
                r = pl->api->add_timer(pl->host, ps->poll_ms, on_poll, ps, &ps->poll_timer);
                if (r < 0) {
                        ps_free(ps);
                        return r;
                }
        }
        (void) pl->api->flush_writer(ps->writer);
        plugin_instance_add(&pl->ps_sessions, &ps->inst);
        plugin_log(pl, TRACED_LOG_INFO, "linux.process_stats instance %llu: %llu processes at start%s%s",
                   (unsigned long long) instance_id, (unsigned long long) ps->described,
                   ps->on_demand ? ", more on demand" : "", ps->poll_ms ? ", polling stats" : "");
        return 0;
}

bool process_stats_stop(struct plugin *pl, uint64_t instance_id) {
        struct ps_session *ps = (struct ps_session *) plugin_instance_take(&pl->ps_sessions, instance_id);
        if (!ps)
                return false;
        process_stats_resolve_pending(ps);
        /* A last sample, so CPU times cover the whole trace. */
        if (ps->poll_ms)
                poll_stats(ps);
        plugin_log(
                pl, TRACED_LOG_INFO, "linux.process_stats instance %llu stopped: %llu processes described, %llu polls",
                (unsigned long long) instance_id, (unsigned long long) ps->described, (unsigned long long) ps->polls);
        ps_free(ps);
        return true;
}

void process_stats_flush(struct plugin *pl, uint64_t instance_id) {
        struct ps_session *ps = (struct ps_session *) plugin_instance_find(pl->ps_sessions, instance_id);
        if (ps) {
                process_stats_resolve_pending(ps);
                (void) pl->api->flush_writer(ps->writer);
        }
}

void process_stats_clear(struct plugin *pl, uint64_t instance_id) {
        struct ps_session *ps = (struct ps_session *) plugin_instance_find(pl->ps_sessions, instance_id);
        if (!ps)
                return;
        /* Everything described so far is forgotten: every live process is
         * described again now, and the others when they show up. */
        process_stats_resolve_pending(ps);
        hashmap_clear(&ps->seen);
        if (ps->cache)
                memset(ps->cache, 0, CACHE_SLOTS * sizeof(*ps->cache));
        ps->cleared = true;
        scan_all_processes(ps);
        (void) pl->api->flush_writer(ps->writer);
}

void process_stats_free_all(struct plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->ps_sessions)))
                ps_free((struct ps_session *) i);
}
