/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A pprof profile (profile.proto, gzip-compressed as every consumer
 * expects) written as it is made: each top-level message is deflated the
 * moment the caller hands it over, so memory holds the string table and
 * one message, never the profile. The file appears whole or not at all
 * (record-output.h: a temporary name, renamed on commit). Strings are
 * interned into the table the format requires (index 0 is ""), written
 * last: protobuf takes a message's fields in any order.
 *
 * One profile per writer; a caller converting several traces opens one
 * writer per output file. Errors are sticky: every call after one does
 * nothing, and pprof_writer_commit returns it. */

#include <stdint.h>

#include "basic/pbw.h"

struct pprof_writer;

/* Creates the file (path "-": standard output). 0 or -errno. */
int pprof_writer_open(const char *path, struct pprof_writer **ret);
/* Removes the file unless committed. NULL is fine. */
void pprof_writer_free(struct pprof_writer *w);

/* The string's index in the table (0 for "" and NULL), interned on first
 * use; 0 as well after an error (sticky). */
int64_t pprof_string(struct pprof_writer *w, const char *s);
/* Appends one field of Profile: a message, or a varint. */
void pprof_write_message(struct pprof_writer *w, uint32_t field, const struct pbw *m);
void pprof_write_varint(struct pprof_writer *w, uint32_t field, uint64_t v);
/* Bytes handed over so far (before compression). */
uint64_t pprof_writer_size(const struct pprof_writer *w);

/* Writes the string table, ends the gzip stream and puts the file in
 * place. 0, or the first error met (-ENOMEM, -EIO, -ENOSPC, ...): then the
 * file named was left as it was. */
int pprof_writer_commit(struct pprof_writer *w);
