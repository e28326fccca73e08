/* SPDX-License-Identifier: LGPL-2.1-or-later */

/*
 * One linux.bpf_stack instance: probes what the kernel offers, loads the
 * skeleton with the config in .rodata, attaches the on-CPU program to a
 * cpu-clock event per CPU and the off-CPU program to sched_switch, and
 * drains the BPF ring buffer on the host's event loop. Each record's stack
 * ids are looked up in the stack map, symbolized (lib/profiling) and
 * written as a PerfSample: on-CPU samples on one packet sequence, off-CPU
 * samples on another, each with its own timebase (man 7 traced-bpf-stack).
 */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>

#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "bpfstack-session.h"
#include "traced/pbzero/perfetto/common/perf_events.pbw.h"

/* Walked user stacks of switched-out tasks kept at once (1 KiB each). */
#define OUT_USTACKS 4096u
/* Page index entries (4 bytes, one per 4 KiB of code with tables): one for
 * every four rows, far more than code has (libc: 28 000 rows, 430 pages). */
#define UNWIND_PAGES(c) ((c)->unwind_rows / 4u)
/* The notes' ring of each CPU: 256 KiB, a few thousand execs' mappings
 * between two drains. */
#define NOTES_RING_PAGES 64u
/* Processes read as sampling starts: half the table's bound (see
 * bpfstack-drain.c). */
#define PROC_SCAN_MAX 2048u

static void session_free(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        if (s->timer)
                pl->api->remove_source(pl->host, s->timer);
        if (s->rb_src)
                pl->api->remove_source(pl->host, s->rb_src);
        if (s->tables_src)
                pl->api->remove_source(pl->host, s->tables_src);
        if (s->warmup_timer)
                pl->api->remove_source(pl->host, s->warmup_timer);
        if (s->notes_src)
                pl->api->remove_source(pl->host, s->notes_src);
        perf_notes_free(s->notes);
        ring_buffer__free(s->rb);
        bpf_link__destroy(s->switch_link);
        bpf_link__destroy(s->exec_link);
        bpf_link__destroy(s->exit_link);
        unwind_tables_free(s->tables);
        for (size_t k = 0; k < s->n_possible; k++)
                bpfstack_close_cpu(s, k);
        cpu_hotplug_done(&s->hotplug);
        bpfstack__destroy(s->skel);
        if (s->counters_writer) {
                (void) pl->api->flush_writer(s->counters_writer);
                pl->api->free_writer(s->counters_writer);
        }
        struct seq *qs[] = { &s->on, &s->off };
        for (size_t k = 0; k < 2; k++) {
                if (qs[k]->writer) {
                        (void) pl->api->flush_writer(qs[k]->writer);
                        pl->api->free_writer(qs[k]->writer);
                }
                intern_writer_free(qs[k]->iw);
        }
        proc_table_free(s->procs);
        task_names_done(&s->names);
        elf_cache_free(s->elves);
        kernel_names_free(s->knames);
        ksyms_free(s->ksyms);
        free(s->stack_buf);
        free(s->cs_cache);
        hashmap_clear(&s->seen_ids);
        free(s);
}

