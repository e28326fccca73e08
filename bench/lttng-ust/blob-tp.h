/* SPDX-License-Identifier: LGPL-2.1-or-later */
/* The LTTng-UST tracepoint the throughput benchmark's peer writes: one
 * byte sequence per event, the same payload example-producer sends. */
#undef LTTNG_UST_TRACEPOINT_PROVIDER
#define LTTNG_UST_TRACEPOINT_PROVIDER traced_bench

#undef LTTNG_UST_TRACEPOINT_INCLUDE
#define LTTNG_UST_TRACEPOINT_INCLUDE "./blob-tp.h"

#if !defined(BLOB_TP_H) || defined(LTTNG_UST_TRACEPOINT_HEADER_MULTI_READ)
#define BLOB_TP_H

#include <lttng/tracepoint.h>

LTTNG_UST_TRACEPOINT_EVENT(traced_bench, blob,
        LTTNG_UST_TP_ARGS(const char *, data, unsigned int, len, unsigned long, seq),
        LTTNG_UST_TP_FIELDS(
                lttng_ust_field_sequence_text(char, str, data, unsigned int, len)
                lttng_ust_field_integer(unsigned long, seq, seq)
        )
)

#endif

#include <lttng/tracepoint-event.h>
