/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "test-packets.h"
#include "perfetto/trace/trace_packet.pb-c.h"
#include "profiling/symbolizer.h"

__attribute__((noinline, used)) int symbolizer_probe_function(int x);
__attribute__((noinline, used)) int symbolizer_probe_function(int x) {
        return x * 5 + 2;
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

Test(profiling_symbolizer, user_and_kernel_frames) {
        struct proc_table *procs;
        struct elf_cache *elves;
        struct ksyms *ks;
        struct intern_writer *w;
        static const char kallsyms[] = "ffffffff81000000 T do_syscall_64\nffffffff81001000 T schedule\n";
        FILE *f = fmemopen((void *) kallsyms, sizeof(kallsyms) - 1, "r");
        cr_assert_eq(ksyms_load(f, &ks), 0);
        fclose(f);
        cr_assert_eq(proc_table_new(NULL, &procs), 0);
        cr_assert_eq(elf_cache_new(NULL, &elves), 0);
        cr_assert_eq(intern_writer_new(&w), 0);
        struct symbolizer s = { .procs = procs, .elves = elves, .ksyms = ks };

        struct proc_info *p = proc_table_get(procs, getpid());
        uint64_t pc = (uint64_t) (uintptr_t) symbolizer_probe_function + 3;
        struct symbolized r;
        symbolizer_resolve(&s, p, pc, &r);
        cr_assert_not_null(r.map);
        cr_assert_not_null(r.image);
        cr_assert_str_eq(r.function, "symbolizer_probe_function");

        uint64_t uf = symbolizer_user_frame(&s, w, p, pc);
        uint64_t kf = symbolizer_kernel_frame(&s, w, 0xffffffff81000010ull);
        uint64_t nf = symbolizer_user_frame(&s, w, p, 0x10); /* nothing mapped there */
        cr_assert(uf && kf && nf);
        cr_assert_eq(symbolizer_user_frame(&s, w, p, pc), uf);

        struct test_packet pkt = {};
        intern_write_pending(w, test_packet_begin(&pkt));
        ssize_t n = test_packet_end(&pkt);
        cr_assert_geq(n, 0);
        Perfetto__Protos__TracePacket *tp = perfetto__protos__trace_packet__unpack(NULL, (size_t) n, pkt.buf);
        cr_assert_not_null(tp);
        Perfetto__Protos__InternedData *d = tp->interned_data;
        Perfetto__Protos__Frame *ufr = NULL, *kfr = NULL;
        for (size_t k = 0; k < d->n_frames; k++) {
                if (d->frames[k]->iid == uf)
                        ufr = d->frames[k];
                if (d->frames[k]->iid == kf)
                        kfr = d->frames[k];
        }
        cr_assert(ufr && kfr);
        cr_assert_str_eq(str_of(d->function_names, d->n_function_names, ufr->function_name_id),
                         "symbolizer_probe_function");
        cr_assert_str_eq(str_of(d->function_names, d->n_function_names, kfr->function_name_id), "do_syscall_64");
        cr_assert_eq(kfr->rel_pc, 0xffffffff81000010ull);
        Perfetto__Protos__Mapping *um = NULL;
        for (size_t k = 0; k < d->n_mappings; k++)
                if (d->mappings[k]->iid == ufr->mapping_id)
                        um = d->mappings[k];
        cr_assert_not_null(um);
        cr_assert_eq(um->start, r.map->start);
        const char *last = str_of(d->mapping_paths, d->n_mapping_paths, um->path_string_ids[um->n_path_string_ids - 1]);
        cr_assert_str_eq(last, "test-profiling-symbolizer");
        size_t len;
        const uint8_t *bid = elf_image_build_id(r.image, &len);
        const char *sbid = NULL;
        for (size_t k = 0; k < d->n_build_ids; k++)
                if (d->build_ids[k]->iid == um->build_id && d->build_ids[k]->str.len == len)
                        sbid = (const char *) d->build_ids[k]->str.data;
        cr_assert_not_null(sbid);
        cr_assert_eq(memcmp(sbid, bid, len), 0);
        perfetto__protos__trace_packet__free_unpacked(tp, NULL);
        test_packet_done(&pkt);
        intern_writer_free(w);
        elf_cache_free(elves);
        proc_table_free(procs);
        ksyms_free(ks);
}
