/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tracectl report --pprof DIR/: a profile beside each closed trace file of
 * a directory (a rotating session's), NAME.pftrace giving NAME.pb.gz, so a
 * backend ingests them as a series. A file still being written
 * (NAME.pftrace.part) is left for a later run, and a profile newer than
 * its trace is kept as it is: run again, only the new files are read. */

/* What one trace's report returns when the trace has no callstack
 * samples (not a failure of the directory's run). */
#define REPORT_DIR_NO_SAMPLES (-1)

/* Writes the profile of trace into pprof (both paths in dir): an exit
 * status, or REPORT_DIR_NO_SAMPLES. */
typedef int (*report_dir_fn)(void *userdata, const char *trace, const char *pprof);

/* Every closed trace file of dir in name order (the order a rotating
 * session made them); says on standard error what it wrote and skipped.
 * EXIT_OK when every trace with samples has its profile, else the first
 * failure's status. */
int report_dir(const char *dir, report_dir_fn fn, void *userdata);