/* What the kernel must offer; a clear error naming what it lacks. */
static int probe(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        const char *btf_path = s->cfg.btf_path;
        struct btf *btf = btf__parse(btf_path, NULL);
        if (!btf) {
                int r = -errno;
                plugin_report(pl, "linux.bpf_stack", s->inst.id, NULL,
                              "no kernel BTF at %s (%s): CO-RE needs a kernel built with CONFIG_DEBUG_INFO_BTF=y",
                              btf_path, strerror(-r));
                return -EOPNOTSUPP;
        }
        btf__free(btf);
        static const struct {
                enum bpf_prog_type type;
                const char *what;
                bool needed_on, needed_off;
        } progs[] = {
                { BPF_PROG_TYPE_PERF_EVENT, "BPF perf_event programs", true, false },
                { BPF_PROG_TYPE_RAW_TRACEPOINT, "BPF raw tracepoint programs", false, true },
        };
        for (size_t k = 0; k < sizeof(progs) / sizeof(progs[0]); k++) {
                if (!(progs[k].needed_on && s->cfg.on_cpu) && !(progs[k].needed_off && s->cfg.off_cpu))
                        continue;
                if (libbpf_probe_bpf_prog_type(progs[k].type, NULL) != 1) {
                        plugin_report(pl, "linux.bpf_stack", s->inst.id, NULL,
                                      "the kernel does not offer %s (or the plugin lacks CAP_BPF/CAP_PERFMON)",
                                      progs[k].what);
                        return -EOPNOTSUPP;
                }
        }
        static const struct {
                enum bpf_map_type type;
                const char *what;
        } maps[] = {
                { BPF_MAP_TYPE_RINGBUF, "BPF ring buffers (Linux 5.8)" },
                { BPF_MAP_TYPE_STACK_TRACE, "BPF stack trace maps" },
        };
        for (size_t k = 0; k < sizeof(maps) / sizeof(maps[0]); k++)
                if (libbpf_probe_bpf_map_type(maps[k].type, NULL) != 1) {
                        plugin_report(pl, "linux.bpf_stack", s->inst.id, NULL,
                                      "the kernel does not offer %s (or the plugin lacks CAP_BPF)", maps[k].what);
                        return -EOPNOTSUPP;
                }
        return 0;
}

/* Opens the skeleton with the config in .rodata and the maps sized, and
 * loads it: the off-CPU program as a BTF tracepoint or a raw one. */
static int open_load(struct bpfstack_session *s, uint64_t cgroup_id, bool btf_tp) {
        const struct bpfstack_config *c = &s->cfg;
        int r;
        bpfstack__destroy(s->skel);
        LIBBPF_OPTS(bpf_object_open_opts, oo, .btf_custom_path = c->btf_path);
        s->skel = bpfstack__open_opts(&oo);
        if (!s->skel)
                return -errno;
        struct bpfstack__rodata *ro = s->skel->rodata;
        ro->want_on_cpu = c->on_cpu;
        ro->want_off_cpu = c->off_cpu;
        ro->want_kernel = c->kernel_frames;
        ro->want_user = c->user_frames;
        ro->min_block_ns = c->min_blocked_ns;
        ro->n_pids = (uint32_t) c->n_pids;
        ro->n_tids = (uint32_t) c->n_tids;
        ro->n_comms = (uint32_t) c->n_comms;
        memcpy((void *) ro->pids, c->pids, sizeof(c->pids));
        memcpy((void *) ro->tids, c->tids, sizeof(c->tids));
        memcpy((void *) ro->comms, c->comms, sizeof(c->comms));
        ro->cgroup_id = cgroup_id;
        ro->with_preempted = c->with_preempted;
        ro->wakeup_bytes = (uint64_t) c->ring_buffer_kb * 1024u / 4u;
        /* Off-CPU records come as fast as tasks switch: those keep the
         * check. On-CPU alone, at most frequency x CPUs records a second:
         * when four drain periods of them fit the ring, none is needed. */
        long n_cpus = sysconf(_SC_NPROCESSORS_CONF);
        uint64_t per_period = (uint64_t) c->frequency * (uint64_t) (n_cpus > 0 ? n_cpus : 1) *
                              sizeof(struct bpfstack_record) * c->drain_period_ms / 1000u;
        ro->on_cpu_wakeups = c->off_cpu || 4 * per_period >= (uint64_t) c->ring_buffer_kb * 1024u;
        bool walk = c->walk_tables && c->user_frames;
        ro->walk_user = walk;
        ro->max_depth = c->max_depth;
        bool py = c->python_frames && c->user_frames;
        ro->want_python = py;
        if ((r = bpf_map__set_max_entries(s->skel->maps.unwind_rows, walk ? c->unwind_rows : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.unwind_pages, walk ? UNWIND_PAGES(c) : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.unwind_procs, walk ? c->unwind_procs : 1)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.out_ustack, (walk || py) && c->off_cpu ? OUT_USTACKS : 1)) <
                    0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.py_procs, py ? c->unwind_procs : 1)) < 0)
                return r;
        (void) bpf_program__set_autoload(s->skel->progs.on_exec, walk || py);
        (void) bpf_program__set_autoload(s->skel->progs.on_exit, walk || py);
        if ((r = bpf_map__set_value_size(s->skel->maps.stacks, c->max_depth * sizeof(uint64_t))) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.stacks, c->stack_map_entries)) < 0 ||
            (r = bpf_map__set_max_entries(s->skel->maps.records, c->ring_buffer_kb * 1024u)) < 0)
                return r;
        (void) bpf_program__set_autoload(s->skel->progs.on_cpu, c->on_cpu);
        (void) bpf_program__set_autoload(s->skel->progs.switch_btf, c->off_cpu && btf_tp);
        (void) bpf_program__set_autoload(s->skel->progs.switch_raw, c->off_cpu && !btf_tp);
        return bpfstack__load(s->skel);
}

