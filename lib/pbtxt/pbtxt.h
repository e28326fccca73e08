/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * Protobuf text format, for any message type protobuf-c describes: a parser
 * (what upstream Perfetto's text configs are written in) and a printer.
 * Unknown fields, bad values and syntax errors are reported with the file,
 * line, column and the field involved; nothing is silently dropped.
 */

#include <stddef.h>
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

/* Prints msg in text format, indented by indent spaces. Unknown fields are
 * printed as comments. */
void pbtxt_print(FILE *f, const ProtobufCMessage *msg, unsigned indent);
/* On one line, fields separated by spaces. */
void pbtxt_print_line(FILE *f, const ProtobufCMessage *msg);
