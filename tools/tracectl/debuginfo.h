/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Symbols, source lines and inlined frames of the files a trace's frames
 * are in, read at report time with libdw (libdwfl): the file at the
 * mapping's path when its build ID is the one the trace recorded (with its
 * separate debug file from /usr/lib/debug, by build ID or .gnu_debuglink),
 * else, when the user opted in, the file and debug file that a debuginfod
 * server has for that build ID (libdebuginfod, with its cache). Never
 * used while recording.
 *
 * A file is opened once (by build ID, else by path); what could not be
 * found is remembered as such. Ownership: every string handed out belongs
 * to the struct debuginfo and lives until debuginfo_free. One thread. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

struct debuginfo_options {
        const char *urls;   /* the servers to ask (DEBUGINFOD_URLS syntax), NULL: none */
        unsigned timeout_s; /* longest wait for one file; 0: 30 s */
};

/* The servers to ask, when the user opted in (*ret_urls, to free; NULL
 * when not): the --debuginfod=URLS argument urls, else with want
 * (--debuginfod) or by default DEBUGINFOD_URLS as elfutils documents it,
 * else for want the lists in /etc/debuginfod/ *.urls; none with refuse
 * (--no-debuginfod). DEBUGINFOD_URLS is then removed from the
 * environment: only debuginfo_new's lookups, with their timeout, ask a
 * server, never a library on its own. -ENOENT: want, but no server known;
 * -ENOMEM. */
int debuginfo_opt_in(const char *urls, bool want, bool refuse, char **ret_urls);

struct debuginfo;

int debuginfo_new(const struct debuginfo_options *o, struct debuginfo **ret);
void debuginfo_free(struct debuginfo *d);

/* One function of a location, innermost (inlined) first; function is NULL
 * when the debug information names none, file NULL and line 0 when it
 * has no line for the address. */
struct debuginfo_line {
        const char *function;     /* as the source names it (DW_AT_name) */
        const char *linkage_name; /* the symbol's name (mangled), or NULL */
        const char *file;
        uint32_t line, column;
};

/* The lines of address rel_pc (a virtual address of the file) of the file
 * at path with build_id (hex; either may be NULL): their number (0: none
 * known), *ret valid until the next call. */
size_t debuginfo_lines(struct debuginfo *d, const char *path, const char *build_id, uint64_t rel_pc,
                       const struct debuginfo_line **ret);
/* The name of the function holding rel_pc, from the file's symbol table or
 * its debug information; NULL when neither names one. */
const char *debuginfo_function(struct debuginfo *d, const char *path, const char *build_id, uint64_t rel_pc);

/* What the lookups found, for a line on stderr. */
struct debuginfo_stats {
        unsigned files_local, files_debuginfod, files_missing, files_build_id_differs, debuginfod_failures;
        bool debuginfod_gave_up; /* a server timed out or failed: no more asking */
};
void debuginfo_stats(const struct debuginfo *d, struct debuginfo_stats *ret);
/* Says on f (one line each) which files were missing or differed, when any. */
void debuginfo_print_problems(const struct debuginfo *d, FILE *f, const char *prefix);
