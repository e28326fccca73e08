/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>

#include "subbuf.h"

int subbuf_choose_kb(const char *want, uint32_t buffer_kb, uint32_t page_kb) {
        unsigned long kb = SUBBUF_DEFAULT_KB;
        if (want) {
                char *end;
                errno = 0;
                kb = strtoul(want, &end, 10);
                if (errno || end == want || *end || want[0] == '-')
                        return -EINVAL;
        }
        if (kb > SUBBUF_MAX_KB)
                kb = SUBBUF_MAX_KB;
        if (kb > buffer_kb / SUBBUF_MIN_COUNT)
                kb = buffer_kb / SUBBUF_MIN_COUNT;
        /* Down to a power of two, as the kernel would round it up. */
        while (kb & (kb - 1))
                kb &= kb - 1;
        return kb > page_kb ? (int) kb : 0;
}
