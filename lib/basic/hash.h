/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* FNV-1a, 64 and 32 bits, and a finaliser for integer keys.
 *
 * FNV-1a values are stable: the machine id derived from a relay's hint
 * (ipc_machine_id_from_hint) and the trigger-name history are computed
 * with them, so the constants and the byte order of the input must never
 * change. Everything here is inline: the callers hash on hot paths. */

#include <stddef.h>
#include <stdint.h>

#define FNV1A64_OFFSET UINT64_C(0xcbf29ce484222325)
#define FNV1A64_PRIME UINT64_C(0x100000001b3)
#define FNV1A32_OFFSET UINT32_C(2166136261)
#define FNV1A32_PRIME UINT32_C(16777619)

/* One FNV-1a round: folds v (a byte, or a whole word for callers that
 * hash words rather than bytes) into h. */
static inline uint64_t fnv1a64_step(uint64_t h, uint64_t v) {
        return (h ^ v) * FNV1A64_PRIME;
}

/* Continues h over n bytes; start from FNV1A64_OFFSET. */
static inline uint64_t fnv1a64_update(uint64_t h, const void *p, size_t n) {
        const uint8_t *b = p;
        for (size_t i = 0; i < n; i++)
                h = fnv1a64_step(h, b[i]);
        return h;
}

static inline uint64_t fnv1a64(const void *p, size_t n) {
        return fnv1a64_update(FNV1A64_OFFSET, p, n);
}

/* Of a NUL-terminated string, the NUL left out. */
static inline uint64_t fnv1a64_str(const char *s) {
        uint64_t h = FNV1A64_OFFSET;
        for (const uint8_t *c = (const uint8_t *) s; *c; c++)
                h = fnv1a64_step(h, *c);
        return h;
}

static inline uint32_t fnv1a32(const void *p, size_t n) {
        const uint8_t *b = p;
        uint32_t h = FNV1A32_OFFSET;
        for (size_t i = 0; i < n; i++)
                h = (h ^ b[i]) * FNV1A32_PRIME;
        return h;
}

/* Spreads the bits of an integer key over all 64 (the 64-bit finaliser of
 * MurmurHash3): for tables indexed by the low bits of the result. */
static inline uint64_t hash_u64(uint64_t k) {
        k ^= k >> 33;
        k *= UINT64_C(0xff51afd7ed558ccd);
        k ^= k >> 33;
        k *= UINT64_C(0xc4ceb9fe1a85ec53);
        k ^= k >> 33;
        return k;
}
