/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* The size of the kernel's ring-buffer sub-buffers (tracefs
 * buffer_subbuf_size_kb, Linux 6.8 and later): the unit the reader is
 * handed, by read() or through the mapping. Larger ones mean fewer reads
 * and fewer page headers per event; a buffer still needs enough of them
 * for the writer to keep going while one is being read. */

#include <stdint.h>

/* What the plugin asks for when TRACED_FTRACE_SUBBUF_KB is not set. */
#define SUBBUF_DEFAULT_KB 64u
/* The kernel's bound (128 pages of 4 KiB) and the fewest sub-buffers a
 * CPU's buffer is left with. */
#define SUBBUF_MAX_KB 512u
#define SUBBUF_MIN_COUNT 32u
#define SUBBUF_ENV "TRACED_FTRACE_SUBBUF_KB"

/* The sub-buffer size in KiB to ask for: want (the environment's value,
 * NULL for the default; "0" leaves the kernel's), made a power of two no
 * larger than SUBBUF_MAX_KB nor than buffer_kb / SUBBUF_MIN_COUNT. 0: keep
 * what the instance has (asked to, or a size no larger than a page).
 * -EINVAL for a value that is not a number. */
int subbuf_choose_kb(const char *want, uint32_t buffer_kb, uint32_t page_kb);
