/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Event formats from events/<group>/<name>/format. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define FORMAT_MAX_FIELDS 32

struct format_field {
        char name[48];
        uint16_t offset;
        uint16_t size;
        bool is_signed;
        bool is_string;   /* char name[N] */
        bool is_data_loc; /* __data_loc: u32 (len << 16 | offset) */
        bool is_dyn_tail; /* char name[] with size 0: to the end of the record */
        bool is_kaddr;    /* void *: a kernel address, symbolized on request */
};

struct event_format {
        char group[64];
        char name[64];
        uint16_t id;
        struct format_field fields[FORMAT_MAX_FIELDS];
        size_t n_fields;
        int16_t common_pid_offset;
        int16_t common_flags_offset;
        /* The inode an event is about: the index in fields of its first
         * inode number (ino_t, or i_ino) and of its first dev_t; -1 none. */
        int8_t ino_field, dev_field;
        /* The encoder's lookups, made once on first use. */
        uint8_t enc_state; /* 0: not yet, 1: generic, 2: typed */
        uint8_t enc_typed; /* index in the encoder's table */
        const struct format_field *enc_fields[8];
};

/* Parses a format file's text. -EINVAL for what is not a format. */
int format_parse(const char *text, const char *group, struct event_format *ret);
const struct format_field *format_field(const struct event_format *f, const char *name);

/* Reads an integer field from a record (bounds-checked; 0 when outside). */
int64_t format_read_int(const struct format_field *f, const uint8_t *rec, size_t len);
/* Copies a string field into buf (NUL-terminated, truncated). */
void format_read_str(const struct format_field *f, const uint8_t *rec, size_t len, char *buf, size_t size);
/* A task name (char[16]) into comm: what format_read_str gives into 16
 * bytes, the rest zero. Cheap for the fixed arrays of sched events. */
void format_read_comm(const struct format_field *f, const uint8_t *rec, size_t len, char comm[16]);

/* A task name as two words (its 16 bytes in memory order): compared and
 * passed in registers, never stored and loaded back whole. */
struct comm16 {
        uint64_t w[2];
};

#if __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define FORMAT_COMM_WORDS 1
/* The 16 bytes of a char[16] at p as format_read_comm gives them (zero
 * from the first NUL on, 15 characters at most), in two word loads. */
static inline struct comm16 format_comm16(const uint8_t *p) {
        const uint64_t ones = UINT64_C(0x0101010101010101), highs = UINT64_C(0x8080808080808080);
        struct comm16 c;
        __builtin_memcpy(&c.w[0], p, 8);
        __builtin_memcpy(&c.w[1], p + 8, 8);
        c.w[1] &= UINT64_C(0x00ffffffffffffff); /* 15 characters at most */
        /* The lowest bit set marks the first zero byte. */
        uint64_t z = (c.w[0] - ones) & ~c.w[0] & highs;
        if (z) {
                unsigned at = (unsigned) __builtin_ctzll(z) / 8;
                c.w[0] &= at ? (UINT64_MAX >> (64 - 8 * at)) : 0;
                c.w[1] = 0;
                return c;
        }
        z = (c.w[1] - ones) & ~c.w[1] & highs;
        if (z) {
                unsigned at = (unsigned) __builtin_ctzll(z) / 8;
                c.w[1] &= at ? (UINT64_MAX >> (64 - 8 * at)) : 0;
        }
        return c;
}
#endif
