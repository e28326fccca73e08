/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* TraceConfig.incremental_state_config through the real traced and the
 * profiler plugins: a small RING_BUFFER wraps while a program is sampled,
 * so the interned data (strings, mappings, frames, callstacks) emitted
 * early on is overwritten. The service asks the plugins to clear their
 * incremental state every second; each clear starts the sequence again
 * (SEQ_INCREMENTAL_STATE_CLEARED) and emits again what later samples use.
 * In the trace read back a sequence's state is valid from a packet with
 * SEQ_INCREMENTAL_STATE_CLEARED on, and no more after a packet says packets
 * before it were dropped; every sample on a valid sequence must resolve to
 * a callstack whose frames, mappings and strings are all in the trace. The
 * log also gives the figure trace_processor would: it trusts a sequence
 * from its first packet on, until a loss, and skips the samples of a
 * sequence it does not trust. */

#include <bpf/libbpf.h>
#include <criterion/criterion.h>
#include <linux/perf_event.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "basic/hashmap.h"
#include "basic/macro.h"
#include "plugin-fixture.h"

#include "perfetto/trace/trace_packet.pb-c.h"

extern char **environ;

static struct traced_instance inst;
static sd_event *ev;

static void setup(void) {
        cr_assert_eq(fixture_start(&inst, &ev), 0);
}

static void teardown(void) {
        cr_expect(fixture_stop(&inst, &ev), "traced did not exit cleanly");
}

TestSuite(incremental_state, .init = setup, .fini = teardown, .timeout = 120);

#define SKIP(...)                          \
        do {                               \
                teardown();                \
                cr_skip_test(__VA_ARGS__); \
        } while (0)

/* ---- reading the trace ---- */

#define MAX_SEQS 64

/* One sequence's interned state: each table maps an iid to whether the
 * entry resolves (1: everything it refers to is known). */
struct seq {
        uint32_t id;
        bool valid; /* cleared since the trace (or the last loss) began */
        bool lossless; /* no loss since the trace began or the last clear (what trace_processor trusts) */
        bool seen;
        struct hashmap strings[3]; /* function_names, mapping_paths, build_ids (by iid) */
        struct hashmap mappings, frames, callstacks;
};

struct tally {
        struct seq seqs[MAX_SEQS];
        size_t n_seqs;
        uint64_t samples;  /* with a callstack, in the buffer */
        uint64_t on_valid; /* of those, on a sequence whose state is valid */
        uint64_t resolved; /* of those, resolving */
        uint64_t clears, chunks_overwritten, losses;
        /* as trace_processor counts: samples it keeps (on a sequence with
         * no loss since its start or its last clear), and those with a
         * callsite */
        uint64_t tp_kept, tp_resolved;
        uint64_t first_unresolved_iid;
        uint32_t first_unresolved_seq;
};

static void seq_reset(struct seq *s) {
        for (size_t k = 0; k < ELEMENTSOF(s->strings); k++)
                hashmap_clear(&s->strings[k]);
        hashmap_clear(&s->mappings);
        hashmap_clear(&s->frames);
        hashmap_clear(&s->callstacks);
}

static struct seq *seq_of(struct tally *t, uint32_t id) {
        for (size_t k = 0; k < t->n_seqs; k++)
                if (t->seqs[k].id == id)
                        return &t->seqs[k];
        cr_assert_lt(t->n_seqs, MAX_SEQS);
        t->seqs[t->n_seqs] = (struct seq) { .id = id };
        return &t->seqs[t->n_seqs++];
}

static bool resolves(const struct hashmap *m, uint64_t iid) {
        uint64_t v = 0;
        return hashmap_get(m, iid, &v) && v == 1;
}

static void put(struct hashmap *m, uint64_t iid, bool ok) {
        cr_assert_geq(hashmap_put(m, iid, ok ? 1 : 0), 0);
}

static void add_strings(struct hashmap *m, Perfetto__Protos__InternedString **v, size_t n) {
        for (size_t k = 0; k < n; k++)
                put(m, v[k]->iid, true);
}

/* In the order entries refer to one another: strings, mappings, frames,
 * callstacks. */
