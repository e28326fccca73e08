/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Protobuf text format, for any message type protobuf-c describes: a parser
 * (what upstream Perfetto's text configs are written in) and a printer.
 * Unknown fields, bad values and syntax errors are reported with the file,
 * line, column and the field involved; nothing is silently dropped.
 */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include <protobuf-c/protobuf-c.h>

#define PBTXT_MAX_DEPTH 100
#define PBTXT_MAX_INPUT (16u * 1024u * 1024u)

/*
 * Parses text into a new message of type desc. On success *ret_msg is
 * freed with protobuf_c_message_free_unpacked(msg, NULL). On failure
 * returns -EINVAL (syntax or schema error), -E2BIG or -ENOMEM, and
 * *ret_error (if non-NULL) gets a malloc'ed message of the form
 * "FILE:LINE:COL: what" (filename may be NULL: "<input>").
 */
int pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, const char *filename,
                ProtobufCMessage **ret_msg, char **ret_error);

/*
 * Where the fields of a parsed message were written, for errors found
 * after parsing (a value that is valid alone but not with the rest): one
 * entry per field name in the text, the field number of the message it
 * belongs to (each element of a repeated field its own), and for a
 * message-typed field an entry with field 0 for the sub-message itself.
 */
struct pbtxt_position {
        const ProtobufCMessage *msg;
        uint32_t field;
        unsigned line, col;
};
struct pbtxt_positions {
        struct pbtxt_position *v;
        size_t n, cap;
};

/* pbtxt_parse, also filling *ret_pos (emptied with pbtxt_positions_done;
 * on failure it is empty). The positions point into *ret_msg: they are
 * valid while it is. */
int pbtxt_parse_positions(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                          const char *filename, ProtobufCMessage **ret_msg, char **ret_error,
                          struct pbtxt_positions *ret_pos);
/* Where field (0: the message itself) of msg was first written. */
bool pbtxt_position_find(const struct pbtxt_positions *pos, const ProtobufCMessage *msg, uint32_t field,
                         unsigned *ret_line, unsigned *ret_col);
void pbtxt_positions_done(struct pbtxt_positions *pos);

/* Prints msg in text format, indented by indent spaces. Unknown fields are
 * printed as comments. */
void pbtxt_print(FILE *f, const ProtobufCMessage *msg, unsigned indent);
/* On one line, fields separated by spaces. */
void pbtxt_print_line(FILE *f, const ProtobufCMessage *msg);