/* The unwind tables' cache: under the service's cache directory
 * (CacheDirectory= sets $CACHE_DIRECTORY, its first entry), or none. */
static void cache_dir(char *buf, size_t size) {
        const char *d = getenv("CACHE_DIRECTORY");
        buf[0] = 0;
        if (!d || d[0] != '/')
                return;
        size_t len = strcspn(d, ":");
        if ((size_t) snprintf(buf, size, "%.*s/" UNWIND_CACHE_SUBDIR, (int) len, d) >= size)
                buf[0] = 0;
}

static int setup(struct bpfstack_session *s) {
        struct bpfstack_plugin *pl = s->pl;
        const struct bpfstack_config *c = &s->cfg;
        unsigned long long id = (unsigned long long) s->inst.id;
        int r = probe(s);
        if (r < 0)
                return r;

        uint64_t cgroup_id = 0;
        if (c->cgroup[0]) {
                struct stat st;
                if (stat(c->cgroup, &st) < 0 || !S_ISDIR(st.st_mode)) {
                        plugin_report(pl, "linux.bpf_stack", id, "bpf_stack_config.filter",
                                      "cgroup=%s: not a cgroup directory", c->cgroup);
                        return -EINVAL;
                }
                cgroup_id = st.st_ino; /* cgroup v2: the directory's inode is the cgroup id */
        }

        if ((r = proc_table_new(NULL, &s->procs)) < 0 || (r = elf_cache_new(NULL, &s->elves)) < 0)
                return r;
        proc_table_set_free_userdata(s->procs, bpfstack_py_proc_free);
        s->sym = (struct symbolizer){.procs = s->procs, .elves = s->elves};
        if (c->user_frames && (r = perf_notes_new(CLOCK_BOOTTIME, NOTES_RING_PAGES, &s->notes)) < 0)
                plugin_log(pl, TRACED_LOG_WARNING,
                           "linux.bpf_stack instance %llu: no notes of execs and mmaps from the kernel (%s): the "
                           "frames of processes that exit before their samples are read stay unnamed",
                           id, strerror(-r));
        /* With the notes on, every process there is now: known even if
         * it is gone before its first sample is read. */
        if (s->notes && c->n_pids == 0 && c->n_tids == 0 && !c->cgroup[0])
                (void) proc_table_scan(s->procs, PROC_SCAN_MAX);
        if (c->walk_tables && c->user_frames) {
                /* Before the programs load (the verifier may take a
                 * second): the files of the processes running now are
                 * compiled meanwhile. */
                cache_dir(s->cache_dir, sizeof(s->cache_dir));
                r = unwind_tables_new(c->unwind_rows, &s->sym, s->cache_dir[0] ? s->cache_dir : NULL, &s->tables);
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_ERR, "linux.bpf_stack instance %llu: unwind tables: %s", id,
                                   strerror(-r));
                        return r;
                }
                bpfstack_prewarm(s);
        }

        /* BTF tracepoint first; when the kernel refuses it, the raw one. */
        bool btf_tp = c->off_cpu;
        r = open_load(s, cgroup_id, btf_tp);
        if (r < 0 && btf_tp) {
                plugin_log(pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: tp_btf/sched_switch refused (%s), using the raw "
                           "tracepoint",
                           id, strerror(-r));
                btf_tp = false;
                r = open_load(s, cgroup_id, false);
        }
        if (r < 0) {
                plugin_log(pl, TRACED_LOG_ERR,
                           "linux.bpf_stack instance %llu: loading the BPF programs failed: %s (the verifier's "
                           "log is above)",
                           id, strerror(-r));
                return r;
        }

        s->seen_max = 1;
        while (s->seen_max < c->stack_map_entries)
                s->seen_max *= 2;
        /* Without it every record is symbolized: slower, not wrong. */
        s->cs_cache = calloc(CS_CACHE_SIZE, sizeof(*s->cs_cache));
        if (!(s->stack_buf = calloc(c->max_depth, sizeof(uint64_t))))
                return -ENOMEM;
        if (c->kernel_frames && (r = kernel_names_new(&s->knames)) < 0) {
                plugin_log(pl, TRACED_LOG_DEBUG,
                           "linux.bpf_stack: kernel frames named from /proc/kallsyms read whole: the BPF program "
                           "that names them on demand did not load: %s",
                           strerror(-r));
                if ((r = ksyms_load_proc(&s->ksyms)) < 0)
                        plugin_log(pl, TRACED_LOG_WARNING,
                                   "linux.bpf_stack: kernel frames stay unnamed: /proc/kallsyms: %s", strerror(-r));
        }
        if ((r = intern_writer_new(&s->on.iw)) < 0 || (r = intern_writer_new(&s->off.iw)) < 0)
                return r;
        s->sym.ksyms = s->ksyms;
        if (s->knames) {
                s->sym.kernel_name = kernel_names_lookup;
                s->sym.kernel_name_userdata = s->knames;
        }
        if (s->tables) {
                r = unwind_tables_map(s->tables, bpf_map__fd(s->skel->maps.unwind_rows),
                                      bpf_map__fd(s->skel->maps.unwind_pages), UNWIND_PAGES(c),
                                      bpf_map__fd(s->skel->maps.unwind_procs));
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_ERR, "linux.bpf_stack instance %llu: mapping the unwind tables: %s",
                                   id, strerror(-r));
                        return r;
                }
        }
        if (s->tables || (c->python_frames && c->user_frames)) {
                if (!(s->exec_link = bpf_program__attach(s->skel->progs.on_exec)) ||
                    !(s->exit_link = bpf_program__attach(s->skel->progs.on_exit))) {
                        r = -errno;
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu: attaching to sched_process_exec/exit: %s", id,
                                   strerror(-r));
                        return r;
                }
        }
        /* The CPython processes running now get their entries before
         * their first samples. */
        if (c->python_frames && c->user_frames)
                bpfstack_py_scan(s);

        /* Timebases: what each sequence's samples count. */
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        PerfEvents_Timebase tb;
        PerfEvents_Tracepoint tp;
        PerfEvents_Timebase_init(&tb, pb_buf_stream(&b));
        PerfEvents_Timebase_set_frequency(&tb, c->frequency);
        PerfEvents_Timebase_set_counter(&tb, PerfEvents_SW_CPU_CLOCK);
        PerfEvents_Timebase_set_name(&tb, "linux.bpf_stack on-CPU");
        r = pb_buf_error(&b);
        if (r == 0)
                r = bpfstack_seq_defaults(&s->on, pb_buf_data(&b), pb_buf_len(&b));
        pb_buf_reset(&b);
        PerfEvents_Timebase_init(&tb, pb_buf_stream(&b));
        PerfEvents_Timebase_set_period(&tb, 1);
        PerfEvents_Timebase_begin_tracepoint(&tb, &tp);
        PerfEvents_Tracepoint_set_name(&tp, "sched/sched_switch");
        PerfEvents_Timebase_end_tracepoint(&tb, &tp);
        PerfEvents_Timebase_set_name(&tb, "linux.bpf_stack off-CPU (timebase_count: ns blocked)");
        if (r == 0)
                r = traced_pb_msg_finish(&tb.msg);
        if (r == 0)
                r = bpfstack_seq_defaults(&s->off, pb_buf_data(&b), pb_buf_len(&b));
        if (r < 0)
                return r;
        if ((r = pl->api->new_writer(pl->host, s->inst.id, &s->on.writer)) < 0 ||
            (r = pl->api->new_writer(pl->host, s->inst.id, &s->off.writer)) < 0 ||
            ((s->tables || c->python_frames) &&
             (r = pl->api->new_writer(pl->host, s->inst.id, &s->counters_writer)) < 0))
                return r;
        /* Track uuids of this instance: distinct from other instances'. */
        s->counters_uuid = (s->inst.id * 0x9E3779B97F4A7C15u) & ~(uint64_t) 0xff;

        s->rb = ring_buffer__new(bpf_map__fd(s->skel->maps.records), bpfstack_on_record, s, NULL);
        if (!s->rb)
                return -errno;
        if ((r = pl->api->add_fd(pl->host, ring_buffer__epoll_fd(s->rb), EPOLLIN, bpfstack_on_ring, s, &s->rb_src)) <
                    0 ||
            (r = pl->api->add_timer(pl->host, c->drain_period_ms, bpfstack_on_timer, s, &s->timer)) < 0 ||
            (s->tables &&
             (r = pl->api->add_fd(pl->host, unwind_tables_fd(s->tables), EPOLLIN, bpfstack_on_tables, s,
                                  &s->tables_src)) < 0) ||
            (s->notes && (r = pl->api->add_fd(pl->host, perf_notes_fd(s->notes), EPOLLIN, bpfstack_on_notes, s,
                                              &s->notes_src)) < 0))
                return r;

        if (c->off_cpu) {
                struct bpf_program *prog = btf_tp ? s->skel->progs.switch_btf : s->skel->progs.switch_raw;
                s->switch_link = bpf_program__attach(prog);
                if (!s->switch_link) {
                        r = -errno;
                        plugin_log(pl, TRACED_LOG_ERR,
                                   "linux.bpf_stack instance %llu: attaching to sched_switch "
                                   "failed: %s",
                                   id, strerror(-r));
                        return r;
                }
        }
        if (c->on_cpu) {
                int ncpu = libbpf_num_possible_cpus();
                if (ncpu <= 0)
                        return ncpu < 0 ? ncpu : -ENODEV;
                s->n_possible = ncpu < MAX_CPUS ? (uint32_t) ncpu : MAX_CPUS;
                if ((r = cpu_hotplug_init(&s->hotplug, s->n_possible, &bpfstack_hotplug_ops, s)) < 0)
                        return r;
                for (uint32_t cpu = 0; cpu < s->n_possible; cpu++) {
                        r = bpfstack_open_cpu(s, cpu);
                        cpu_hotplug_set(&s->hotplug, cpu, cpu, s->perf_fds[cpu]);
                        if (r == -ENODEV)
                                continue; /* opened when it comes online */
                        if (r < 0) {
                                plugin_log(pl, TRACED_LOG_ERR,
                                           "linux.bpf_stack instance %llu: sampling CPU %u (cpu-clock event with "
                                           "the on-CPU program): %s",
                                           id, cpu, strerror(-r));
                                return r;
                        }
                }
        }
        if (s->tables && (r = bpfstack_warmup_start(s)) < 0)
                return r;
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.bpf_stack instance %llu: on-CPU %s (%u Hz, %zu CPUs), off-CPU %s (%s), stacks:%s%s, "
                   "depth %u, user stacks by %s%s%s",
                   id, c->on_cpu ? "on" : "off", c->frequency, s->n_cpus, c->off_cpu ? "on" : "off",
                   btf_tp ? "tp_btf" : "raw tracepoint", c->kernel_frames ? " kernel" : "",
                   c->user_frames ? " user" : "", c->max_depth, s->tables ? "unwind tables" : "frame pointers",
                   !s->tables ? "" : s->cache_dir[0] ? ", cached in " : " (not cached: no $CACHE_DIRECTORY)",
                   s->cache_dir);
        return 0;
}

