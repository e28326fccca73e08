/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* A pprof profile (protos/third_party/pprof/profile.proto, gzip-compressed
 * as every consumer expects) written as it is made, with the typed writers
 * of profile.proto: the caller writes each field of the Profile on
 * pprof_writer_profile() (a Sample begun, filled and ended on it, or a
 * scalar set) and calls pprof_writer_flush() once it ended; what is
 * written goes to deflate every 64 KiB, so memory holds the string table
 * and about one message, never the profile. The file appears whole or
 * not at all (record-output.h: a temporary name, renamed on commit).
 * Strings are interned into the table the format requires (index 0 is
 * ""), written last: protobuf takes a message's fields in any order.
 *
 *     perftools_profiles_Sample s;
 *     perftools_profiles_Profile_begin_sample(pprof_writer_profile(w), &s);
 *     ...
 *     perftools_profiles_Profile_end_sample(pprof_writer_profile(w), &s);
 *     pprof_writer_flush(w);
 *
 * One profile per writer; a caller converting several traces opens one
 * writer per output file. Errors are sticky: every call after one does
 * nothing, and pprof_writer_commit returns it. */

#include <stdint.h>

#include "traced/pbzero/third_party/pprof/profile.pbw.h"

struct pprof_writer;

/* Creates the file (path "-": standard output). 0 or -errno. */
int pprof_writer_open(const char *path, struct pprof_writer **ret);
/* Removes the file unless committed. NULL is fine. */
void pprof_writer_free(struct pprof_writer *w);

/* The string's index in the table (0 for "" and NULL), interned on first
 * use; 0 as well after an error (sticky). */
int64_t pprof_string(struct pprof_writer *w, const char *s);
/* The profile's root message, to write its fields on. Nothing but the
 * caller's field is open in it at a time; after an error what is written
 * on it is dropped. */
perftools_profiles_Profile *pprof_writer_profile(struct pprof_writer *w);
/* Called once the field written on the profile ended: hands what was
 * written to deflate when it passed 64 KiB. */
void pprof_writer_flush(struct pprof_writer *w);
/* Bytes written so far (before compression). */
uint64_t pprof_writer_size(const struct pprof_writer *w);

/* Writes the string table, ends the gzip stream and puts the file in
 * place. 0, or the first error met (-ENOMEM, -EIO, -ENOSPC, ...): then the
 * file named was left as it was. */
int pprof_writer_commit(struct pprof_writer *w);
