/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>

#include <json-c/json.h>

#include "query-json.h"

/* An object or array built member by member; a member that could not be
 * made (out of memory) marks the whole as failed. */
static void add(bool *failed, json_object *o, const char *key, json_object *v) {
        if (!o || !v || json_object_object_add(o, key, v) < 0) {
                *failed = true;
                json_object_put(v);
        }
}

static void append(bool *failed, json_object *a, json_object *v) {
        if (!a || !v || json_object_array_add(a, v) < 0) {
                *failed = true;
                json_object_put(v);
        }
}

static json_object *str(const char *s) {
        return json_object_new_string(s ? s : "");
}

static json_object *producer(bool *failed, const Perfetto__Protos__TracingServiceState__Producer *p) {
        json_object *o = json_object_new_object();
        add(failed, o, "id", json_object_new_int(p->id));
        add(failed, o, "name", str(p->name));
        add(failed, o, "pid", json_object_new_int(p->pid));
        add(failed, o, "uid", json_object_new_int(p->uid));
        add(failed, o, "sdk_version", str(p->sdk_version));
        add(failed, o, "machine_id", json_object_new_int64(p->has_machine_id ? p->machine_id : 0));
        add(failed, o, "machine_name", str(p->machine_name));
        return o;
}

static json_object *data_source(bool *failed, const Perfetto__Protos__TracingServiceState__DataSource *d) {
        json_object *o = json_object_new_object();
        add(failed, o, "name", str(d->ds_descriptor ? d->ds_descriptor->name : NULL));
        /* null: no producer yet (its plugin's host starts when a session
         * names it) */
        if (json_object_object_add(o, "producer_id", d->has_producer_id ? json_object_new_int(d->producer_id) : NULL) < 0)
                *failed = true;
        return o;
}

static json_object *session(bool *failed, const Perfetto__Protos__TracingServiceState__TracingSession *s) {
        json_object *o = json_object_new_object(), *bufs = json_object_new_array();
        uint64_t kb = 0;
        for (size_t k = 0; k < s->n_buffer_size_kb; k++) {
                kb += s->buffer_size_kb[k];
                append(failed, bufs, json_object_new_uint64(s->buffer_size_kb[k]));
        }
        add(failed, o, "id", json_object_new_uint64(s->id));
        add(failed, o, "state", str(s->state));
        add(failed, o, "consumer_uid", json_object_new_int(s->consumer_uid));
        add(failed, o, "unique_session_name", str(s->unique_session_name));
        add(failed, o, "resident", json_object_new_boolean(s->has_resident && s->resident));
        add(failed, o, "num_data_sources", json_object_new_int64(s->num_data_sources));
        add(failed, o, "buffer_size_kb", json_object_new_uint64(kb));
        add(failed, o, "buffers_kb", bufs);
        add(failed, o, "duration_ms", json_object_new_int64(s->duration_ms));
        add(failed, o, "start_realtime_ns", json_object_new_int64(s->start_realtime_ns));
        add(failed, o, "is_started", json_object_new_boolean(s->is_started));
        /* null when the session has none (or the service does not say) */
        if (json_object_object_add(o, "detach_key", s->detach_key ? json_object_new_string(s->detach_key) : NULL) < 0 ||
            json_object_object_add(o, "output_path", s->output_path ? json_object_new_string(s->output_path) : NULL) < 0)
                *failed = true;
        return o;
}

int query_print_json(FILE *f, const Perfetto__Protos__TracingServiceState *st) {
        bool failed = false;
        json_object *root = json_object_new_object(), *producers = json_object_new_array(),
                    *sources = json_object_new_array(), *sessions = json_object_new_array();
        add(&failed, root, "service_version", str(st->tracing_service_version));
        for (size_t i = 0; i < st->n_producers; i++)
                append(&failed, producers, producer(&failed, st->producers[i]));
        for (size_t i = 0; i < st->n_data_sources; i++)
                append(&failed, sources, data_source(&failed, st->data_sources[i]));
        for (size_t i = 0; i < st->n_tracing_sessions; i++)
                append(&failed, sessions, session(&failed, st->tracing_sessions[i]));
        add(&failed, root, "producers", producers);
        add(&failed, root, "data_sources", sources);
        add(&failed, root, "num_sessions", json_object_new_int(st->num_sessions));
        add(&failed, root, "num_sessions_started", json_object_new_int(st->num_sessions_started));
        add(&failed, root, "tracing_sessions", sessions);
        const char *text =
                failed ? NULL : json_object_to_json_string_ext(root, JSON_C_TO_STRING_PRETTY | JSON_C_TO_STRING_NOSLASHESCAPE);
        if (text)
                fprintf(f, "%s\n", text);
        json_object_put(root);
        return text ? 0 : -ENOMEM;
}
