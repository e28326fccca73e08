/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A small protobuf reader: finds fields in serialized bytes
 * without generated code (tests check the wire format with it; plugins
 * read their configs with it). */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct pbr_field {
        uint32_t number;
        unsigned wire_type;
        uint64_t varint;       /* wire types 0, 1, 5 */
        const uint8_t *data;   /* wire type 2 */
        size_t len;
};

/* Iterates fields: *pos starts at 0. Returns 1 with a field, 0 at the end,
 * -1 on malformed input. */
int pbr_next(const uint8_t *buf, size_t len, size_t *pos, struct pbr_field *ret);
/* First (or, with last=true, last) occurrence of field number. */
bool pbr_get(const uint8_t *buf, size_t len, uint32_t number, bool last, struct pbr_field *ret);
/* Number of occurrences of a field. */
size_t pbr_count(const uint8_t *buf, size_t len, uint32_t number);
/* Splits a Trace (repeated field 1) into packets; returns the count or -1. */
int pbr_split_trace(const uint8_t *buf, size_t len, struct pbr_field *ret, size_t max);
