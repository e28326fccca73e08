/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "basic/macro.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/parked.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-rotate.h"
#include "core/sessions/session-stats.h"
#include "core/buffers/trace-buffer.h"
#include "core/limits.h"

Perfetto__Protos__TraceStats *session_build_trace_stats(struct session *s) {
        struct traced_service *svc = s->svc;
        Perfetto__Protos__TraceStats *st = calloc(1, sizeof(*st));
        if (!st)
                return NULL;
        perfetto__protos__trace_stats__init(st);

        st->buffer_stats = calloc(s->n_buffers ? s->n_buffers : 1, sizeof(*st->buffer_stats));
        if (!st->buffer_stats) {
                free(st);
                return NULL;
        }
        for (size_t i = 0; i < s->n_buffers; i++) {
                Perfetto__Protos__TraceStats__BufferStats *b = calloc(1, sizeof(*b));
                if (!b) {
                        session_free_trace_stats(st);
                        return NULL;
                }
                perfetto__protos__trace_stats__buffer_stats__init(b);
                const struct trace_buffer_stats *t = trace_buffer_get_stats(s->buffers[i].tb), *base;
                /* A rotating session's file counts what happened while it
                 * was written. */
                session_rotate_stats_base(s, i, &base);
#define SET(f)                                          \
        do {                                            \
                b->has_##f = true;                      \
                b->f = t->f - (base ? base->f : 0);     \
        } while (0)
                b->has_buffer_size = true;
                b->buffer_size = t->buffer_size;
                SET(bytes_written);
                SET(bytes_overwritten);
                SET(bytes_read);
                SET(padding_bytes_written);
                SET(padding_bytes_cleared);
                SET(chunks_written);
                SET(chunks_rewritten);
                SET(chunks_overwritten);
                SET(chunks_discarded);
                SET(chunks_read);
                SET(chunks_committed_out_of_order);
                SET(write_wrap_count);
                SET(patches_succeeded);
                SET(patches_failed);
                SET(readaheads_succeeded);
                SET(readaheads_failed);
                SET(abi_violations);
                SET(trace_writer_packet_loss);
#undef SET
                st->buffer_stats[st->n_buffer_stats++] = b;
        }

        size_t n_ds = 0;
        for (struct producer *p = svc->producers; p; p = p->next)
                n_ds += p->n_data_sources;
        st->has_producers_connected = true;
        st->producers_connected = (uint32_t) svc->n_producers;
        st->has_producers_seen = true;
        st->producers_seen = svc->last_producer_id;
        st->has_data_sources_registered = true;
        st->data_sources_registered = (uint32_t) n_ds;
        st->has_data_sources_seen = true;
        st->data_sources_seen = svc->last_ds_instance_id;
        st->has_tracing_sessions = true;
        st->tracing_sessions = (uint32_t) svc->n_sessions;
        st->has_total_buffers = true;
        st->total_buffers = (uint32_t) s->n_buffers;
        st->has_chunks_discarded = true;
        st->chunks_discarded = s->chunks_discarded_no_buffer + s->chunks_torn;
        st->has_patches_discarded = true;
        st->patches_discarded = s->patches_discarded;
        st->has_invalid_packets = true;
        st->invalid_packets = s->packets_invalid;
        st->has_flushes_requested = true;
        st->flushes_requested = s->flushes_requested;
        st->has_flushes_succeeded = true;
        st->flushes_succeeded = s->flushes_succeeded;
        st->has_flushes_failed = true;
        st->flushes_failed = s->flushes_failed;
        if (s->rot) {
                const struct session_rotation *rot = s->rot;
                st->chunks_discarded -= rot->base_discarded;
                st->patches_discarded -= rot->base_patches;
                st->invalid_packets -= rot->base_invalid;
                st->flushes_requested -= rot->base_flushes_requested;
                st->flushes_succeeded -= rot->base_flushes_succeeded;
                st->flushes_failed -= rot->base_flushes_failed;
        }
        if (s->end_reason) {
                st->has_traced_end_reason = true;
                st->traced_end_reason = s->end_reason;
        }
        /* The session's own: freed with it, not with st. */
        st->n_traced_data_source_errors = s->n_ds_errors;
        st->traced_data_source_errors = s->ds_errors;
        return st;
}

