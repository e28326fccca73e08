/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

#include "traced/pbzero/perfetto/trace/ftrace/ftrace_event_bundle.pbw.h"

struct event_format;
struct kaddr_table;

/* Writes one kernel record, as an event of b (an FtraceEvent): a typed
 * message for the known events, GenericFtraceEvent else. */
void ftrace_encode_event(FtraceEventBundle *b, struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len);
/* The same, with kernel addresses (void * fields) written as iids of kt
 * (FtraceConfig.symbolize_ksyms) when kt is not NULL; the caller emits the
 * names of kt's new iids with the packet. kt must have room for every
 * field of the record (FORMAT_MAX_FIELDS). */
void ftrace_encode_event_ksyms(FtraceEventBundle *b, struct event_format *f, uint64_t ts, const uint8_t *rec,
                               size_t len, struct kaddr_table *kt);
