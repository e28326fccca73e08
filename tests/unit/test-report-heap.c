/* SPDX-License-Identifier: LGPL-2.1-or-later */
/*
 * tracectl report of heap profiles: ProfilePacket dumps written with the
 * generated protobuf code (as heapprofd writes them: callstacks interned
 * on the sequence, every dump the totals since the start) read into the
 * in-use and allocation trees; a dump replacing the one before it, a dump
 * continued over two packets, --until, --since, --pid, the drops in the
 * header and in tracectl summary, and the pprof sample types.
 */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "perfetto/trace/trace_packet.pb-c.h"
#include "pprof-check.h"
#include "test-scratch.h"
#include "tools/tracectl/pprof-writer.h"
#include "tools/tracectl/profile.h"
#include "tools/tracectl/summary.h"

enum { SEQ = 7, CS_A = 1, CS_B = 2 };
enum { PID = 200, PID2 = 201 };
static const uint64_t T0 = 5000000000ull;

/* When set, the packets go to the summary too. */
static struct summary *also_summary;

static void add(struct profile *p, Perfetto__Protos__TracePacket *pkt) {
        pkt->optional_trusted_packet_sequence_id_case =
                PERFETTO__PROTOS__TRACE_PACKET__OPTIONAL_TRUSTED_PACKET_SEQUENCE_ID_TRUSTED_PACKET_SEQUENCE_ID;
        pkt->trusted_packet_sequence_id = SEQ;
        size_t n = perfetto__protos__trace_packet__get_packed_size(pkt);
        uint8_t *b = malloc(n ? n : 1);
        cr_assert_not_null(b);
        perfetto__protos__trace_packet__pack(pkt, b);
        cr_assert_eq(profile_add_packet(p, b, n), 0);
        if (also_summary)
                summary_add_packet(also_summary, b, n);
        free(b);
}

static Perfetto__Protos__InternedString *istr(Perfetto__Protos__InternedString *s, uint64_t iid, const char *v) {
        *s = (Perfetto__Protos__InternedString) PERFETTO__PROTOS__INTERNED_STRING__INIT;
        s->has_iid = s->has_str = true;
        s->iid = iid;
        s->str.data = (uint8_t *) v;
        s->str.len = strlen(v);
        return s;
}

/* The sequence's interning: app's main -> a_site | main -> b_site. */
static void interning(struct profile *p) {
        Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__InternedData in = PERFETTO__PROTOS__INTERNED_DATA__INIT;
        Perfetto__Protos__InternedString ps, fs[3], *psp[1], *fsp[3];
        psp[0] = istr(&ps, 1, "app");
        fsp[0] = istr(&fs[0], 1, "main");
        fsp[1] = istr(&fs[1], 2, "a_site");
        fsp[2] = istr(&fs[2], 3, "b_site");
        in.mapping_paths = psp;
        in.n_mapping_paths = 1;
        in.function_names = fsp;
        in.n_function_names = 3;
        uint64_t path[] = { 1 };
        Perfetto__Protos__Mapping m = PERFETTO__PROTOS__MAPPING__INIT, *mp = &m;
        m.has_iid = true;
        m.iid = 1;
        m.path_string_ids = path;
        m.n_path_string_ids = 1;
        m.has_start = m.has_end = true;
        m.start = 0x1000;
        m.end = 0x9000;
        in.mappings = &mp;
        in.n_mappings = 1;
        Perfetto__Protos__Frame fr[3], *frp[3];
        for (size_t i = 0; i < 3; i++) {
                fr[i] = (Perfetto__Protos__Frame) PERFETTO__PROTOS__FRAME__INIT;
                fr[i].has_iid = fr[i].has_function_name_id = fr[i].has_mapping_id = fr[i].has_rel_pc = true;
                fr[i].iid = i + 1;
                fr[i].function_name_id = i + 1;
                fr[i].mapping_id = 1;
                fr[i].rel_pc = 0x100 * (i + 1);
                frp[i] = &fr[i];
        }
        in.frames = frp;
        in.n_frames = 3;
        uint64_t ca[] = { 1, 2 }, cb[] = { 1, 3 };
        Perfetto__Protos__Callstack cs[2], *csp[2];
        for (size_t i = 0; i < 2; i++) {
                cs[i] = (Perfetto__Protos__Callstack) PERFETTO__PROTOS__CALLSTACK__INIT;
                cs[i].has_iid = true;
                cs[i].iid = i + 1;
                cs[i].frame_ids = i ? cb : ca;
                cs[i].n_frame_ids = 2;
                csp[i] = &cs[i];
        }
        in.callstacks = csp;
        in.n_callstacks = 2;
        pkt.interned_data = &in;
        pkt.has_sequence_flags = true;
        pkt.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_INCREMENTAL_STATE_CLEARED;
        add(p, &pkt);
}