static void add_interned(struct seq *s, const Perfetto__Protos__InternedData *d) {
        add_strings(&s->strings[0], d->function_names, d->n_function_names);
        add_strings(&s->strings[1], d->mapping_paths, d->n_mapping_paths);
        add_strings(&s->strings[2], d->build_ids, d->n_build_ids);
        for (size_t k = 0; k < d->n_mappings; k++) {
                const Perfetto__Protos__Mapping *m = d->mappings[k];
                bool ok = !m->build_id || resolves(&s->strings[2], m->build_id);
                for (size_t j = 0; j < m->n_path_string_ids && ok; j++)
                        ok = resolves(&s->strings[1], m->path_string_ids[j]);
                put(&s->mappings, m->iid, ok);
        }
        for (size_t k = 0; k < d->n_frames; k++) {
                const Perfetto__Protos__Frame *f = d->frames[k];
                bool ok = resolves(&s->mappings, f->mapping_id) &&
                          (!f->function_name_id || resolves(&s->strings[0], f->function_name_id));
                put(&s->frames, f->iid, ok);
        }
        for (size_t k = 0; k < d->n_callstacks; k++) {
                const Perfetto__Protos__Callstack *c = d->callstacks[k];
                bool ok = c->n_frame_ids > 0;
                for (size_t j = 0; j < c->n_frame_ids && ok; j++)
                        ok = resolves(&s->frames, c->frame_ids[j]);
                put(&s->callstacks, c->iid, ok);
        }
}

static void tally_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct tally *t = userdata;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACE_STATS)
                for (size_t k = 0; k < p->trace_stats->n_buffer_stats; k++)
                        t->chunks_overwritten += p->trace_stats->buffer_stats[k]->chunks_overwritten;
        if (p->optional_trusted_packet_sequence_id_case !=
            PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID)
                return;
        struct seq *s = seq_of(t, p->trusted_packet_sequence_id);
        if (!s->seen)
                s->seen = s->lossless = true;
        if (p->has_previous_packet_dropped && p->previous_packet_dropped) {
                s->valid = s->lossless = false;
                t->losses++;
        }
        if (p->has_sequence_flags && (p->sequence_flags & 1)) {
                seq_reset(s);
                s->valid = s->lossless = true;
                t->clears++;
        }
        if (p->interned_data)
                add_interned(s, p->interned_data);
        if (p->data_case != PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE || !p->perf_sample->has_callstack_iid)
                return;
        t->samples++;
        bool resolved = resolves(&s->callstacks, p->perf_sample->callstack_iid);
        if (s->lossless) {
                t->tp_kept++;
                t->tp_resolved += resolved;
        }
        if (!s->valid)
                return;
        t->on_valid++;
        if (resolved)
                t->resolved++;
        else if (!t->first_unresolved_iid) {
                t->first_unresolved_iid = p->perf_sample->callstack_iid;
                t->first_unresolved_seq = s->id;
        }
}

static void tally_free(struct tally *t) {
        for (size_t k = 0; k < t->n_seqs; k++)
                seq_reset(&t->seqs[k]);
}

/* ---- the recording ---- */

static void run_chain(void *userdata) {
        const char *argv[] = { PERF_TEST_BIN_DIR "/chain-O2-fp", "8", NULL };
        pid_t pid;
        int r = posix_spawn(&pid, argv[0], NULL, NULL, (char *const *) argv, environ);
        cr_assert_eq(r, 0, "%s: %s", argv[0], strerror(r));
        int status;
        cr_assert_eq(waitpid(pid, &status, 0), pid);
        cr_assert(WIFEXITED(status) && WEXITSTATUS(status) == 0, "%s ran", argv[0]);
}

/* A ring buffer of buffer_kb, small enough to wrap in the 8 s, cleared
 * every second, read back at the end. */
