/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "perfetto/trace/trace_packet.pb-c.h"
#include "profiling/intern.h"
#include "test-packets.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

static Perfetto__Protos__TracePacket *decode(struct test_packet *tp) {
        ssize_t n = test_packet_end(tp);
        cr_assert_geq(n, 0);
        Perfetto__Protos__TracePacket *p = perfetto__protos__trace_packet__unpack(NULL, (size_t) n, tp->buf);
        cr_assert_not_null(p, "the packet decodes");
        return p;
}

/* The string of iid, NUL-terminated (bytes fields are not). */
static const char *str_of(Perfetto__Protos__InternedString **v, size_t n, uint64_t iid) {
        static char buf[4][256];
        static unsigned next;
        for (size_t k = 0; k < n; k++)
                if (v[k]->iid == iid) {
                        char *b = buf[next++ % 4];
                        snprintf(b, sizeof(buf[0]), "%.*s", (int) v[k]->str.len, (const char *) v[k]->str.data);
                        return b;
                }
        return NULL;
}

Test(profiling_intern, ids_are_stable_and_entries_go_out_once) {
        struct intern_writer *w;
        cr_assert_eq(intern_writer_new(&w), 0);
        uint64_t f1 = intern_function_name(w, "main");
        uint64_t f2 = intern_function_name(w, "leaf");
        cr_assert_eq(intern_function_name(w, "main"), f1);
        cr_assert_neq(f1, f2);
        cr_assert_gt(f1, 0);
        static const uint8_t bid[] = { 0xde, 0xad, 0xbe, 0xef };
        struct intern_mapping im = { .build_id = bid, .build_id_len = 4, .path = "/usr/lib/libfoo.so.1",
                                     .start = 0x1000, .end = 0x5000, .exact_offset = 0x2000, .load_bias = 0 };
        uint64_t m = intern_mapping(w, &im);
        cr_assert_eq(intern_mapping(w, &im), m);
        uint64_t fr1 = intern_frame(w, f1, m, 0x1234);
        uint64_t fr2 = intern_frame(w, f2, m, 0x2345);
        cr_assert_eq(intern_frame(w, f1, m, 0x1234), fr1);
        uint64_t frames[] = { fr1, fr2 };
        uint64_t cs = intern_callstack(w, frames, 2);
        cr_assert_eq(intern_callstack(w, frames, 2), cs);
        uint64_t one[] = { fr1 };
        cr_assert_neq(intern_callstack(w, one, 1), cs);
        cr_assert(intern_has_pending(w));

        struct test_packet pkt = {};
        uint32_t flags = intern_packet_flags(w);
        cr_assert_eq(flags, TracePacket_SEQ_INCREMENTAL_STATE_CLEARED | TracePacket_SEQ_NEEDS_INCREMENTAL_STATE, "first packet");
        cr_assert_eq(intern_packet_flags(w), TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
        intern_write_pending(w, test_packet_begin(&pkt));
        cr_assert_not(intern_has_pending(w));
        Perfetto__Protos__TracePacket *p = decode(&pkt);
        Perfetto__Protos__InternedData *d = p->interned_data;
        cr_assert_not_null(d);
        cr_assert_eq(d->n_function_names, 2);
        cr_assert_str_eq(str_of(d->function_names, d->n_function_names, f1), "main");
        cr_assert_eq(d->n_mapping_paths, 3, "usr, lib, libfoo.so.1: %zu", d->n_mapping_paths);
        cr_assert_eq(d->n_mappings, 1);
        Perfetto__Protos__Mapping *mp = d->mappings[0];
        cr_assert_eq(mp->iid, m);
        cr_assert_eq(mp->start, 0x1000);
        cr_assert_eq(mp->end, 0x5000);
        cr_assert_eq(mp->exact_offset, 0x2000);
        cr_assert_eq(mp->n_path_string_ids, 3);
        cr_assert_str_eq(str_of(d->mapping_paths, d->n_mapping_paths, mp->path_string_ids[0]), "usr");
        cr_assert_str_eq(str_of(d->mapping_paths, d->n_mapping_paths, mp->path_string_ids[2]), "libfoo.so.1");
        cr_assert_eq(d->n_build_ids, 1);
        cr_assert_eq(d->build_ids[0]->iid, mp->build_id);
        cr_assert_eq(d->build_ids[0]->str.len, 4);
        cr_assert_eq(memcmp(d->build_ids[0]->str.data, bid, 4), 0);
        cr_assert_eq(d->n_frames, 2);
        cr_assert_eq(d->n_callstacks, 2);
        cr_assert_eq(d->callstacks[0]->iid, cs);
        cr_assert_eq(d->callstacks[0]->n_frame_ids, 2);
        cr_assert_eq(d->callstacks[0]->frame_ids[0], fr1, "root first, as given");
        perfetto__protos__trace_packet__free_unpacked(p, NULL);

        /* Nothing new: nothing written. */
        cr_assert_eq(intern_frame(w, f2, m, 0x2345), fr2);
        intern_write_pending(w, test_packet_begin(&pkt));
        cr_assert_eq(test_packet_end(&pkt), 0);

        /* A clear: ids restart, everything goes out again, CLEARED once. */
        size_t before = intern_count(w);
        cr_assert_gt(before, 0);
        intern_clear(w);
        cr_assert_eq(intern_count(w), 0);
        cr_assert_eq(intern_packet_flags(w), TracePacket_SEQ_INCREMENTAL_STATE_CLEARED | TracePacket_SEQ_NEEDS_INCREMENTAL_STATE);
        cr_assert_eq(intern_function_name(w, "leaf"), 1);
        intern_write_pending(w, test_packet_begin(&pkt));
        p = decode(&pkt);
        cr_assert_eq(p->interned_data->n_function_names, 1);
        cr_assert_str_eq(str_of(p->interned_data->function_names, 1, 1), "leaf");
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
        cr_assert_gt(intern_memory(w), 0);
        test_packet_done(&pkt);
        intern_writer_free(w);
}

Test(profiling_intern, many_entries) {
        struct intern_writer *w;
        cr_assert_eq(intern_writer_new(&w), 0);
        char name[32];
        for (int k = 0; k < 100000; k++) {
                snprintf(name, sizeof(name), "fn%d", k);
                cr_assert_eq(intern_function_name(w, name), (uint64_t) k + 1);
        }
        for (int k = 0; k < 100000; k += 997) {
                snprintf(name, sizeof(name), "fn%d", k);
                cr_assert_eq(intern_function_name(w, name), (uint64_t) k + 1);
        }
        uint64_t empty = intern_build_id(w, NULL, 0);
        cr_assert_gt(empty, 0);
        cr_assert_eq(intern_build_id(w, NULL, 0), empty);
        cr_assert_eq(intern_error(w), 0);
        intern_writer_free(w);
}

/* Mappings met again are answered from their description: the same iid
 * for the same mapping, another for one that differs in any part (path,
 * build id, numbers), and after a clear the mapping goes out again. */
Test(profiling_intern, mappings_met_again) {
        struct intern_writer *w;
        cr_assert_eq(intern_writer_new(&w), 0);
        static const uint8_t bid[] = { 1, 2, 3, 4 }, other_bid[] = { 1, 2, 3, 5 };
        uint64_t iids[600];
        char path[64];
        for (int round = 0; round < 2; round++)
                for (int k = 0; k < 600; k++) {
                        snprintf(path, sizeof(path), "/usr/lib/lib%d.so", k % 300);
                        struct intern_mapping im = { .build_id = bid, .build_id_len = 4, .path = path,
                                                     .start = 0x1000u * (uint64_t) (k / 300 + 1),
                                                     .end = 0x100000 };
                        uint64_t m = intern_mapping(w, &im);
                        cr_assert_gt(m, 0);
                        if (round == 0)
                                iids[k] = m;
                        else
                                cr_assert_eq(m, iids[k], "mapping %d: %llu, then %llu", k,
                                             (unsigned long long) iids[k], (unsigned long long) m);
                }
        for (int k = 1; k < 600; k++)
                cr_assert_neq(iids[k], iids[k - 1]);
        size_t count = intern_count(w);
        struct intern_mapping im = { .build_id = bid, .build_id_len = 4, .path = "/usr/lib/lib7.so",
                                     .start = 0x1000, .end = 0x100000 };
        cr_assert_eq(intern_mapping(w, &im), iids[7]);
        cr_assert_eq(intern_count(w), count, "nothing new interned for a mapping met again");
        im.build_id = other_bid;
        cr_assert_neq(intern_mapping(w, &im), iids[7]);
        im.build_id = bid;
        im.load_bias = 0x10;
        cr_assert_neq(intern_mapping(w, &im), iids[7]);
        im.load_bias = 0;
        im.path = "/usr/lib/lib8.so";
        cr_assert_eq(intern_mapping(w, &im), iids[8]);

        intern_clear(w);
        struct test_packet pkt = {};
        cr_assert_eq(intern_mapping(w, &im), 1, "ids restart after a clear");
        intern_write_pending(w, test_packet_begin(&pkt));
        Perfetto__Protos__TracePacket *p = decode(&pkt);
        cr_assert_not_null(p->interned_data);
        cr_assert_eq(p->interned_data->n_mappings, 1, "the mapping goes out again after a clear");
        cr_assert_eq(p->interned_data->n_mapping_paths, 3);
        perfetto__protos__trace_packet__free_unpacked(p, NULL);
        test_packet_done(&pkt);
        intern_writer_free(w);
}
