/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.perf sessions: the config into perf_event attributes, one event
 * and ring per CPU, the loop's sources and the worker thread; a flush
 * waits for the worker to have written what the rings held, a stop for it
 * to have written everything (see perf-session.h for the whole). */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/macro.h"
#include "basic/prefault.h"
#include "perf-session.h"
#include "profiling/cpus.h"
#include "profiling/intern.h"
#include "profiling/ksyms.h"
#include "profiling/procmaps.h"
#include "profiling/unwind.h"

#define FLUSH_WAIT_MS 5000
/* At stop, what the worker has not unwound after this long is written as
 * skipped (the plugin host's loop waits for the worker meanwhile). */
#define STOP_UNWIND_MS 3000

/* ---- setup ---- */

static int tracepoint_id(const char *name, uint64_t *ret) {
        static const char *const roots[] = { "/sys/kernel/tracing", "/sys/kernel/debug/tracing" };
        char group[128], event[128], path[512];
        if (sscanf(name, "%127[^:]:%127s", group, event) != 2)
                return -EINVAL;
        for (size_t k = 0; k < 2; k++) {
                snprintf(path, sizeof(path), "%s/events/%s/%s/id", roots[k], group, event);
                FILE *f = fopen(path, "re");
                if (!f)
                        continue;
                unsigned long long id;
                int ok = fscanf(f, "%llu", &id);
                fclose(f);
                if (ok == 1) {
                        *ret = id;
                        return 0;
                }
        }
        return -ENOENT;
}

int perf_open_ring(struct perf_session *s, struct perf_event_attr *attr, struct cpu_ring *ring) {
        long page = sysconf(_SC_PAGESIZE);
        ring->fd = (int) syscall(SYS_perf_event_open, attr, -1, ring->cpu, -1, PERF_FLAG_FD_CLOEXEC);
        if (ring->fd < 0)
                return negative_errno();
        if (s->cfg.tracepoint_filter && ioctl(ring->fd, PERF_EVENT_IOC_SET_FILTER, s->cfg.tracepoint_filter) < 0)
                return -EINVAL;
        ring->mmap_size = (size_t) page * (1 + s->cfg.ring_buffer_pages);
        void *p = mmap(NULL, ring->mmap_size, PROT_READ | PROT_WRITE, MAP_SHARED, ring->fd, 0);
        if (p == MAP_FAILED) {
                ring->mmap_size = 0;
                return negative_errno();
        }
        ring->base = p;
        struct perf_event_mmap_page *mp = p;
        uint64_t off = mp->data_offset ? mp->data_offset : (uint64_t) page;
        ring->data_size = mp->data_size ? mp->data_size : (uint64_t) page * s->cfg.ring_buffer_pages;
        ring->data = ring->base + off;
        if (s->py_bpf) {
                int r = perf_pybpf_attach(s->py_bpf, attr, ring->cpu, ring->fd, &ring->py_fd, &ring->py_id);
                bool any = false;
                for (size_t k = 0; k < s->n_rings && !any; k++)
                        any = s->rings[k].py_fd >= 0;
                if (r < 0 && !any && !s->worker_started) {
                        /* Refused from the first CPU on (a kernel without
                         * BPF output events or programs on perf events):
                         * the frames are read as the rings are drained.
                         * Only as the session starts: the worker uses the
                         * program's table once it runs. */
                        plugin_log(s->pl, TRACED_LOG_INFO,
                                   "linux.perf instance %llu: the Python frames are read as the rings are drained, "
                                   "not walked at the sample: its BPF program did not attach (%s)",
                                   (unsigned long long) s->inst.id, strerror(-r));
                        perf_pybpf_free(s->py_bpf);
                        s->py_bpf = NULL;
                } else if (r < 0)
                        /* This CPU's samples then stay native, counted as
                         * left so: the others go on. */
                        plugin_log(s->pl, TRACED_LOG_WARNING,
                                   "linux.perf instance %llu: no BPF walk of the Python frames on CPU %d: %s",
                                   (unsigned long long) s->inst.id, ring->cpu, strerror(-r));
        }
        return 0;
}

