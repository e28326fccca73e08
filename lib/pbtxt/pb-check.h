/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Checks serialized protobuf against its descriptor before protobuf-c
 * unpacks it: protobuf-c (like every protobuf runtime) silently truncates a
 * varint too large for a 32-bit field, so a binary TraceConfig with
 * size_kb = 2^40 + 4 would become 4 KiB. This refuses such values. */

#include <stddef.h>
#include <stdint.h>

#include <protobuf-c/protobuf-c.h>

/* 0 when every 32-bit integer and enum field of data (nested messages
 * included) holds a value its type can represent; -ERANGE with *ret_error
 * (malloc'ed) naming the field, the value and the byte offset otherwise.
 * Malformed input is left to the unpacker (0). */
int pb_check_ranges(const ProtobufCMessageDescriptor *desc, const uint8_t *data, size_t len, char **ret_error);
