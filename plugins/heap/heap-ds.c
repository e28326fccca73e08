/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "heap-ds.h"
#include "traced/pbzero/perfetto/trace/profiling/profile_packet.pbw.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

#define MAX_FRAMES 256u
/* A process's maps are read again (for a mapping made since, dlopen) at
 * most this often. */
#define RELOAD_NS 100000000ull

static uint64_t clock_ns(clockid_t id) {
        struct timespec ts;
        clock_gettime(id, &ts);
        return (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;
}

static struct heap_instance *find(struct heap_plugin *pl, uint64_t id) {
        return (struct heap_instance *) plugin_instance_find(pl->instances, id);
}

struct heap_instance *heap_instance_for(struct heap_plugin *pl, pid_t pid, const char *cmdline, size_t size,
                                        uint64_t started) {
        for (struct plugin_instance *i = pl->instances; i; i = i->next) {
                struct heap_instance *h = (struct heap_instance *) i;
                bool from_startup = started > h->start_ticks;
                if ((h->cfg.no_startup && from_startup) || (h->cfg.no_running && !from_startup))
                        continue;
                if (heap_config_targets(&h->cfg, pid, cmdline, size))
                        return h;
        }
        return NULL;
}

/* ---- reading the rings ---- */

/* A template for the stacks like this whole one, from the words its walk
 * read, when its walk reached the outermost frame. */
static void make_template(struct heap_client *c, const struct heap_record *rec, const struct unwind_input *in,
                          const struct unwind_stack_log *log, const uint64_t *ras, size_t n_ras, int err) {
        struct heap_template t;
        if (!c->templates || err != UNWIND_ERR_NONE || log->overflow || rec->depth == 0 ||
            rec->stack_size > rec->depth ||
            !heap_template_make(&t, log->offs, log->n, in->stack, rec->stack_size, rec->depth, ras, n_ras))
                return;
        if (heap_template_add(c->templates, &t) >= 0)
                c->templates_made++;
}

static void on_alloc(struct heap_client *c, const struct heap_record *rec, const uint8_t *payload, uint32_t size) {
        struct heap_instance *h = c->inst;
        struct heap_alloc_regs regs;
        size_t rest = size >= sizeof(*rec) + sizeof(regs) ? size - sizeof(*rec) - sizeof(regs) : 0;
        if (size < sizeof(*rec) + sizeof(regs) || (rec->type == HEAP_RECORD_ALLOC && rec->stack_size > rest)) {
                c->corrupted = true;
                return;
        }
        memcpy(&regs, payload + sizeof(*rec), sizeof(regs));
        const uint8_t *after = payload + sizeof(*rec) + sizeof(regs);
        struct unwind_input in = { .stack = after, .stack_size = rec->stack_size };
        memcpy(in.regs, regs.regs, sizeof(in.regs));
        /* A sparse sample: its template's words, at their offsets. */
        struct heap_sparse_head head = { 0 };
        uint64_t vals[HEAP_TEMPLATE_WORDS];
        struct unwind_sparse sparse = { 0 };
        if (rec->type == HEAP_RECORD_ALLOC_SPARSE) {
                const struct heap_template *t = NULL;
                if (rest >= sizeof(head))
                        memcpy(&head, after, sizeof(head));
                if (rest < sizeof(head) || !(t = heap_template_at(c->templates, head.slot, head.nwords)) ||
                    rest - sizeof(head) != (size_t) head.nwords * 8u || t->copy != rec->stack_size) {
                        c->corrupted = true;
                        return;
                }
                memcpy(vals, after + sizeof(head), (size_t) head.nwords * 8u);
                sparse = (struct unwind_sparse) { .offs = t->offs, .vals = vals, .n = head.nwords };
                in.stack = NULL;
                in.sparse = &sparse;
                c->sparse_samples++;
        }
        /* The words a walk of a whole copy read, for a template; of a
         * sparse one, only its misses. */
        uint32_t read_offs[HEAP_TEMPLATE_WORDS];
        const size_t cap = in.sparse ? 0 : HEAP_TEMPLATE_WORDS;
        struct unwind_stack_log log = { .offs = read_offs, .cap = cap };
        in.log = &log;
        uint64_t pcs[MAX_FRAMES];
        size_t n = 0;
        int err = UNWIND_ERR_MEMORY_INVALID;
        struct proc_info *p = proc_table_get(h->procs, c->pid);
        if (p && rec->stack_size > 0) {
                n = unwinder_dwarf(h->unw, p, &in, pcs, MAX_FRAMES, &err);
                uint64_t now = clock_ns(CLOCK_MONOTONIC);
                if (err == UNWIND_ERR_INVALID_MAP && now - c->last_reload_ns > RELOAD_NS) {
                        /* A library loaded since its maps were read. */
                        c->last_reload_ns = now;
                        c->reloads++;
                        proc_table_reload(h->procs, c->pid);
                        log = (struct unwind_stack_log) { .offs = read_offs, .cap = cap };
                        if ((p = proc_table_get(h->procs, c->pid)))
                                n = unwinder_dwarf(h->unw, p, &in, pcs, MAX_FRAMES, &err);
                }
        } else
                c->no_stack++;
        /* The hooks' own frames (the sampled pc is in them) come off; what
         * is left are return addresses: the call is the byte before. */
        size_t skip = 0;
        while (skip < n && pcs[skip] >= c->text_start && pcs[skip] < c->text_end)
                skip++;
        if (in.sparse) {
                /* The walk wanted a word the template lacks: the stack went
                 * another way than the one it was made from. What it found
                 * is as far as the words took it. */
                if (log.misses > 0) {
                        heap_template_kill(c->templates, head.slot);
                        c->templates_killed++;
                        if (err == UNWIND_ERR_NONE)
                                err = UNWIND_ERR_MEMORY_INVALID;
                }
        } else if (rec->type == HEAP_RECORD_ALLOC && n > skip)
                make_template(c, rec, &in, &log, pcs + skip, MIN(n - skip, (size_t) HEAP_TEMPLATE_GUARDS), err);
        for (size_t k = skip; k < n; k++)
                if (k > 0)
                        pcs[k]--;
        if (err != UNWIND_ERR_NONE)
                c->unwind_errors++;
        c->samples++;
        if (heap_callsites_alloc(&c->cs, rec->addr, pcs + skip, n - skip, err, rec->weight) < 0)
                c->corrupted = true; /* out of memory: the profile is short of it */
}

void heap_client_drain(struct heap_client *c) {
        if (!c->ring_mem || !c->inst || c->corrupted)
                return;
        uint64_t pos = c->read_pos;
        uint32_t size;
        int err;
        const uint8_t *e;
        while ((e = heap_ring_read(&c->ring, &pos, &size, &err))) {
                struct heap_record rec;
                if (size < sizeof(rec)) {
                        c->corrupted = true;
                        break;
                }
                memcpy(&rec, e, sizeof(rec));
                if (rec.type == HEAP_RECORD_ALLOC || rec.type == HEAP_RECORD_ALLOC_SPARSE)
                        on_alloc(c, &rec, e, size);
                else if (rec.type == HEAP_RECORD_FREE)
                        heap_callsites_free(&c->cs, rec.addr);
                else
                        c->corrupted = true;
                if (c->corrupted)
                        break;
        }
        if (err < 0)
                c->corrupted = true;
        if (c->corrupted)
                plugin_log(c->pl, TRACED_LOG_WARNING,
                           HEAP_DS_NAME ": process %d wrote a ring that does not read: its profile ends here",
                           (int) c->pid);
        c->read_pos = pos;
        heap_ring_consume(&c->ring, pos);
        heap_ring_woken(&c->ring);
}

void heap_on_drain_timer(void *userdata) {
        struct heap_plugin *pl = userdata;
        for (struct heap_client *c = pl->clients; c; c = c->next)
                heap_client_drain(c);
}

/* ---- dumps ---- */

static int packet_begin(struct heap_instance *h, TracePacket *pkt) {
        int r = h->pl->api->begin_packet(h->writer, &pkt->msg);
        if (r < 0)
                h->write_errors++;
        return r;
}

static void packet_end(struct heap_instance *h, TracePacket *pkt) {
        if (h->pl->api->end_packet(h->writer, &pkt->msg) < 0)
                h->write_errors++;
}

/* One process's profile as of now: a packet of its own. */
static void dump_client(struct heap_instance *h, struct heap_client *c, uint64_t now_coarse, uint64_t now_boot) {
        struct proc_info *p = proc_table_get(h->procs, c->pid);
        uint64_t *stacks = calloc(c->cs.n ? c->cs.n : 1, sizeof(*stacks));
        if (!stacks) {
                h->write_errors++;
                return;
        }
        uint64_t frames[MAX_FRAMES];
        for (size_t k = 0; k < c->cs.n; k++) {
                const struct heap_callsite *s = &c->cs.v[k];
                size_t n = 0;
                /* Outermost first, as Callstack.frame_ids. */
                for (size_t i = s->n_pcs; i-- > 0 && n < MAX_FRAMES;) {
                        uint64_t f = symbolizer_user_frame(&h->sym, h->iw, p, s->pcs[i]);
                        if (f)
                                frames[n++] = f;
                }
                stacks[k] = intern_callstack(h->iw, frames, n);
        }
        const struct heap_ring_header *rh = c->ring_mem ? c->ring.h : NULL;
        uint64_t dropped = rh ? __atomic_load_n(&rh->dropped, __ATOMIC_RELAXED) : 0;
        uint64_t timeouts = rh ? __atomic_load_n(&rh->timeouts, __ATOMIC_RELAXED) : 0;
        uint64_t blocked_ns = rh ? __atomic_load_n(&rh->blocked_ns, __ATOMIC_RELAXED) : 0;

        TracePacket pkt;
        ProfilePacket pp;
        ProfilePacket_ProcessHeapSamples d;
        ProfilePacket_ProcessStats st;
        if (packet_begin(h, &pkt) < 0) {
                free(stacks);
                return;
        }
        TracePacket_set_timestamp(&pkt, now_boot);
        TracePacket_set_sequence_flags(&pkt, intern_packet_flags(h->iw));
        intern_write_pending(h->iw, &pkt);
        TracePacket_begin_profile_packet(&pkt, &pp);
        /* Per packet of the sequence, from 0 (trace_processor counts a gap
         * as a lost packet). */
        ProfilePacket_set_index(&pp, h->packets++);
        ProfilePacket_begin_process_dumps(&pp, &d);
        ProfilePacket_ProcessHeapSamples_set_pid(&d, (uint64_t) c->pid);
        ProfilePacket_ProcessHeapSamples_set_heap_name(&d, "libc.malloc");
        ProfilePacket_ProcessHeapSamples_set_sampling_interval_bytes(&d, h->cfg.interval);
        ProfilePacket_ProcessHeapSamples_set_orig_sampling_interval_bytes(&d, h->cfg.interval);
        ProfilePacket_ProcessHeapSamples_set_timestamp(&d, now_coarse);
        ProfilePacket_ProcessHeapSamples_set_start_timestamp(&d, c->start_ns);
        if (c->from_startup)
                ProfilePacket_ProcessHeapSamples_set_from_startup(&d, true);
        if (c->disconnected)
                ProfilePacket_ProcessHeapSamples_set_disconnected(&d, true);
        if (dropped)
                ProfilePacket_ProcessHeapSamples_set_buffer_overran(&d, true);
        if (timeouts)
                ProfilePacket_ProcessHeapSamples_set_client_error(
                        &d, ProfilePacket_ProcessHeapSamples_CLIENT_ERROR_HIT_TIMEOUT);
        if (c->corrupted)
                ProfilePacket_ProcessHeapSamples_set_buffer_corrupted(&d, true);
        if (dropped)
                ProfilePacket_ProcessHeapSamples_set_traced_samples_dropped(&d, dropped);
        ProfilePacket_ProcessHeapSamples_begin_stats(&d, &st);
        ProfilePacket_ProcessStats_set_unwinding_errors(&st, c->unwind_errors);
        ProfilePacket_ProcessStats_set_heap_samples(&st, c->samples);
        ProfilePacket_ProcessStats_set_map_reparses(&st, c->reloads);
        ProfilePacket_ProcessStats_set_client_spinlock_blocked_us(&st, blocked_ns / 1000u);
        ProfilePacket_ProcessHeapSamples_end_stats(&d, &st);
        for (size_t k = 0; k < c->cs.n; k++) {
                const struct heap_callsite *s = &c->cs.v[k];
                if (!stacks[k])
                        continue;
                ProfilePacket_HeapSample hs;
                ProfilePacket_ProcessHeapSamples_begin_samples(&d, &hs);
                ProfilePacket_HeapSample_set_callstack_id(&hs, stacks[k]);
                ProfilePacket_HeapSample_set_self_allocated(&hs, s->allocated);
                ProfilePacket_HeapSample_set_self_freed(&hs, s->freed);
                ProfilePacket_HeapSample_set_alloc_count(&hs, s->alloc_count);
                ProfilePacket_HeapSample_set_free_count(&hs, s->free_count);
                ProfilePacket_ProcessHeapSamples_end_samples(&d, &hs);
        }
        ProfilePacket_end_process_dumps(&pp, &d);
        TracePacket_end_profile_packet(&pkt, &pp);
        packet_end(h, &pkt);
        free(stacks);
}

static void dump(struct heap_instance *h) {
        uint64_t coarse = clock_ns(CLOCK_MONOTONIC_COARSE), boot = clock_ns(CLOCK_BOOTTIME);
        for (struct heap_client *c = h->pl->clients; c; c = c->next)
                if (c->inst == h) {
                        heap_client_drain(c);
                        dump_client(h, c, coarse, boot);
                }
        h->dumps++;
        (void) h->pl->api->flush_writer(h->writer);
}

static void on_dump_timer(void *userdata) {
        struct heap_instance *h = userdata;
        if (h->dump_phase_pending) {
                /* The phase is over: from now on every interval. */
                h->dump_phase_pending = false;
                h->pl->api->remove_source(h->pl->host, h->dump_timer);
                h->dump_timer = NULL;
                (void) h->pl->api->add_timer(h->pl->host, h->cfg.dump_interval_ms, on_dump_timer, h, &h->dump_timer);
        }
        dump(h);
}

/* ---- instances ---- */

static void instance_free(struct heap_instance *h) {
        struct heap_plugin *pl = h->pl;
        for (struct heap_client *c = pl->clients, *next; c; c = next) {
                next = c->next;
                if (c->inst == h)
                        heap_client_free(pl, c);
        }
        if (h->dump_timer)
                pl->api->remove_source(pl->host, h->dump_timer);
        if (h->writer)
                pl->api->free_writer(h->writer);
        unwinder_free(h->unw);
        intern_writer_free(h->iw);
        elf_cache_free(h->elves);
        proc_table_free(h->procs);
        heap_config_done(&h->cfg);
        free(h);
}

static uint64_t boot_ticks(void) {
        long hz = sysconf(_SC_CLK_TCK);
        return clock_ns(CLOCK_BOOTTIME) / (1000000000u / (uint64_t) (hz > 0 ? hz : 100));
}

void heap_instance_start(struct heap_plugin *pl, uint64_t id, const uint8_t *config, size_t size) {
        char err[512] = "";
        struct heap_instance *h = calloc(1, sizeof(*h));
        if (!h) {
                plugin_log_start_failed(pl, HEAP_DS_NAME, id, -ENOMEM);
                return;
        }
        h->pl = pl;
        h->base.id = id;
        int r = heap_config_parse(config, size, &h->cfg, err, sizeof(err));
        if (r == -EINVAL) {
                plugin_report_parsed(pl, HEAP_DS_NAME, id, "heapprofd_config", err);
                free(h);
                return;
        }
        if (r < 0)
                goto fail;
        h->start_ticks = boot_ticks();
        if ((r = proc_table_new(NULL, &h->procs)) < 0 || (r = elf_cache_new(NULL, &h->elves)) < 0 ||
            (r = intern_writer_new(&h->iw)) < 0)
                goto fail;
        h->sym = (struct symbolizer) { .procs = h->procs, .elves = h->elves };
        if ((r = unwinder_new(&h->sym, &h->unw)) < 0 || (r = pl->api->new_writer(pl->host, id, &h->writer)) < 0)
                goto fail;
        if ((r = heap_server_listen(pl)) < 0) {
                plugin_report(pl, HEAP_DS_NAME, id, NULL, "cannot serve processes from %s: %s", pl->dir,
                              strerror(-r));
                instance_free(h);
                return;
        }
        if (h->cfg.dump_interval_ms) {
                uint32_t first = h->cfg.dump_phase_ms ? h->cfg.dump_phase_ms : h->cfg.dump_interval_ms;
                h->dump_phase_pending = h->cfg.dump_phase_ms && h->cfg.dump_phase_ms != h->cfg.dump_interval_ms;
                if ((r = pl->api->add_timer(pl->host, first, on_dump_timer, h, &h->dump_timer)) < 0)
                        goto fail;
        }
        plugin_instance_add(&pl->instances, &h->base);
        heap_server_bump(pl);
        plugin_log(pl, TRACED_LOG_INFO,
                   HEAP_DS_NAME " instance %llu: profiling %s, a sample every %llu bytes on average, rings of %zu "
                                "bytes",
                   (unsigned long long) id, h->cfg.all ? "every process that preloads libtraced-heap.so"
                                                        : "the processes named",
                   (unsigned long long) h->cfg.interval, heap_ring_total_size(h->cfg.shmem_size));
        return;
fail:
        plugin_log_start_failed(pl, HEAP_DS_NAME, id, r);
        instance_free(h);
}

void heap_instance_stop(struct heap_plugin *pl, uint64_t id) {
        struct heap_instance *h = (struct heap_instance *) plugin_instance_take(&pl->instances, id);
        if (!h)
                return;
        dump(h);
        uint64_t procs = 0, samples = 0, errors = 0, dropped = 0, sparse = 0, made = 0, killed = 0;
        for (struct heap_client *c = pl->clients; c; c = c->next)
                if (c->inst == h) {
                        procs++;
                        samples += c->samples;
                        errors += c->unwind_errors;
                        sparse += c->sparse_samples;
                        made += c->templates_made;
                        killed += c->templates_killed;
                        dropped += c->ring_mem ? __atomic_load_n(&c->ring.h->dropped, __ATOMIC_RELAXED) : 0;
                }
        plugin_log(pl, TRACED_LOG_INFO,
                   HEAP_DS_NAME " instance %llu stopped: %llu processes, %llu samples (%llu with unwind errors, "
                                "%llu with a stack template's words only; %llu templates made, %llu died), "
                                "%llu dropped for a full ring, %llu dumps",
                   (unsigned long long) id, (unsigned long long) procs, (unsigned long long) samples,
                   (unsigned long long) errors, (unsigned long long) sparse, (unsigned long long) made,
                   (unsigned long long) killed, (unsigned long long) dropped, (unsigned long long) h->dumps);
        instance_free(h);
        /* Its processes look again, find themselves untargeted, leave. */
        heap_server_bump(pl);
        if (!pl->instances)
                heap_server_unlisten(pl);
}

void heap_instance_flush(struct heap_plugin *pl, uint64_t id) {
        struct heap_instance *h = find(pl, id);
        if (!h)
                return;
        for (struct heap_client *c = pl->clients; c; c = c->next)
                if (c->inst == h)
                        heap_client_drain(c);
        (void) pl->api->flush_writer(h->writer);
}

void heap_instance_clear(struct heap_plugin *pl, uint64_t id) {
        struct heap_instance *h = find(pl, id);
        if (h)
                intern_clear(h->iw);
}

void heap_instances_free(struct heap_plugin *pl) {
        struct plugin_instance *i;
        while ((i = plugin_instance_pop(&pl->instances)))
                instance_free((struct heap_instance *) i);
}
