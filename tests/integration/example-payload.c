/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Helpers shared by the integration tests: each checks a trace against the
 * packets example-producer writes (for_testing packets whose payload is
 * `size` letters starting at 'a' + seq % 26, seq counting from 0). */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "basic/pbr.h"
#include "example-payload.h"

/* Checks every for_testing packet: payload byte-exact, seq in order. */
size_t example_check_packets(const uint8_t *buf, size_t len, size_t size) {
        static struct pbr_field pkts[100000];
        int n = pbr_split_trace(buf, len, pkts, 100000);
        cr_assert_geq(n, 0);
        size_t found = 0;
        char *expected = malloc(size + 1);
        for (int i = 0; i < n; i++) {
                struct pbr_field t, str, seq;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                if (found == 0)
                        cr_assert(!pbr_get(t.data, t.len, 2, false, &seq) || seq.varint == 0);
                else {
                        cr_assert(pbr_get(t.data, t.len, 2, false, &seq));
                        cr_assert_eq(seq.varint, found, "packet %zu out of order (got %llu)", found,
                                     (unsigned long long) seq.varint);
                }
                for (size_t k = 0; k < size; k++)
                        expected[k] = (char) ('a' + (found + k) % 26);
                cr_assert_eq(str.len, size, "packet %zu has %zu bytes, expected %zu", found, str.len, size);
                cr_assert_arr_eq(str.data, expected, size, "packet %zu corrupted", found);
                found++;
        }
        free(expected);
        return found;
}

/* Packets of several sequences: per trusted_packet_sequence_id, seq 0..
 * in order with the expected payload. Returns the number of sequences
 * that were complete with n packets each. */
unsigned example_check_sequences(const uint8_t *buf, size_t len, size_t size, unsigned long n) {
        static struct pbr_field pkts[100000];
        struct {
                uint64_t id;
                unsigned long next;
                bool bad;
        } seqs[64] = {};
        unsigned n_seqs = 0;
        int np = pbr_split_trace(buf, len, pkts, 100000);
        cr_assert_geq(np, 0);
        char *expected = malloc(size + 1);
        for (int i = 0; i < np; i++) {
                struct pbr_field t, str, seq, sid;
                if (!pbr_get(pkts[i].data, pkts[i].len, 900, false, &t))
                        continue;
                cr_assert(pbr_get(pkts[i].data, pkts[i].len, 10, false, &sid), "no trusted sequence id");
                unsigned k = 0;
                while (k < n_seqs && seqs[k].id != sid.varint)
                        k++;
                if (k == n_seqs) {
                        cr_assert_lt(n_seqs, 64);
                        seqs[n_seqs++].id = sid.varint;
                }
                cr_assert(pbr_get(t.data, t.len, 1, false, &str));
                uint64_t v = pbr_get(t.data, t.len, 2, false, &seq) ? seq.varint : 0;
                if (v != seqs[k].next)
                        seqs[k].bad = true;
                for (size_t b = 0; b < size; b++)
                        expected[b] = (char) ('a' + (v + b) % 26);
                if (str.len != size || memcmp(str.data, expected, size) != 0)
                        seqs[k].bad = true;
                seqs[k].next = v + 1;
        }
        free(expected);
        unsigned good = 0;
        for (unsigned k = 0; k < n_seqs; k++)
                if (!seqs[k].bad && seqs[k].next == n)
                        good++;
        return good;
}