int bpfstack_session_start(struct bpfstack_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        char err[256];
        struct bpfstack_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->inst.id = instance_id;
        for (size_t k = 0; k < MAX_CPUS; k++)
                s->perf_fds[k] = -EBADF;
        int r = bpfstack_config_parse(config, size, &s->cfg, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        plugin_report_parsed(pl, "linux.bpf_stack", instance_id, "bpf_stack_config", err);
                session_free(s);
                return r;
        }
        r = setup(s);
        if (r < 0) {
                session_free(s);
                return r;
        }
        plugin_instance_add(&pl->sessions, &s->inst);
        return 0;
}

/* The list holds struct plugin_instance, each the first member of a session. */
static struct bpfstack_session *session_of(struct plugin_instance *i) {
        return (struct bpfstack_session *) i;
}

void bpfstack_session_flush(struct bpfstack_plugin *pl, uint64_t id) {
        struct bpfstack_session *s = session_of(plugin_instance_find(pl->sessions, id));
        if (s)
                bpfstack_drain(s, false);
}

void bpfstack_session_clear(struct bpfstack_plugin *pl, uint64_t id) {
        struct bpfstack_session *s = session_of(plugin_instance_find(pl->sessions, id));
        if (!s)
                return;
        bpfstack_drain(s, false);
        bpfstack_clear_interned(s);
}