struct site {
        uint64_t stack, allocated, freed, allocs, frees;
};

/* One packet holding one dump of pid's heap. */
static void dump(struct profile *p, uint64_t ts, uint64_t index, bool continued, int pid, const struct site *sites,
                 size_t n, uint64_t dropped) {
        Perfetto__Protos__TracePacket pkt = PERFETTO__PROTOS__TRACE_PACKET__INIT;
        Perfetto__Protos__ProfilePacket pp = PERFETTO__PROTOS__PROFILE_PACKET__INIT;
        Perfetto__Protos__ProfilePacket__ProcessHeapSamples d =
                PERFETTO__PROTOS__PROFILE_PACKET__PROCESS_HEAP_SAMPLES__INIT,
                                                           *dp = &d;
        Perfetto__Protos__ProfilePacket__ProcessStats st = PERFETTO__PROTOS__PROFILE_PACKET__PROCESS_STATS__INIT;
        Perfetto__Protos__ProfilePacket__HeapSample hs[8], *hsp[8];
        cr_assert_leq(n, 8);
        for (size_t i = 0; i < n; i++) {
                hs[i] = (Perfetto__Protos__ProfilePacket__HeapSample) PERFETTO__PROTOS__PROFILE_PACKET__HEAP_SAMPLE__INIT;
                hs[i].has_callstack_id = hs[i].has_self_allocated = hs[i].has_self_freed = true;
                hs[i].has_alloc_count = hs[i].has_free_count = true;
                hs[i].callstack_id = sites[i].stack;
                hs[i].self_allocated = sites[i].allocated;
                hs[i].self_freed = sites[i].freed;
                hs[i].alloc_count = sites[i].allocs;
                hs[i].free_count = sites[i].frees;
                hsp[i] = &hs[i];
        }
        d.has_pid = true;
        d.pid = (uint64_t) pid;
        d.heap_name = (char *) "libc.malloc";
        d.has_sampling_interval_bytes = true;
        d.sampling_interval_bytes = 4096;
        d.samples = hsp;
        d.n_samples = n;
        st.has_heap_samples = st.has_unwinding_errors = true;
        st.heap_samples = 100;
        st.unwinding_errors = 3;
        d.stats = &st;
        if (dropped) {
                d.has_buffer_overran = d.buffer_overran = true;
                d.has_traced_samples_dropped = true;
                d.traced_samples_dropped = dropped;
        }
        pp.process_dumps = &dp;
        pp.n_process_dumps = 1;
        pp.has_index = true;
        pp.index = index;
        if (continued)
                pp.has_continued = pp.continued = true;
        pkt.profile_packet = &pp;
        pkt.data_case = PERFETTO__PROTOS__TRACE_PACKET__DATA_PROFILE_PACKET;
        pkt.has_timestamp = true;
        pkt.timestamp = ts;
        pkt.has_sequence_flags = true;
        pkt.sequence_flags = PERFETTO__PROTOS__TRACE_PACKET__SEQUENCE_FLAGS__SEQ_NEEDS_INCREMENTAL_STATE;
        add(p, &pkt);
}

/* The profile: pid 200 dumped at 0 s and 2 s; pid 201 at 2 s, over two
 * packets. */
