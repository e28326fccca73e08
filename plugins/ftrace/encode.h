/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stddef.h>
#include <stdint.h>

struct event_format;
struct pbw;

/* Appends one kernel record, as FtraceEventBundle.event (an FtraceEvent),
 * to w: a typed message for the known events, GenericFtraceEvent else. */
void ftrace_encode_event(struct pbw *w, struct event_format *f, uint64_t ts, const uint8_t *rec, size_t len);
