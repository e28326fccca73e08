/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The rules for sized structures a caller built against another version
 * of a public header hands over (libtraced-client's options and ops, the
 * plugin ABI's descriptor and ops): a shorter structure is fine (the
 * reader checks the size before each later field); a longer one is fine
 * only when every byte this side does not know is zero, i.e. the caller
 * uses nothing this side lacks (the reader refuses it with -E2BIG); flag
 * bits this side does not know are refused with -EINVAL. */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Beyond this a structure's size is taken for garbage (-EINVAL), not for a
 * newer caller's: nothing reads that far. */
#define ABI_STRUCT_MAX 4096u

/* Whether bytes [known, size) of s are all zero. */
static inline bool abi_tail_is_zero(const void *s, size_t known, size_t size) {
        const uint8_t *b = s;
        for (size_t k = known; k < size; k++)
                if (b[k] != 0)
                        return false;
        return true;
}

/* 0, or -E2BIG when s (size bytes, this side knowing `known`) uses more. */
static inline int abi_check_tail(const void *s, size_t known, size_t size) {
        return abi_tail_is_zero(s, known, size) ? 0 : -E2BIG;
}

/* 0, or -EINVAL when flags holds a bit outside known. */
static inline int abi_check_flags(uint64_t flags, uint64_t known) {
        return (flags & ~known) ? -EINVAL : 0;
}

/* The first field of a sized structure, a uint32_t. On 64-bit big-endian
 * targets a caller built when that field was a size_t wrote its size in
 * the next four bytes, and zero in these: read it there. */
static inline uint32_t abi_struct_size(const void *s) {
        uint32_t size;
        __builtin_memcpy(&size, s, sizeof(size));
#if __BYTE_ORDER__ == __ORDER_BIG_ENDIAN__ && __SIZEOF_POINTER__ == 8
        if (size == 0)
                __builtin_memcpy(&size, (const uint8_t *) s + sizeof(size), sizeof(size));
#endif
        return size;
}