void perf_close_ring(struct perf_session *s, struct cpu_ring *ring) {
        if (ring->src)
                s->pl->api->remove_source(s->pl->host, ring->src);
        ring->src = NULL;
        if (ring->base)
                munmap(ring->base, ring->mmap_size);
        ring->base = ring->data = NULL;
        ring->mmap_size = 0;
        if (ring->py_fd >= 0)
                perf_pybpf_detach(s->py_bpf, ring->cpu, ring->py_fd);
        ring->py_fd = -EBADF;
        ring->py_id = 0;
        if (ring->py_pending)
                ring->py_pending->valid = false;
        ring->fd = safe_close(ring->fd);
}

/* ---- sessions ---- */

static void session_free(struct perf_session *s) {
        for (size_t k = 0; k < s->n_rings; k++) {
                perf_close_ring(s, &s->rings[k]);
                free(s->rings[k].scratch);
                free(s->rings[k].py_pending);
        }
        perf_pybpf_free(s->py_bpf);
        cpu_hotplug_done(&s->hotplug);
        if (s->timer)
                s->pl->api->remove_source(s->pl->host, s->timer);
        if (s->py_timer)
                s->pl->api->remove_source(s->pl->host, s->py_timer);
        if (s->writer)
                s->pl->api->free_writer(s->writer);
        if (s->queue_ready)
                perf_queue_done(&s->q);
        free(s->rings);
        free(s->scope);
        free(s->frames);
        free(s->track_epoch);
        unwinder_free(s->unw);
        perf_notes_free(s->notes);
        perf_py_free(s);
        proc_table_free(s->procs);
        task_names_done(&s->names);
        elf_cache_free(s->elves);
        ksyms_free(s->ksyms);
        kernel_names_free(s->ksym);
        intern_writer_free(s->iw);
        perf_config_done(&s->cfg);
        pthread_mutex_destroy(&s->mu);
        pthread_mutex_destroy(&s->py_mu);
        pthread_cond_destroy(&s->done_cv);
        free(s);
}