static void stop_session(struct bpfstack_session *s) {
        bpf_link__destroy(s->switch_link);
        s->switch_link = NULL;
        bpf_link__destroy(s->exec_link);
        s->exec_link = NULL;
        bpf_link__destroy(s->exit_link);
        s->exit_link = NULL;
        for (size_t k = 0; k < s->n_possible; k++) {
                bpf_link__destroy(s->perf_links[k]);
                s->perf_links[k] = NULL;
        }
        bpfstack_drain(s, false);
        bpfstack_write_counters(s, true);
        if (s->knames) {
                struct kernel_names_stats st;
                kernel_names_stats(s->knames, &st);
                plugin_log(s->pl, TRACED_LOG_DEBUG,
                           "linux.bpf_stack instance %llu: kernel addresses named on demand: %llu by BPF in %llu "
                           "runs, %llu from /proc/kallsyms, %llu unnamed",
                           (unsigned long long) s->inst.id, (unsigned long long) st.named,
                           (unsigned long long) st.runs, (unsigned long long) st.kallsyms,
                           (unsigned long long) st.unnamed);
        }
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "linux.bpf_stack instance %llu stopped: %llu on-CPU samples, %llu off-CPU samples "
                   "(%llu ms blocked), %llu records lost in the ring buffer, %llu stacks lost to map collisions, "
                   "%llu stack errors, %llu switch-outs not remembered, %llu stacks gone before lookup, %llu "
                   "samples of processes gone before symbolization, %llu bad records, %llu packets dropped with "
                   "shared memory full; %llu of %llu callstacks from the cache",
                   (unsigned long long) s->inst.id, (unsigned long long) s->samples_on,
                   (unsigned long long) s->samples_off, (unsigned long long) (s->blocked_ns / 1000000),
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_RING_LOST],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_STACK_COLLISION],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_STACK_ERROR],
                   (unsigned long long) s->counters_seen[BPFSTACK_CNT_START_FULL],
                   (unsigned long long) s->stacks_missing, (unsigned long long) s->procs_gone,
                   (unsigned long long) s->bad_records, (unsigned long long) s->packets_dropped,
                   (unsigned long long) s->cs_hits,
                   (unsigned long long) (s->cs_hits + s->cs_misses));
        if (s->cfg.python_frames && s->cfg.user_frames) {
                const uint64_t *y = s->py_stops;
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: CPython: %llu processes with Python frames, %llu with a "
                           "layout not known (stacks native), %llu refused by the map; samples: %llu walked whole, "
                           "%llu at %u frames, %llu of threads not running Python, %llu unreadable; %llu stacks "
                           "merged, %llu code objects read (%llu unreadable)",
                           (unsigned long long) s->inst.id, (unsigned long long) s->py_procs,
                           (unsigned long long) s->py_unknown, (unsigned long long) s->py_map_full,
                           (unsigned long long) y[BPFSTACK_PY_END], (unsigned long long) y[BPFSTACK_PY_DEPTH],
                           BPFSTACK_MAX_PYFRAMES, (unsigned long long) y[BPFSTACK_PY_NO_THREAD],
                           (unsigned long long) y[BPFSTACK_PY_FAULT], (unsigned long long) s->py_samples,
                           (unsigned long long) s->py_codes_read, (unsigned long long) s->py_code_unreadable);
        }
        if (s->tables) {
                struct unwind_stats u;
                unwind_tables_stats(s->tables, &u);
                const uint64_t *w = s->stops;
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: user stacks walked by unwind tables: %llu whole, %llu "
                           "at max_depth, %llu by frame pointers (tables not loaded yet), stopped at %llu pcs "
                           "outside mapped files with tables, %llu without unwind info, %llu unsupported rules, "
                           "%llu unreadable frames, %llu bad frames; %llu walked stacks not kept at switch-out; "
                           "tables: %llu images (%llu refused), %llu of %llu rows (%llu KiB), %llu process "
                           "entries written (%llu refused, %llu mappings left out, %llu before all their files were "
                           "compiled), %llu resets, %llu files compiled in "
                           "%llu ms (longest %llu ms, off the event loop), %llu read from the cache in %llu ms "
                           "(%llu not stored)",
                           (unsigned long long) s->inst.id, (unsigned long long) w[BPFSTACK_STOP_END],
                           (unsigned long long) w[BPFSTACK_STOP_DEPTH], (unsigned long long) w[BPFSTACK_STOP_NO_TABLES],
                           (unsigned long long) w[BPFSTACK_STOP_NO_MAPPING],
                           (unsigned long long) w[BPFSTACK_STOP_NO_CFI],
                           (unsigned long long) w[BPFSTACK_STOP_UNSUPPORTED],
                           (unsigned long long) w[BPFSTACK_STOP_READ_FAULT],
                           (unsigned long long) w[BPFSTACK_STOP_BAD_FRAME],
                           (unsigned long long) s->counters_seen[BPFSTACK_CNT_USTACK_FULL],
                           (unsigned long long) u.images, (unsigned long long) u.images_refused,
                           (unsigned long long) u.rows, (unsigned long long) u.rows_max,
                           (unsigned long long) (u.rows * sizeof(struct bpfstack_row) / 1024),
                           (unsigned long long) u.procs_loaded, (unsigned long long) u.procs_failed,
                           (unsigned long long) u.maps_dropped, (unsigned long long) u.procs_partial,
                           (unsigned long long) u.resets, (unsigned long long) u.images_compiled,
                           (unsigned long long) (u.compile_us / 1000), (unsigned long long) (u.compile_max_us / 1000),
                           (unsigned long long) u.images_cached, (unsigned long long) (u.cache_us / 1000),
                           (unsigned long long) u.cache_errors);
        }
}

void bpfstack_session_stop(struct bpfstack_plugin *pl, uint64_t id) {
        struct bpfstack_session *s = session_of(plugin_instance_take(&pl->sessions, id));
        if (s) {
                stop_session(s);
                struct traced_writer *ws[] = {s->on.writer, s->off.writer, s->counters_writer};
                for (size_t k = 0; k < 3; k++)
                        if (ws[k])
                                (void) pl->api->flush_writer(ws[k]);
        }
        (void) pl->api->notify_stopped(pl->host, id);
        /* Unloading the programs, closing the events and freeing the
         * tables and symbol caches take a while on a busy machine. */
        if (s)
                session_free(s);
}

void bpfstack_sessions_free(struct bpfstack_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->sessions))) {
                stop_session(session_of(i));
                session_free(session_of(i));
        }
}