static bool same(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

static bool add_error(struct session *s, const char *producer, const char *data_source, const char *field,
                      const char *message, Perfetto__Protos__TraceStats__TracedDataSourceError__Kind kind) {
        for (size_t i = 0; i < s->n_ds_errors; i++) {
                const Perfetto__Protos__TraceStats__TracedDataSourceError *e = s->ds_errors[i];
                if (same(e->producer_name, producer) && same(e->data_source_name, data_source) &&
                    same(e->field, field) && same(e->message, message))
                        return false;
        }
        if (s->n_ds_errors >= SERVICE_MAX_DS_ERRORS)
                return false;
        Perfetto__Protos__TraceStats__TracedDataSourceError **a =
                realloc(s->ds_errors, (s->n_ds_errors + 1) * sizeof(*s->ds_errors));
        if (!a)
                return false;
        s->ds_errors = a;
        Perfetto__Protos__TraceStats__TracedDataSourceError *e = calloc(1, sizeof(*e));
        if (!e)
                return false;
        perfetto__protos__trace_stats__traced_data_source_error__init(e);
        e->producer_name = producer ? strndup(producer, SERVICE_MAX_DS_ERROR_LEN) : NULL;
        e->data_source_name = data_source ? strndup(data_source, SERVICE_MAX_DS_ERROR_LEN) : NULL;
        e->field = field ? strndup(field, SERVICE_MAX_DS_ERROR_LEN) : NULL;
        e->message = message ? strndup(message, SERVICE_MAX_DS_ERROR_LEN) : NULL;
        if (kind != PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_REPORTED) {
                e->has_kind = true;
                e->kind = kind;
        }
        s->ds_errors[s->n_ds_errors++] = e;
        return true;
}

bool session_add_ds_error(struct session *s, const char *producer, const char *data_source, const char *field,
                          const char *message) {
        return add_error(s, producer, data_source, field, message,
                         PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_REPORTED);
}

bool session_add_ds_loss(struct session *s, const char *producer, const char *data_source, const char *message) {
        return add_error(s, producer, data_source, NULL, message,
                         PERFETTO__PROTOS__TRACE_STATS__TRACED_DATA_SOURCE_ERROR__KIND__KIND_INSTANCE_LOST);
}

void session_free_ds_errors(struct session *s) {
        for (size_t i = 0; i < s->n_ds_errors; i++) {
                free(s->ds_errors[i]->producer_name);
                free(s->ds_errors[i]->data_source_name);
                free(s->ds_errors[i]->field);
                free(s->ds_errors[i]->message);
                free(s->ds_errors[i]);
        }
        free(s->ds_errors);
        s->ds_errors = NULL;
        s->n_ds_errors = 0;
}

void session_free_trace_stats(Perfetto__Protos__TraceStats *st) {
        if (!st)
                return;
        for (size_t i = 0; i < st->n_buffer_stats; i++)
                free(st->buffer_stats[i]);
        free(st->buffer_stats);
        free(st);
}

static const char *state_name(enum session_state s) {
        switch (s) {
        case SESSION_CONFIGURED:
                return "CONFIGURED";
        case SESSION_STARTED:
                return "STARTED";
        case SESSION_DISABLING:
                return "DISABLING_WAITING_STOP_ACKS";
        default:
                return "DISABLED";
        }
}

/* The file the session writes: the config's output_path, else the one its
 * consumer passed, as /proc names the core's descriptor. NULL: none. */
static char *session_output_text(struct session *s) {
        if (s->output_text)
                return s->output_text;
        if (s->config->output_path && s->config->output_path[0])
                return s->config->output_path;
        if (s->file_fd < 0)
                return NULL;
        char link[64], buf[PATH_MAX];
        snprintf(link, sizeof(link), "/proc/self/fd/%d", s->file_fd);
        ssize_t n = readlink(link, buf, sizeof(buf) - 1);
        if (n <= 0)
                return NULL;
        buf[n] = 0;
        s->output_text = strdup(buf);
        return s->output_text;
}

Perfetto__Protos__TracingServiceState *service_build_state(struct traced_service *svc, bool sessions_only,
                                                           uid_t viewer_uid) {
        Perfetto__Protos__TracingServiceState *st = calloc(1, sizeof(*st));
        if (!st)
                return NULL;
        perfetto__protos__tracing_service_state__init(st);
        st->tracing_service_version = (char *) "traced " PACKAGE_VERSION;
        st->has_supports_tracing_sessions = true;
        st->supports_tracing_sessions = true;
        st->has_traced_max_use = svc->max_use > 0;
        st->traced_max_use = svc->max_use;
        st->has_traced_keep_free = svc->keep_free > 0;
        st->traced_keep_free = svc->keep_free;
        size_t n_failed;
        const struct host_failed_plugin *failed = host_exits_failed_plugins(svc, &n_failed);
        st->traced_failed_plugins = calloc(n_failed + 1, sizeof(*st->traced_failed_plugins));
        if (!st->traced_failed_plugins)
                goto fail;
        for (size_t i = 0; i < n_failed; i++) {
                Perfetto__Protos__TracingServiceState__TracedFailedPlugin *f = calloc(1, sizeof(*f));
                if (!f)
                        goto fail;
                perfetto__protos__tracing_service_state__traced_failed_plugin__init(f);
                f->plugin = failed[i].plugin;
                f->reason = failed[i].reason;
                st->traced_failed_plugins[st->n_traced_failed_plugins++] = f;
        }

        size_t n_ds = 0, n_parked = 0;
        for (struct producer *p = svc->producers; p; p = p->next)
                n_ds += p->n_data_sources;
        const struct parked_plugin *parked = parked_list(svc, &n_parked);
        for (size_t i = 0; i < n_parked; i++)
                n_ds += parked[i].n_data_sources;
        st->producers = calloc(svc->n_producers + 1, sizeof(*st->producers));
        st->data_sources = calloc(n_ds + 1, sizeof(*st->data_sources));
        st->tracing_sessions = calloc(svc->n_sessions + 1, sizeof(*st->tracing_sessions));
        if (!st->producers || !st->data_sources || !st->tracing_sessions)
                goto fail;

        if (!sessions_only) {
                for (struct producer *p = svc->producers; p; p = p->next) {
                        Perfetto__Protos__TracingServiceState__Producer *pr = calloc(1, sizeof(*pr));
                        if (!pr)
                                goto fail;
                        perfetto__protos__tracing_service_state__producer__init(pr);
                        pr->has_id = pr->has_pid = pr->has_uid = true;
                        pr->id = p->id;
                        pr->pid = (int32_t) p->pid;
                        pr->uid = (int32_t) p->uid;
                        pr->name = p->name;
                        pr->sdk_version = p->sdk_version;
                        if (p->machine_id != 0) {
                                pr->has_machine_id = true;
                                pr->machine_id = p->machine_id;
                                pr->machine_name = p->machine_name;
                        }
                        st->producers[st->n_producers++] = pr;
                        for (size_t i = 0; i < p->n_data_sources; i++) {
                                Perfetto__Protos__TracingServiceState__DataSource *d = calloc(1, sizeof(*d));
                                if (!d)
                                        goto fail;
                                perfetto__protos__tracing_service_state__data_source__init(d);
                                d->has_producer_id = true;
                                d->producer_id = p->id;
                                d->ds_descriptor = perfetto__protos__data_source_descriptor__unpack(
                                        NULL, p->data_sources[i].descriptor_size, p->data_sources[i].descriptor);
                                st->data_sources[st->n_data_sources++] = d;
                        }
                }
                /* A parked plugin's data sources (hosts=lazy): offered,
                 * by no producer yet (its host starts when a session
                 * names one). */
                for (size_t i = 0; i < n_parked; i++) {
                        if (parked[i].host_pid != 0)
                                continue;
                        for (size_t k = 0; k < parked[i].n_data_sources; k++) {
                                Perfetto__Protos__TracingServiceState__DataSource *d = calloc(1, sizeof(*d));
                                if (!d)
                                        goto fail;
                                perfetto__protos__tracing_service_state__data_source__init(d);
                                d->ds_descriptor = perfetto__protos__data_source_descriptor__unpack(
                                        NULL, parked[i].data_sources[k].descriptor_size,
                                        parked[i].data_sources[k].descriptor);
                                st->data_sources[st->n_data_sources++] = d;
                        }
                }
        }

        int32_t started = 0;
        for (struct session *s = svc->sessions; s; s = s->next) {
                if (s->state == SESSION_STARTED)
                        started++;
                if (viewer_uid != 0 && s->uid != viewer_uid && !s->resident)
                        continue;
                Perfetto__Protos__TracingServiceState__TracingSession *t = calloc(1, sizeof(*t));
                if (!t)
                        goto fail;
                perfetto__protos__tracing_service_state__tracing_session__init(t);
                t->has_id = t->has_consumer_uid = t->has_is_started = t->has_num_data_sources = true;
                t->id = s->id;
                t->consumer_uid = (int32_t) s->uid;
                t->state = (char *) state_name(s->state);
                if (s->state == SESSION_DISABLED && s->disable_error) {
                        /* Why it ended, for whoever looks at the state. */
                        if (!s->state_text && asprintf(&s->state_text, "DISABLED (%s)", s->disable_error) < 0)
                                s->state_text = NULL;
                        if (s->state_text)
                                t->state = s->state_text;
                }
                t->is_started = s->state == SESSION_STARTED;
                t->num_data_sources = (uint32_t) session_count_instances(s);
                t->unique_session_name = s->config->unique_session_name;
                t->detach_key = s->detach_key;
                t->has_resident = t->resident = s->resident;
                t->output_path = session_output_text(s);
                /* What perfetto --save-all-for-bugreport picks sessions by. */
                t->has_bugreport_score = s->config->has_bugreport_score;
                t->bugreport_score = s->config->bugreport_score;
                t->bugreport_filename = s->config->bugreport_filename;
                if (s->start_realtime_ns) {
                        t->has_start_realtime_ns = true;
                        t->start_realtime_ns = s->start_realtime_ns;
                }
                if (s->config->has_duration_ms) {
                        t->has_duration_ms = true;
                        t->duration_ms = s->config->duration_ms;
                }
                t->buffer_size_kb = calloc(s->n_buffers + 1, sizeof(uint32_t));
                if (!t->buffer_size_kb) {
                        free(t);
                        goto fail;
                }
                for (size_t i = 0; i < s->config->n_buffers; i++)
                        t->buffer_size_kb[t->n_buffer_size_kb++] = s->config->buffers[i]->size_kb;
                st->tracing_sessions[st->n_tracing_sessions++] = t;
        }
        st->has_num_sessions = st->has_num_sessions_started = true;
        st->num_sessions = (int32_t) svc->n_sessions;
        st->num_sessions_started = started;
        return st;

fail:
        service_free_state(st);
        return NULL;
}

void service_free_state(Perfetto__Protos__TracingServiceState *st) {
        if (!st)
                return;
        for (size_t i = 0; i < st->n_producers; i++)
                free(st->producers[i]);
        for (size_t i = 0; i < st->n_data_sources; i++) {
                if (st->data_sources[i]->ds_descriptor)
                        perfetto__protos__data_source_descriptor__free_unpacked(st->data_sources[i]->ds_descriptor,
                                                                               NULL);
                free(st->data_sources[i]);
        }
        for (size_t i = 0; i < st->n_tracing_sessions; i++) {
                free(st->tracing_sessions[i]->buffer_size_kb);
                free(st->tracing_sessions[i]);
        }
        for (size_t i = 0; i < st->n_traced_failed_plugins; i++)
                free(st->traced_failed_plugins[i]);
        free(st->traced_failed_plugins);
        free(st->producers);
        free(st->data_sources);
        free(st->tracing_sessions);
        free(st);
}