static int setup(struct perf_session *s) {
        struct perf_plugin *pl = s->pl;
        struct perf_config *c = &s->cfg;
        struct perf_event_attr *a = &c->attr;
        int r;

        a->size = sizeof(*a);
        if (c->tracepoint[0]) {
                uint64_t id = 0;
                r = tracepoint_id(c->tracepoint, &id);
                a->config = id;
                if (r < 0) {
                        plugin_log(pl, TRACED_LOG_ERR, "linux.perf: timebase.tracepoint: %s not found in tracefs",
                                   c->tracepoint);
                        return r;
                }
        }
        a->sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD;
        if (c->callstacks) {
                if (c->kernel_frames || c->user_frames == PERF_UNWIND_FP)
                        a->sample_type |= PERF_SAMPLE_CALLCHAIN;
                a->exclude_callchain_kernel = !c->kernel_frames;
                a->exclude_callchain_user = c->user_frames != PERF_UNWIND_FP;
                if (c->user_frames == PERF_UNWIND_DWARF) {
                        a->sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
                        a->sample_regs_user = unwind_perf_regs_mask();
                        a->sample_stack_user = PERF_STACK_COPY_BYTES;
                }
                /* The processes' maps: from notes of their own (see
                 * perf-session.h), else from these rings. The kernel notes
                 * mappings only while some event asks with mmap (mmap2
                 * alone gives the record's layout, not the records): both,
                 * as perf record sets them. */
                r = perf_notes_new(a->clockid, PERF_NOTES_RING_PAGES, &s->notes);
                if (r < 0)
                        plugin_log(pl, TRACED_LOG_WARNING,
                                   "linux.perf: no rings of their own for the notes of execs and mmaps (%s): "
                                   "a full ring loses them with the samples",
                                   strerror(-r));
                r = 0;
                a->mmap = a->mmap2 = a->task = !s->notes;
        }
        /* Renames and execs, to name the samples by the comm they had
         * (the worker writes them into the trace). */
        a->comm = 1;
        a->comm_exec = 1;
        a->sample_id_all = 1;
        a->read_format |= CPU_HOTPLUG_READ_FORMAT;
        /* The Python frames walked by BPF as each sample is taken: its
         * records share the sampling rings, every record of the two
         * events then starting with its event's id. */
        if (c->python_frames && c->callstacks && c->user_frames != PERF_UNWIND_SKIP) {
                r = perf_pybpf_new(pl, &s->py_bpf);
                if (r >= 0) {
                        a->sample_type |= PERF_SAMPLE_IDENTIFIER;
                        s->py_layout = (struct perf_layout){.sample_type = PERF_PYBPF_SAMPLE_TYPE};
                } else if (r != -EOPNOTSUPP)
                        plugin_log(pl, TRACED_LOG_INFO,
                                   "linux.perf instance %llu: the Python frames are read as the rings are drained, "
                                   "not walked at the sample: its BPF program did not load (%s)",
                                   (unsigned long long) s->inst.id, strerror(-r));
                r = 0;
        }
        a->disabled = 1;
        a->watermark = 1;
        /* Woken with half the ring filled: room for the other half while
         * the loop gets to it (32 DWARF samples of 64 KiB at the default
         * 4 MiB, 32 ms at 999 Hz), and each wake-up of the loop and then of
         * the worker (some 20 us of CPU for the two on a VM) is shared by
         * twice the samples a quarter gave. */
        a->wakeup_watermark = (uint32_t) ((size_t) sysconf(_SC_PAGESIZE) * c->ring_buffer_pages / 2);
        s->layout = (struct perf_layout) { .sample_type = a->sample_type, .sample_id_all = true,
                                           .n_user_regs = (uint32_t) __builtin_popcountll(a->sample_regs_user) };

        uint32_t cpus[MAX_CPUS];
        size_t n_cpus = 0;
        if (c->n_cpus) {
                n_cpus = MIN(c->n_cpus, (size_t) MAX_CPUS);
                memcpy(cpus, c->cpus, n_cpus * sizeof(*cpus));
        } else if ((r = cpus_online(cpus, MAX_CPUS, &n_cpus)) < 0) {
                plugin_log(pl, TRACED_LOG_ERR, "linux.perf: cannot list the online CPUs: %s", strerror(-r));
                return r;
        }
        s->rings = calloc(n_cpus, sizeof(*s->rings));
        /* Both are read at random before they are written: their pages are
         * mapped for writing now, or each would fault twice (basic/prefault.h). */
        s->scope = calloc_prefaulted(SCOPE_SLOTS, sizeof(*s->scope));
        s->frames = calloc_prefaulted(FRAME_CACHE_SLOTS, sizeof(*s->frames));
        s->track_epoch = calloc((size_t) _COUNTER_KIND_MAX * MAX_CPUS, sizeof(*s->track_epoch));
        s->epoch = 1;
        if (!s->rings || !s->scope || !s->frames || !s->track_epoch)
                return -ENOMEM;
        for (size_t k = 0; k < n_cpus; k++) {
                struct cpu_ring *ring = &s->rings[s->n_rings];
                *ring = (struct cpu_ring) { .s = s, .cpu = (int) cpus[k], .fd = -EBADF, .py_fd = -EBADF };
                s->n_rings++;
                r = perf_open_ring(s, a, ring);
                if (r < 0) {
                        perf_close_ring(s, ring);
                        s->n_rings--;
                        if (c->ignore_open_failure) {
                                plugin_log(pl, TRACED_LOG_WARNING, "linux.perf: CPU %u skipped: %s", cpus[k],
                                           strerror(-r));
                                continue;
                        }
                        plugin_log(pl, TRACED_LOG_ERR, "linux.perf: perf_event_open on CPU %u failed: %s%s", cpus[k],
                                   strerror(-r),
                                   r == -ENOENT || r == -EOPNOTSUPP ? " (no such event or PMU on this machine)" : "");
                        return r;
                }
        }
        if (s->n_rings == 0) {
                plugin_log(pl, TRACED_LOG_ERR, "linux.perf: no CPU to sample");
                return -ENODEV;
        }
        if ((r = cpu_hotplug_init(&s->hotplug, s->n_rings, &perf_hotplug_ops, s)) < 0)
                return r;
        for (size_t k = 0; k < s->n_rings; k++)
                cpu_hotplug_set(&s->hotplug, k, (uint32_t) s->rings[k].cpu, s->rings[k].fd);
        if (c->kernel_frames && (r = kernel_names_new(&s->ksym)) < 0) {
                plugin_log(pl, TRACED_LOG_DEBUG,
                           "linux.perf: kernel frames named from /proc/kallsyms read whole: the BPF program that "
                           "names them on demand did not load: %s",
                           strerror(-r));
                r = ksyms_load_proc(&s->ksyms);
                if (r < 0)
                        plugin_log(pl, TRACED_LOG_WARNING, "linux.perf: kernel frames stay unnamed: /proc/kallsyms: %s",
                                   strerror(-r));
        }
        if ((r = proc_table_new(NULL, &s->procs)) < 0 || (r = elf_cache_new(NULL, &s->elves)) < 0 ||
            (r = intern_writer_new(&s->iw)) < 0)
                return r;
        s->sym = (struct symbolizer) { .procs = s->procs, .elves = s->elves, .ksyms = s->ksyms };
        if (s->ksym) {
                s->sym.kernel_name = kernel_names_lookup;
                s->sym.kernel_name_userdata = s->ksym;
        }
        if ((r = unwinder_new(&s->sym, &s->unw)) < 0)
                return r;
        s->additional_left = c->additional_cmdline_count;
        if ((r = pl->api->new_writer(pl->host, s->inst.id, &s->writer)) < 0)
                return r;
        for (size_t k = 0; k < s->n_rings; k++) {
                r = pl->api->add_fd(pl->host, s->rings[k].fd, EPOLLIN, perf_on_ring, &s->rings[k], &s->rings[k].src);
                if (r < 0)
                        return r;
        }
        if ((r = pl->api->add_timer(pl->host, c->read_period_ms, perf_on_timer, s, &s->timer)) < 0)
                return r;
        if ((r = -pthread_create(&s->worker, NULL, perf_worker_main, s)) < 0)
                return r;
        s->worker_started = true;
        for (size_t k = 0; k < s->n_rings; k++)
                (void) ioctl(s->rings[k].fd, PERF_EVENT_IOC_ENABLE, 0);
        return 0;
}

