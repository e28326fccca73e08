/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* All the call frame information of one x86-64 ELF image at once, as a
 * sorted array of compact rows (profiling/cfi-rows.h) ready to be copied
 * into a BPF map: a stack walker in the kernel looks an address up with a
 * binary search for the last row whose start is not above it.
 *
 * The rows are sorted by start and contiguous: each row's end is the next
 * row's start, and rows with identical rules are merged. Addresses the
 * image has no call frame information for (gaps between its FDEs) are
 * covered by rows flagged CFI_NONE; rules that are not of the compact form
 * by rows flagged CFI_REFUSED (a general unwinder's business). The last row
 * is always a CFI_NONE row that starts where the image's last FDE ends and
 * ends at UINT64_MAX. Addresses below the first row's start have no call
 * frame information either.
 *
 * The FDEs are found through the binary search table of .eh_frame_hdr and
 * in .debug_frame (code built without unwind tables but with -g has its
 * rules only there); where both describe the same start, .eh_frame's
 * rules are used. The rules are read through libdw. */

#include <stddef.h>
#include <stdint.h>

#include "profiling/cfi-rows.h"

/* data/size: the whole ELF file in memory; only read during the call.
 * On success, *ret_rows is a malloc'd array of *ret_n rows (at least one)
 * that the caller frees. Errors (nothing returned):
 *   -EINVAL      not an ELF image, or a malformed .eh_frame_hdr (a version
 *                other than 1, a table out of bounds or not sorted);
 *   -EOPNOTSUPP  not x86-64, or .eh_frame_hdr encodings other than those
 *                GNU ld and lld emit (a udata4 count, a datarel sdata4
 *                table), or no table in it and no .debug_frame either;
 *   -ENOENT      neither .eh_frame_hdr nor .debug_frame: the image has
 *                no call frame information we can find;
 *   -E2BIG       more than max_rows rows;
 *   -ENOMEM. */
int cfi_table_compile(const uint8_t *data, size_t size, size_t max_rows, struct cfi_row **ret_rows, size_t *ret_n);
