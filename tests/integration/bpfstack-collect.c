/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <stdlib.h>
#include <string.h>

#include "bpfstack-collect.h"

static struct counter *counter_of(struct collect *c, uint64_t uuid) {
        for (size_t k = 0; k < c->n_counters; k++)
                if (c->counters[k].uuid == uuid)
                        return &c->counters[k];
        cr_assert_lt(c->n_counters, 32, "too many counter tracks");
        c->counters[c->n_counters].uuid = uuid;
        return &c->counters[c->n_counters++];
}

bool counter_value(const struct collect *c, const char *name, int64_t *ret) {
        for (size_t k = 0; k < c->n_counters; k++)
                if (c->counters[k].name && strcmp(c->counters[k].name, name) == 0 && c->counters[k].has_value) {
                        *ret = c->counters[k].value;
                        return true;
                }
        return false;
}

static struct seqstate *seq_of(struct collect *c, uint32_t id) {
        for (size_t k = 0; k < c->n_seq; k++)
                if (c->seq[k].id == id)
                        return &c->seq[k];
        cr_assert_lt(c->n_seq, 8);
        c->seq[c->n_seq].id = id;
        return &c->seq[c->n_seq++];
}

void collect_packet(const Perfetto__Protos__TracePacket *p, void *userdata) {
        struct collect *c = userdata;
        const Perfetto__Protos__PerfSample *ps =
                p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_PERF_SAMPLE ? p->perf_sample : NULL;
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_DESCRIPTOR) {
                const Perfetto__Protos__TrackDescriptor *td = p->track_descriptor;
                cr_assert(td->has_uuid && td->name && td->counter, "a counter track with a uuid and a name");
                struct counter *ct = counter_of(c, td->uuid);
                if (!ct->name)
                        ct->name = strdup(td->name);
                cr_assert_str_eq(ct->name, td->name, "one name per track");
                return;
        }
        if (p->data_case == PERFETTO__PROTOS__TRACE_PACKET__DATA_TRACK_EVENT) {
                const Perfetto__Protos__TrackEvent *te = p->track_event;
                cr_assert_eq(te->type, PERFETTO__PROTOS__TRACK_EVENT__TYPE__TYPE_COUNTER);
                cr_assert(te->has_track_uuid &&
                          te->counter_value_field_case ==
                                  PERFETTO__PROTOS__TRACK_EVENT__COUNTER_VALUE_FIELD_COUNTER_VALUE);
                struct counter *ct = counter_of(c, te->track_uuid);
                if (!ct->name && c->orphans_ok) {
                        c->orphans++;
                        return;
                }
                cr_assert_not_null(ct->name, "a counter value after its track's descriptor");
                cr_assert_eq(p->timestamp_clock_id, 6, "BOOTTIME timestamps");
                ct->value = te->counter_value;
                ct->has_value = true;
                return;
        }
        if (!ps && !p->trace_packet_defaults && !p->interned_data)
                return;
        struct seqstate *q = seq_of(c, p->trusted_packet_sequence_id);
        if (p->trace_packet_defaults && p->trace_packet_defaults->perf_sample_defaults) {
                const Perfetto__Protos__PerfEvents__Timebase *tb =
                        p->trace_packet_defaults->perf_sample_defaults->timebase;
                cr_assert_not_null(tb, "a timebase in the defaults");
                cr_assert_eq(p->trace_packet_defaults->timestamp_clock_id, 6, "BOOTTIME timestamps");
                if (!c->linux_perf) {
                        cr_assert_not_null(tb->name, "the timebase names this source");
                        cr_assert(strstr(tb->name, "linux.bpf_stack"), "timebase %s", tb->name);
                        q->off_cpu = strstr(tb->name, "off-CPU") != NULL;
                }
        }
        const Perfetto__Protos__InternedData *d = p->interned_data;
        if (d)
                interned_names_add(&q->names, d);
        if (!ps)
                return;
        grow_zeroed((void **) &c->s, &c->cap_s, c->n_s + 1, sizeof(*c->s));
        struct sample *s = &c->s[c->n_s++];
        s->off_cpu = q->off_cpu;
        s->pid = ps->pid;
        s->tid = ps->tid;
        s->cpu = ps->cpu;
        s->ts = p->timestamp;
        s->blocked_ns = ps->timebase_count;
        if (!ps->has_callstack_iid)
                return;
        if (c->orphans_ok && (ps->callstack_iid >= q->names.n_cs || !q->names.cs[ps->callstack_iid])) {
                c->orphans++; /* a sample without its stack */
                return;
        }
        cr_assert_lt(ps->callstack_iid, q->names.n_cs, "callstack interned before its use");
        uint64_t *frames = q->names.cs[ps->callstack_iid];
        size_t n = q->names.cs_n[ps->callstack_iid];
        cr_assert_not_null(frames);
        s->n_names = n;
        s->names = calloc(n + 1, sizeof(char *));
        for (size_t k = 0; k < n; k++) {
                uint64_t f = frames[n - 1 - k];
                cr_assert_lt(f, q->names.n_frame, "frame %llu interned", (unsigned long long) f);
                uint64_t name = q->names.frame_fn[f];
                s->names[k] = name && name < q->names.n_fn ? q->names.fn[name] : NULL;
        }
}

void collect_free(struct collect *c) {
        for (size_t j = 0; j < c->n_seq; j++) {
                struct seqstate *q = &c->seq[j];
                interned_names_free(&q->names);
        }
        for (size_t k = 0; k < c->n_s; k++)
                free(c->s[k].names);
        free(c->s);
        for (size_t k = 0; k < c->n_counters; k++)
                free(c->counters[k].name);
}

bool name_is(const struct sample *s, size_t k, const char *name) {
        return k < s->n_names && s->names[k] && strcmp(s->names[k], name) == 0;
}

bool ends_at_start(const struct sample *s) {
        return s->n_names > 0 && name_is(s, s->n_names - 1, "_start");
}
