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

static void grow(void **p, size_t *n, size_t need, size_t elem) {
        if (need <= *n)
                return;
        size_t cap = need * 2;
        *p = realloc(*p, cap * elem);
        cr_assert_not_null(*p);
        memset((char *) *p + *n * elem, 0, (cap - *n) * elem);
        *n = cap;
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
        if (d) {
                for (size_t k = 0; k < d->n_function_names; k++) {
                        uint64_t iid = d->function_names[k]->iid;
                        grow((void **) &q->fn, &q->n_fn, iid + 1, sizeof(*q->fn));
                        free(q->fn[iid]);
                        q->fn[iid] =
                                strndup((const char *) d->function_names[k]->str.data, d->function_names[k]->str.len);
                }
                for (size_t k = 0; k < d->n_frames; k++) {
                        uint64_t iid = d->frames[k]->iid;
                        grow((void **) &q->frame_fn, &q->n_frame, iid + 1, sizeof(*q->frame_fn));
                        q->frame_fn[iid] = d->frames[k]->function_name_id;
                }
                for (size_t k = 0; k < d->n_callstacks; k++) {
                        uint64_t iid = d->callstacks[k]->iid;
                        size_t had = q->n_cs;
                        grow((void **) &q->cs, &had, iid + 1, sizeof(*q->cs));
                        grow((void **) &q->cs_n, &q->n_cs, iid + 1, sizeof(*q->cs_n));
                        free(q->cs[iid]);
                        q->cs_n[iid] = d->callstacks[k]->n_frame_ids;
                        q->cs[iid] = malloc((q->cs_n[iid] + 1) * sizeof(uint64_t));
                        memcpy(q->cs[iid], d->callstacks[k]->frame_ids, q->cs_n[iid] * sizeof(uint64_t));
                }
        }
        if (!ps)
                return;
        grow((void **) &c->s, &c->cap_s, c->n_s + 1, sizeof(*c->s));
        struct sample *s = &c->s[c->n_s++];
        s->off_cpu = q->off_cpu;
        s->pid = ps->pid;
        s->tid = ps->tid;
        s->cpu = ps->cpu;
        s->ts = p->timestamp;
        s->blocked_ns = ps->timebase_count;
        if (!ps->has_callstack_iid)
                return;
        if (c->orphans_ok && (ps->callstack_iid >= q->n_cs || !q->cs[ps->callstack_iid])) {
                c->orphans++; /* a sample without its stack */
                return;
        }
        cr_assert_lt(ps->callstack_iid, q->n_cs, "callstack interned before its use");
        uint64_t *frames = q->cs[ps->callstack_iid];
        size_t n = q->cs_n[ps->callstack_iid];
        cr_assert_not_null(frames);
        s->n_names = n;
        s->names = calloc(n + 1, sizeof(char *));
        for (size_t k = 0; k < n; k++) {
                uint64_t f = frames[n - 1 - k];
                cr_assert_lt(f, q->n_frame, "frame %llu interned", (unsigned long long) f);
                uint64_t name = q->frame_fn[f];
                s->names[k] = name && name < q->n_fn ? q->fn[name] : NULL;
        }
}

void collect_free(struct collect *c) {
        for (size_t j = 0; j < c->n_seq; j++) {
                struct seqstate *q = &c->seq[j];
                for (size_t k = 0; k < q->n_fn; k++)
                        free(q->fn[k]);
                for (size_t k = 0; k < q->n_cs; k++)
                        free(q->cs[k]);
                free(q->fn);
                free(q->frame_fn);
                free(q->cs);
                free(q->cs_n);
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
