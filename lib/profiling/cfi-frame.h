/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Internal to lib/profiling: the step from a row of libdw's call frame
 * information to a compact row, shared by the lazy lookup (cfi-rows.c)
 * and the whole-image table (cfi-table.c). Kept out of cfi-rows.h so that
 * the users of that header need no libdw. */

#include <elfutils/libdw.h>

#include "profiling/cfi-rows.h"

/* Fills *row from libdw's frame f: start and end always (as libdw reports
 * them), the rule when it is of the compact form. The caller zeroes *row
 * first (flags are or-ed in). 0, or -EOPNOTSUPP when the rule is not of
 * the compact form (the rule fields are then partly filled and
 * meaningless). */
int cfi_row_from_frame(Dwarf_Frame *f, struct cfi_row *row);