int perf_session_start(struct perf_plugin *pl, uint64_t instance_id, const uint8_t *config, size_t size) {
        char err[256];
        struct perf_session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        s->pl = pl;
        s->inst.id = instance_id;
        pthread_mutex_init(&s->mu, NULL);
        pthread_mutex_init(&s->py_mu, NULL);
        pthread_cond_init(&s->done_cv, NULL);
        int r = perf_config_parse(config, size, &s->cfg, err, sizeof(err));
        if (r < 0) {
                if (r == -EINVAL)
                        plugin_report_parsed(pl, "linux.perf", instance_id, "perf_event_config", err);
                session_free(s);
                return r;
        }
        r = perf_queue_init(&s->q, s->cfg.max_enqueued_bytes);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->queue_ready = true;
        if (s->cfg.callstacks && s->cfg.user_frames == PERF_UNWIND_DWARF) {
                r = perf_queue_use_arena(&s->q, (size_t) MIN((uint64_t) PERF_ARENA_BYTES,
                                                             s->cfg.max_enqueued_bytes + PERF_STACK_COPY_BYTES));
                if (r < 0)
                        plugin_log(pl, TRACED_LOG_DEBUG,
                                   "linux.perf instance %llu: the stack copies come from malloc: no ring for them (%s)",
                                   (unsigned long long) instance_id, strerror(-r));
        }
        r = setup(s);
        if (r < 0) {
                session_free(s);
                return r;
        }
        plugin_instance_add(&pl->sessions, &s->inst);
        plugin_log(pl, TRACED_LOG_INFO,
                   "linux.perf instance %llu: %zu CPUs, %s %llu, stacks: %s%s, %u pages per ring, read every %u ms",
                   (unsigned long long) instance_id, s->n_rings, s->cfg.attr.freq ? "frequency" : "period",
                   (unsigned long long) s->cfg.attr.sample_freq,
                   !s->cfg.callstacks                        ? "none"
                   : s->cfg.user_frames == PERF_UNWIND_DWARF ? "user (DWARF)"
                   : s->cfg.user_frames == PERF_UNWIND_FP    ? "user (frame pointers)"
                                                             : "no user",
                   s->cfg.kernel_frames ? " + kernel" : "", s->cfg.ring_buffer_pages, s->cfg.read_period_ms);
        return 0;
}

