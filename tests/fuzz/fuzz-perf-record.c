/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Bytes as a perf ring's data area: every record copied out (with the
 * ring's wrap-around) and parsed under the layouts the plugin uses must
 * stay inside the input. The first byte picks the layout and the ring's
 * head offset. Each record is also compacted (its unfilled user stack cut)
 * and must parse again as the same record. */

#include <linux/perf_event.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/perf-record.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static const struct perf_layout layouts[] = {
        /* DWARF stacks with kernel callchains */
        { .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                         PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER,
          .n_user_regs = 17, .sample_id_all = true },
        /* frame pointers: callchains only */
        { .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD |
                         PERF_SAMPLE_CALLCHAIN,
          .sample_id_all = true },
        /* counting */
        { .sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_CPU | PERF_SAMPLE_PERIOD,
          .sample_id_all = false },
};

static void touch(const struct perf_record *r) {
        /* Read what the views point at, so a bad view is an overread. */
        volatile uint64_t sink = 0;
        if (r->kind == PERF_REC_SAMPLE) {
                for (uint64_t k = 0; k < r->u.sample.callchain_len; k++) {
                        uint64_t v;
                        memcpy(&v, &r->u.sample.callchain[k], 8);
                        sink += v;
                }
                for (uint64_t k = 0; k < r->u.sample.stack_size; k++)
                        sink += r->u.sample.stack[k];
        } else if (r->kind == PERF_REC_MMAP2)
                sink += strlen(r->u.mmap2.filename);
        else if (r->kind == PERF_REC_COMM)
                sink += strlen(r->u.comm.comm);
        (void) sink;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
        if (size < 2)
                return 0;
        const struct perf_layout *l = &layouts[data[0] % 3];
        data++;
        size--;
        /* A power-of-two ring holding the input. */
        uint64_t ring_size = 8;
        while (ring_size < size)
                ring_size *= 2;
        uint8_t *ring = calloc(1, ring_size);
        uint8_t *buf = malloc(65536);
        if (!ring || !buf) {
                free(ring);
                free(buf);
                return 0;
        }
        /* The input starts at an offset: records wrap around the end. */
        uint64_t start = (data[0] * 8u) % ring_size;
        for (size_t k = 0; k < size; k++)
                ring[(start + k) % ring_size] = data[k];
        uint64_t tail = start, head = start + size;
        for (;;) {
                int len = perf_ring_copy(ring, ring_size, tail, head, buf, 65536);
                if (len <= 0)
                        break;
                /* An exact-size copy, so overreads are caught. */
                uint8_t *rec = malloc((size_t) len);
                if (!rec)
                        break;
                memcpy(rec, buf, (size_t) len);
                struct perf_record r;
                if (perf_record_parse(rec, (size_t) len, l, &r) == 0)
                        touch(&r);
                /* The compacted copy (what the plugin queues) is no longer
                 * than the record and parses as the same sample. */
                int m = perf_record_compact(rec, (size_t) len, l, NULL);
                if (m > 0) {
                        uint8_t *out = malloc((size_t) len);
                        struct perf_record c;
                        if (!out || m > len || perf_record_compact(rec, (size_t) len, l, out) != m ||
                            perf_record_parse(out, (size_t) m, l, &c) != 0 || c.kind != r.kind ||
                            (c.kind == PERF_REC_SAMPLE && c.u.sample.stack_size != r.u.sample.stack_size))
                                abort();
                        touch(&c);
                        free(out);
                }
                free(rec);
                tail += (uint64_t) len;
        }
        free(ring);
        free(buf);
        return 0;
}
