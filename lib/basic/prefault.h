/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Tables that are read before they are written, at random places.
 *
 * A fresh anonymous page that is first read maps the shared zero page;
 * the first write after that is a copy-on-write fault, which also flushes
 * the page's translation on every CPU the process ran on (an
 * inter-processor interrupt, dear in a virtual machine). A hash table of
 * a few MiB pays that once a page in its first moments. Mapping the pages
 * for writing up front (MADV_POPULATE_WRITE, Linux 5.14) pays one batched
 * fault per table instead. */

#include <stddef.h>

/* Maps the whole pages of [p, p + n) for writing, leaving their contents
 * as they are. Returns 0, or a negative errno (-EINVAL: a kernel without
 * MADV_POPULATE_WRITE; -ENOMEM). The memory is usable either way. */
int prefault_write(void *p, size_t n);

/* calloc(n, size) whose pages are mapped for writing (best effort: a
 * kernel that cannot leaves them to fault in). NULL with errno set as
 * calloc sets it. Freed with free(). */
void *calloc_prefaulted(size_t n, size_t size);