/* The list holds struct plugin_instance, each the first member of a session. */
static struct perf_session *session_of(struct plugin_instance *i) {
        return (struct perf_session *) i;
}

void perf_session_flush(struct perf_plugin *pl, uint64_t id) {
        struct perf_session *s = session_of(plugin_instance_find(pl->sessions, id));
        if (!s)
                return;
        perf_drain_all(s);
        struct perf_item *it = perf_item_new(PERF_ITEM_FLUSH, 0);
        if (!it)
                return;
        pthread_mutex_lock(&s->mu);
        uint64_t want = ++s->flush_asked;
        pthread_mutex_unlock(&s->mu);
        (void) perf_queue_push(&s->q, it); /* never refused */
        perf_queue_publish(&s->q);
        struct timespec until;
        clock_gettime(CLOCK_REALTIME, &until);
        until.tv_sec += FLUSH_WAIT_MS / 1000;
        pthread_mutex_lock(&s->mu);
        while (s->flush_done < want)
                if (pthread_cond_timedwait(&s->done_cv, &s->mu, &until) == ETIMEDOUT)
                        break;
        pthread_mutex_unlock(&s->mu);
}

void perf_session_clear(struct perf_plugin *pl, uint64_t id) {
        struct perf_session *s = session_of(plugin_instance_find(pl->sessions, id));
        if (s)
                atomic_fetch_add(&s->clears_asked, 1);
}

static void log_stopped(struct perf_session *s) {
        uint64_t by_rows = 0, by_libunwind = 0;
        if (s->unw)
                unwinder_counts(s->unw, &by_rows, &by_libunwind);
        int first_error = atomic_load(&s->first_write_error);
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "linux.perf instance %llu stopped: %llu samples, %llu unwound (%llu with unwind errors; "
                   "%llu stacks walked by compact CFI rows, %llu by libunwind), "
                   "%llu not in scope, %llu not unwound (queue full), %llu not unwound before the stop, "
                   "%llu dropped (queue at its %zu-item bound), "
                   "%llu records lost by the kernel, %llu throttles, %llu bad records, %llu CPUs gone offline, "
                   "%llu packets and %llu flushes refused by the writer%s%s%s; maps of %llu processes read at "
                   "the start",
                   (unsigned long long) s->inst.id, (unsigned long long) s->samples,
                   (unsigned long long) s->unwound, (unsigned long long) s->unwind_errors,
                   (unsigned long long) by_rows, (unsigned long long) by_libunwind,
                   (unsigned long long) s->skipped_scope, (unsigned long long) s->skipped_enqueue,
                   (unsigned long long) s->skipped_stop, (unsigned long long) s->dropped, s->q.max_items,
                   (unsigned long long) s->lost, (unsigned long long) s->throttles,
                   (unsigned long long) s->bad_records, (unsigned long long) s->hotplug.stops,
                   (unsigned long long) s->write_errors, (unsigned long long) s->flush_errors,
                   first_error ? " (first: " : "", first_error ? strerror(-first_error) : "", first_error ? ")" : "",
                   (unsigned long long) s->scanned);
        if (s->cfg.python_frames && (s->py_procs || s->py_unknown))
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.perf instance %llu: CPython: %llu processes with Python frames, %llu with a layout "
                           "not known; %llu samples with Python frames, left native: %llu the thread moved on, %llu "
                           "no thread state, %llu memory unreadable, %llu process looked at after the %s; %s %llu "
                           "reads of their memory",
                           (unsigned long long) s->inst.id, (unsigned long long) s->py_procs,
                           (unsigned long long) s->py_unknown, (unsigned long long) s->py_samples,
                           (unsigned long long) s->py_moved, (unsigned long long) s->py_no_thread,
                           (unsigned long long) s->py_unreadable, (unsigned long long) s->py_late,
                           s->py_bpf ? "sample" : "drain",
                           s->py_bpf ? "frames walked by BPF at the sample;" : "frames read at the drains;",
                           (unsigned long long) s->py_reads);
}