static void record_and_check(const char *ds, unsigned buffer_kb, const char *ds_config) {
        char *cfg;
        cr_assert_gt(asprintf(&cfg,
                              "buffers { size_kb: %u fill_policy: RING_BUFFER }\n"
                              "incremental_state_config { clear_period_ms: 1000 }\n"
                              "data_sources { config { name: \"%s\" %s } }\n",
                              buffer_kb, ds, ds_config),
                     0);
        struct tally t = {};
        fixture_record_read_back(&inst, ev, ds, cfg, run_chain, NULL, tally_packet, &t);
        free(cfg);
        cr_log_info("%s: %llu samples with a callstack in the ring buffer, %llu on a cleared sequence, %llu of "
                    "those resolve (%.1f %%); %llu clears, %llu losses, %llu chunks overwritten; as trace_processor "
                    "counts, %llu of %llu samples have a callsite (%.1f %%)",
                    ds, (unsigned long long) t.samples, (unsigned long long) t.on_valid,
                    (unsigned long long) t.resolved, t.on_valid ? 100.0 * (double) t.resolved / (double) t.on_valid : 0.0,
                    (unsigned long long) t.clears, (unsigned long long) t.losses,
                    (unsigned long long) t.chunks_overwritten, (unsigned long long) t.tp_resolved,
                    (unsigned long long) t.tp_kept,
                    t.tp_kept ? 100.0 * (double) t.tp_resolved / (double) t.tp_kept : 0.0);
        cr_assert_gt(t.chunks_overwritten, 0, "the ring buffer wrapped");
        cr_assert_gt(t.samples, 500, "samples in the buffer: %llu", (unsigned long long) t.samples);
        /* Cleared every second while the buffer holds seconds: samples
         * follow a clear the buffer still holds (how many depends on how
         * promptly a loaded machine runs the plugin's loop). */
        cr_assert_gt(t.on_valid, 0, "none of the %llu samples follows a clear", (unsigned long long) t.samples);
        cr_assert_eq(t.resolved, t.on_valid,
                     "%llu of %llu samples after a clear do not resolve (first: callstack %llu on sequence %u)",
                     (unsigned long long) (t.on_valid - t.resolved), (unsigned long long) t.on_valid,
                     (unsigned long long) t.first_unresolved_iid, t.first_unresolved_seq);
        cr_assert_geq(t.tp_resolved * 100, t.tp_kept * 98, "as trace_processor counts, only %llu of %llu resolve",
                      (unsigned long long) t.tp_resolved, (unsigned long long) t.tp_kept);
        tally_free(&t);
}

static bool perf_usable(void) {
        struct perf_event_attr a = {
                .size = sizeof(a), .type = PERF_TYPE_SOFTWARE, .config = PERF_COUNT_SW_CPU_CLOCK,
                .sample_period = 1000000, .disabled = 1,
        };
        int fd = (int) syscall(SYS_perf_event_open, &a, -1, 0, -1, PERF_FLAG_FD_CLOEXEC);
        if (fd < 0)
                return false;
        close(fd);
        return true;
}

Test(incremental_state, perf_samples_resolve_after_the_ring_buffer_wraps) {
        if (!perf_usable())
                SKIP("perf_event_open of a CPU clock is not available here");
        /* DWARF stacks, kernel frames, interned: about 60 KiB a second
         * on a quiet machine (7993 samples in 8 s did not fill 512 KiB),
         * more with other processes sampled. */
        record_and_check("linux.perf", 256, "perf_event_config {\n"
                                       "  timebase { frequency: 999 counter: SW_CPU_CLOCK }\n"
                                       "  callstack_sampling { scope { target_cmdline: \"chain-O2-fp\" }\n"
                                       "                       kernel_frames: true user_frames: UNWIND_DWARF }\n"
                                       "}");
}

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        return 0;
}

Test(incremental_state, bpf_stack_samples_resolve_after_the_ring_buffer_wraps) {
        libbpf_set_print(quiet);
        if (access("/sys/kernel/btf/vmlinux", R_OK) < 0)
                SKIP("the kernel has no BTF (/sys/kernel/btf/vmlinux)");
        if (libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_PERF_EVENT, NULL) != 1 ||
            libbpf_probe_bpf_map_type(BPF_MAP_TYPE_RINGBUF, NULL) != 1)
                SKIP("BPF perf_event programs or ring buffers are refused here");
        /* 20 to 80 KiB a second. */
        record_and_check("linux.bpf_stack", 64, "bpf_stack_config { frequency: 999 off_cpu: false "
                                            "filter: \"comm=chain-O2-fp\" }");
}