static void load(struct profile *p, const struct profile_filter *flt) {
        profile_init(p, flt);
        interning(p);
        const struct site first[] = { { CS_A, 1000, 0, 10, 0 }, { CS_B, 5000, 1000, 5, 1 } };
        dump(p, T0, 0, false, PID, first, 2, 0);
        const struct site second[] = { { CS_A, 3000, 1000, 30, 10 }, { CS_B, 5000, 5000, 5, 5 } };
        dump(p, T0 + 2000000000ull, 1, false, PID, second, 2, 7);
        const struct site part1[] = { { CS_A, 800, 0, 8, 0 } }, part2[] = { { CS_B, 400, 100, 4, 1 } };
        dump(p, T0 + 2000000000ull, 2, true, PID2, part1, 1, 0);
        dump(p, T0 + 2000000000ull, 3, false, PID2, part2, 1, 0);
        profile_finish(p);
}

static char *render(struct profile *p, bool folded) {
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_not_null(f);
        struct report_options o = { .top_n = 10 };
        cr_assert_geq(folded ? report_folded(f, p) : report_text(f, p, &o), 0);
        fclose(f);
        return buf;
}

static uint64_t folded_value(const char *folded, const char *stack) {
        size_t k = strlen(stack);
        for (const char *l = folded; l && *l;) {
                if (strncmp(l, stack, k) == 0 && l[k] == ' ')
                        return strtoull(l + k + 1, NULL, 10);
                l = strchr(l, '\n');
                l = l ? l + 1 : NULL;
        }
        return 0;
}

static struct profile_filter any(void) {
        return (struct profile_filter) { .pid = -1, .tid = -1, .cpu = -1 };
}

Test(report_heap, last_dump_in_use_by_default) {
        struct profile p;
        struct profile_filter flt = any();
        load(&p, &flt);
        cr_assert_eq(p.kind, PROFILE_HEAP_INUSE, "a heap-only trace shows what is in use");
        cr_assert_eq(p.heap_dumps, 4);
        char *fo = render(&p, true);
        /* pid 200's second dump only: 3000 - 1000 of A; B all freed */
        cr_assert_eq(folded_value(fo, "app;main;a_site"), 2000 + 800, "%s", fo);
        cr_assert_eq(folded_value(fo, "app;main;b_site"), 300, "%s", fo);
        cr_assert_eq(p.tree->nodes[0].total[1], 2000 + 800 + 300);
        cr_assert_eq(p.tree->nodes[0].total[0], 20 + 8 + 3, "objects in use");
        free(fo);
        char *text = render(&p, false);
        cr_assert_not_null(strstr(text, "# Heaps: 2 (4 dumps read), sampled every 4096 bytes"), "%s", text);
        cr_assert_not_null(strstr(text, "200 taken, 7 dropped for a full buffer (in 1 of them"), "%s", text);
        cr_assert_not_null(strstr(text, "6 stacks cut short"), "%s", text);
        cr_assert_not_null(strstr(text, "--alloc"), "%s", text);
        cr_assert_not_null(strstr(text, "pid 200): 1.953 KiB"), "%s", text);
        free(text);
        profile_done(&p);
}

Test(report_heap, allocated_since_the_start) {
        struct profile p;
        struct profile_filter flt = any();
        flt.kind = PROFILE_HEAP_ALLOC;
        flt.kind_explicit = true;
        load(&p, &flt);
        char *fo = render(&p, true);
        cr_assert_eq(folded_value(fo, "app;main;a_site"), 3000 + 800, "%s", fo);
        cr_assert_eq(folded_value(fo, "app;main;b_site"), 5000 + 400, "%s", fo);
        cr_assert_eq(p.tree->nodes[0].total[0], 30 + 5 + 8 + 4);
        free(fo);
        profile_done(&p);
}