/* What the BPF walks of the Python frames cost, in the sampled threads'
 * time: counted by the kernel only while kernel.bpf_stats_enabled is set. */
static void log_bpf_cost(struct perf_session *s) {
        uint64_t ns = 0, runs = 0;
        if (!s->py_bpf || perf_pybpf_stats(s->py_bpf, &ns, &runs) < 0 || runs == 0)
                return;
        plugin_log(s->pl, TRACED_LOG_INFO,
                   "linux.perf instance %llu: the BPF walk of the Python frames ran %llu times for %.3f ms in all "
                   "(%.2f us each), %llu records",
                   (unsigned long long) s->inst.id, (unsigned long long) runs, (double) ns / 1e6,
                   (double) ns / 1e3 / (double) runs, (unsigned long long) s->py_bpf_records);
}

/* Processes the BPF program's table refused (full): their samples stayed
 * native, counted as looked at after the sample. */
static void log_bpf_refused(struct perf_session *s) {
        uint64_t n = atomic_load(&s->py_bpf_set_errors);
        if (s->py_bpf && n)
                plugin_log(s->pl, TRACED_LOG_WARNING,
                           "linux.perf instance %llu: the BPF walk's table of CPython processes refused %llu updates "
                           "(it holds 1024 processes): their samples stayed native",
                           (unsigned long long) s->inst.id, (unsigned long long) n);
}

/* How the kernel frames were named. */
static void log_ksym(struct perf_session *s) {
        struct kernel_names_stats st;
        if (!s->ksym)
                return;
        kernel_names_stats(s->ksym, &st);
        plugin_log(s->pl, TRACED_LOG_DEBUG,
                   "linux.perf instance %llu: kernel addresses named on demand: %llu by BPF in %llu runs, %llu from "
                   "/proc/kallsyms, %llu unnamed",
                   (unsigned long long) s->inst.id, (unsigned long long) st.named, (unsigned long long) st.runs,
                   (unsigned long long) st.kallsyms, (unsigned long long) st.unnamed);
}

static void stop_session(struct perf_session *s) {
        for (size_t k = 0; k < s->n_rings; k++)
                if (s->rings[k].fd >= 0)
                        (void) ioctl(s->rings[k].fd, PERF_EVENT_IOC_DISABLE, 0);
        /* The events are off: take all the rings hold, congested or not. */
        s->stopping = true;
        perf_drain_all(s);
        if (s->worker_started) {
                s->stop_deadline = now_ms() + STOP_UNWIND_MS;
                struct perf_item *it = perf_item_new(PERF_ITEM_STOP, 0);
                if (it) {
                        (void) perf_queue_push(&s->q, it); /* never refused */
                        perf_queue_publish(&s->q);
                        pthread_join(s->worker, NULL);
                }
                s->worker_started = false;
        }
        perf_py_log(s); /* what the worker met since the last read period */
        log_stopped(s);
        log_bpf_cost(s);
        log_bpf_refused(s);
        log_ksym(s);
}

void perf_session_stop(struct perf_plugin *pl, uint64_t id) {
        struct perf_session *s = session_of(plugin_instance_take(&pl->sessions, id));
        if (!s)
                return;
        stop_session(s);
        session_free(s);
}

void perf_sessions_free(struct perf_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->sessions))) {
                struct perf_session *s = session_of(i);
                stop_session(s);
                session_free(s);
        }
}