Test(report_heap, until_since_and_pid) {
        struct profile p;
        struct profile_filter flt = any();
        flt.have_until = true;
        flt.until_ns = 1000000000; /* the first dump of pid 200 */
        load(&p, &flt);
        char *fo = render(&p, true);
        cr_assert_eq(folded_value(fo, "app;main;a_site"), 1000, "%s", fo);
        cr_assert_eq(folded_value(fo, "app;main;b_site"), 4000, "%s", fo);
        cr_assert_eq(p.heap_dumps_filtered, 3);
        free(fo);
        profile_done(&p);

        /* Since 1 s: less the first dump (allocations 2000 of A, none of
         * B; in use grew by 1000 at A). */
        flt = any();
        flt.have_since = true;
        flt.since_ns = 1000000000;
        flt.pid = PID;
        flt.kind = PROFILE_HEAP_ALLOC;
        flt.kind_explicit = true;
        load(&p, &flt);
        fo = render(&p, true);
        cr_assert_eq(folded_value(fo, "app;main;a_site"), 2000, "%s", fo);
        cr_assert_eq(folded_value(fo, "app;main;b_site"), 0, "%s", fo);
        cr_assert_eq(p.tree->nodes[0].total[1], 2000, "pid 201 is filtered out");
        free(fo);
        cr_assert_eq(p.trees[PROFILE_HEAP_INUSE].nodes[0].total[1], 1000);
        profile_done(&p);
}

Test(report_heap, pprof_heap_sample_types) {
        char dir[256], path[300];
        cr_assert_eq(test_mkdtemp(dir, sizeof(dir), "test-report-heap-"), 0);
        snprintf(path, sizeof(path), "%s/heap.pb.gz", dir);
        struct profile p;
        struct profile_filter flt = any();
        flt.addresses = true;
        load(&p, &flt);
        struct pprof_writer *w;
        cr_assert_eq(pprof_writer_open(path, &w), 0);
        struct pprof_stats st;
        cr_assert_eq(report_pprof(w, &p, &st), 0);
        cr_assert_eq(pprof_writer_commit(w), 0);
        pprof_writer_free(w);
        profile_done(&p);

        struct pp_profile pp;
        cr_assert_eq(pp_read(path, &pp), 0);
        const char *bad = pp_check(&pp);
        cr_assert_null(bad, "%s", bad);
        int ao = pp_sample_type(&pp, "alloc_objects"), as = pp_sample_type(&pp, "alloc_space"),
            io = pp_sample_type(&pp, "inuse_objects"), is = pp_sample_type(&pp, "inuse_space");
        cr_assert(ao >= 0 && as >= 0 && io >= 0 && is >= 0, "%d %d %d %d", ao, as, io, is);
        cr_assert_str_eq(pp_string(&pp, pp.sample_types[as][1]), "bytes");
        cr_assert_str_eq(pp_string(&pp, pp.default_sample_type), "inuse_space");
        cr_assert_eq(pp.period, 4096);
        int64_t sum[4] = {};
        for (size_t i = 0; i < pp.n_samples; i++) {
                sum[0] += pp.samples[i].values[ao];
                sum[1] += pp.samples[i].values[as];
                sum[2] += pp.samples[i].values[io];
                sum[3] += pp.samples[i].values[is];
                int64_t pid;
                cr_assert(pp_label_num(&pp, &pp.samples[i], "pid", &pid) && (pid == PID || pid == PID2));
        }
        cr_assert_eq(sum[0], 47);
        cr_assert_eq(sum[1], 3000 + 5000 + 800 + 400);
        cr_assert_eq(sum[2], 31);
        cr_assert_eq(sum[3], 3100);
        pp_free(&pp);
        unlink(path);
        rmdir(dir);
}

Test(report_heap, summary_counts_samples_and_drops) {
        struct summary *s = calloc(1, sizeof(*s));
        cr_assert_not_null(s);
        summary_init(s);
        also_summary = s;
        struct profile p;
        struct profile_filter flt = any();
        load(&p, &flt);
        also_summary = NULL;
        profile_done(&p);
        summary_finish(s);
        struct summary_heap h;
        summary_heap_totals(s, &h);
        cr_assert_eq(s->heap_dumps, 4);
        cr_assert_eq(h.processes, 2);
        cr_assert_eq(h.samples, 200, "the last dump of each: %llu", (unsigned long long) h.samples);
        cr_assert_eq(h.dropped, 7);
        cr_assert_eq(h.overran, 1);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        cr_assert_not_null(f);
        summary_print(f, s, 10);
        fclose(f);
        cr_assert_not_null(strstr(buf, "Heap profiles:  2 processes, 4 dumps: 200 samples (6 unwind errors), 7 dropped"),
                           "%s", buf);
        free(buf);
        summary_done(s);
        free(s);
}
