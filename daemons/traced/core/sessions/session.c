/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Tracing sessions: configuration, data source instances on producers,
 * start/flush/stop state machine, timers and triggers. Reading the buffers
 * out lives in session-read.c. */

#include <errno.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "basic/log.h"
#include "basic/macro.h"
#include "basic/pbw.h"
#include "basic/regex-limits.h"
#include "core/service.h"
#include "core/sessions/session-read.h"
#include "core/buffers/trace-buffer.h"

#include "perfetto/common/observable_events.pb-c.h"
#include "perfetto/config/data_source_config.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

static uint64_t now_usec(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static int add_timer_ms(struct session *s, sd_event_source **src, uint64_t ms, sd_event_time_handler_t cb) {
        *src = sd_event_source_disable_unref(*src);
        return sd_event_add_time_relative(s->svc->event, src, CLOCK_BOOTTIME, ms * 1000u, 1000, cb, s);
}

static void session_finalize(struct session *s);
static int config_error(char **ret_error, const char *msg);
static void session_free_regexes(struct session *s);

static void random_uuid(uint64_t *msb, uint64_t *lsb) {
        uint64_t v[2] = {};
        if (getrandom(v, sizeof(v), GRND_NONBLOCK) != (ssize_t) sizeof(v)) {
                v[0] = now_usec(CLOCK_REALTIME) ^ ((uint64_t) getpid() << 32);
                v[1] = now_usec(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;
        }
        /* RFC 4122 version 4 layout. */
        v[0] = (v[0] & ~0xF000ull) | 0x4000ull;
        v[1] = (v[1] & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;
        *msb = v[0];
        *lsb = v[1];
}

struct session_buffer *service_find_buffer(struct traced_service *svc, uint32_t buffer_id,
                                           struct session **ret_session) {
        for (struct session *s = svc->sessions; s; s = s->next)
                for (size_t i = 0; i < s->n_buffers; i++)
                        if (s->buffers[i].id == buffer_id) {
                                if (ret_session)
                                        *ret_session = s;
                                return &s->buffers[i];
                        }
        return NULL;
}

bool session_producer_may_write(struct session *s, uint16_t producer_id) {
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->producer_id == producer_id)
                        return true;
        return false;
}

static size_t seq_slot(uint16_t producer_id, uint16_t writer_id, size_t cap) {
        uint32_t key = (uint32_t) producer_id << 16 | writer_id;
        return (size_t) ((key * 2654435761u) >> 7) & (cap - 1);
}

static struct sequence_map *seq_lookup(struct sequence_map *table, size_t cap, uint16_t producer_id,
                                       uint16_t writer_id) {
        for (size_t i = seq_slot(producer_id, writer_id, cap);; i = (i + 1) & (cap - 1))
                if (table[i].sequence_id == 0 ||
                    (table[i].producer_id == producer_id && table[i].writer_id == writer_id))
                        return &table[i];
}

uint32_t session_sequence_id(struct session *s, uint16_t producer_id, uint16_t writer_id, bool *ret_first) {
        /* Called for every packet read: a hash table keeps it O(1) however
         * many writers there are. */
        if (s->seq_cap > 0) {
                struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
                if (m->sequence_id != 0) {
                        if (ret_first)
                                *ret_first = !m->seen;
                        m->seen = true;
                        return m->sequence_id;
                }
        }
        if ((s->n_seqs + 1) * 4 > s->seq_cap * 3) {
                size_t cap = s->seq_cap ? s->seq_cap * 2 : 64;
                struct sequence_map *t = calloc(cap, sizeof(*t));
                if (!t)
                        return 0;
                for (size_t i = 0; i < s->seq_cap; i++)
                        if (s->seqs[i].sequence_id != 0)
                                *seq_lookup(t, cap, s->seqs[i].producer_id, s->seqs[i].writer_id) = s->seqs[i];
                free(s->seqs);
                s->seqs = t;
                s->seq_cap = cap;
        }
        struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
        *m = (struct sequence_map) {
                .producer_id = producer_id,
                .writer_id = writer_id,
                .sequence_id = s->next_sequence_id++,
                .seen = true,
        };
        s->n_seqs++;
        if (ret_first)
                *ret_first = true;
        return m->sequence_id;
}

void session_sequence_unsee(struct session *s, uint16_t producer_id, uint16_t writer_id) {
        if (s->seq_cap == 0)
                return;
        struct sequence_map *m = seq_lookup(s->seqs, s->seq_cap, producer_id, writer_id);
        if (m->sequence_id != 0)
                m->seen = false;
}

static void instance_free(struct ds_instance *i) {
        free(i->name);
        free(i->config);
        free(i);
}

void session_free(struct session *s) {
        if (!s)
                return;
        struct traced_service *svc = s->svc;
        for (struct session **pp = &svc->sessions; *pp; pp = &(*pp)->next)
                if (*pp == s) {
                        *pp = s->next;
                        svc->n_sessions--;
                        break;
                }
        if (s->consumer && s->consumer->session == s)
                s->consumer->session = NULL;
        s->state = SESSION_DISABLED;
        s->freeing = true;
        /* Producers still running instances of this session stop them. */
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->producer && i->state != DS_STOPPED && i->state != DS_STOPPING)
                        (void) i->producer->ops->stop_data_source(i->producer, i);
        while (s->instances) {
                struct ds_instance *i = s->instances;
                s->instances = i->next;
                instance_free(i);
        }
        session_cancel_flushes(s);
        if (s->enable_req) {
                ipc_request_fail(s->enable_req);
                s->enable_req = NULL;
        }
        for (size_t i = 0; i < s->n_buffers; i++)
                trace_buffer_free(s->buffers[i].tb);
        free(s->buffers);
        free(s->seqs);
        sd_event_source_disable_unref(s->file_timer);
        sd_event_source_disable_unref(s->duration_timer);
        sd_event_source_disable_unref(s->flush_timer);
        sd_event_source_disable_unref(s->stop_timer);
        sd_event_source_disable_unref(s->sync_timer);
        sd_event_source_disable_unref(s->clear_timer);
        sd_event_source_disable_unref(s->trigger_timer);
        session_output_free(s);
        safe_close(s->file_fd);
        while (s->clone_hits) {
                struct clone_trigger_hit *h = s->clone_hits;
                s->clone_hits = h->next;
                sd_event_source_disable_unref(h->timer);
                received_trigger_done(&h->trigger);
                free(h);
        }
        for (size_t i = 0; i < s->n_triggers; i++)
                received_trigger_done(&s->triggers[i]);
        free(s->triggers);
        received_trigger_done(&s->clone_trigger);
        sd_event_source_disable_unref(s->free_defer);
        session_free_regexes(s);
        if (s->config)
                perfetto__protos__trace_config__free_unpacked(s->config, NULL);
        free(s->config_bytes);
        free(s->read_iov);
        session_clear_service_events(s);
        free(s->detach_key);
        free(s->disable_error);
        free(s->state_text);
        free(s->triggered_by);
        free(s);
        service_state_changed(svc);
}

static void compiled_regexes_done(struct compiled_regexes *c) {
        for (size_t i = 0; i < c->n; i++)
                regfree(&c->re[i]);
        free(c->re);
        *c = (struct compiled_regexes) {};
}

static void session_free_regexes(struct session *s) {
        if (s->ds_regex) {
                for (size_t i = 0; i < s->config->n_data_sources; i++)
                        compiled_regexes_done(&s->ds_regex[i]);
                free(s->ds_regex);
                s->ds_regex = NULL;
        }
        if (s->trigger_regex) {
                size_t n = s->config->trigger_config ? s->config->trigger_config->n_triggers : 0;
                for (size_t i = 0; i < n; i++)
                        if (s->trigger_regex[i]) {
                                regfree(s->trigger_regex[i]);
                                free(s->trigger_regex[i]);
                        }
                free(s->trigger_regex);
                s->trigger_regex = NULL;
        }
}

static int regex_error(char **ret_error, const char *what, const char *pattern, const char *owner, const char *reason) {
        if (ret_error && asprintf(ret_error, "%s \"%.64s%s\" of %s: %s", what, pattern,
                                  strlen(pattern) > 64 ? "..." : "", owner, reason) < 0)
                *ret_error = NULL;
        return -EINVAL;
}

/* Compiles a data source entry's producer_name_regex_filter. */
static int compile_ds_filters(const Perfetto__Protos__TraceConfig__DataSource *ds, size_t *budget_used,
                              struct compiled_regexes *ret, char **ret_error) {
        struct compiled_regexes c = {};
        const char *reason;
        int r;

        if (ds->n_producer_name_regex_filter == 0) {
                *ret = c;
                return 0;
        }
        c.re = calloc(ds->n_producer_name_regex_filter, sizeof(regex_t));
        if (!c.re)
                return -ENOMEM;
        for (size_t k = 0; k < ds->n_producer_name_regex_filter; k++) {
                r = regex_compile_budgeted(ds->producer_name_regex_filter[k], SERVICE_CONFIG_REGEX_BUDGET, budget_used,
                                           &c.re[c.n], &reason);
                if (r < 0) {
                        compiled_regexes_done(&c);
                        _cleanup_free_ char *owner = NULL;
                        if (asprintf(&owner, "data source \"%.64s\"",
                                     ds->config && ds->config->name ? ds->config->name : "") < 0)
                                return -ENOMEM;
                        return regex_error(ret_error, "producer_name_regex_filter", ds->producer_name_regex_filter[k],
                                           owner, reason);
                }
                c.n++;
        }
        *ret = c;
        return 0;
}

/* Bounds the work a config can ask for, then compiles its regexes once. */
static int session_compile_regexes(struct session *s, char **ret_error) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        size_t n_regex = 0, n_names = 0, budget_used = 0;
        const char *reason;
        int r;

        if (cfg->n_data_sources > SERVICE_MAX_CONFIG_DATA_SOURCES)
                return config_error(ret_error, "The trace config has more than 1024 data sources");
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                n_regex += cfg->data_sources[i]->n_producer_name_regex_filter;
                n_names += cfg->data_sources[i]->n_producer_name_filter;
                n_names += cfg->data_sources[i]->n_machine_name_filter;
        }
        if (n_regex > SERVICE_MAX_CONFIG_REGEX_FILTERS)
                return config_error(ret_error, "The trace config has more than 64 producer_name_regex_filter entries");
        if (n_names > SERVICE_MAX_CONFIG_NAME_FILTERS)
                return config_error(ret_error,
                                    "The trace config has more than 4096 producer_name_filter and machine_name_filter entries");
        if (cfg->trigger_config && cfg->trigger_config->n_triggers > SERVICE_MAX_CONFIG_TRIGGERS)
                return config_error(ret_error, "The trace config has more than 256 triggers");

        s->ds_regex = calloc(cfg->n_data_sources + 1, sizeof(*s->ds_regex));
        if (!s->ds_regex)
                return -ENOMEM;
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                r = compile_ds_filters(cfg->data_sources[i], &budget_used, &s->ds_regex[i], ret_error);
                if (r < 0)
                        return r;
        }
        if (!cfg->trigger_config)
                return 0;
        s->trigger_regex = calloc(cfg->trigger_config->n_triggers + 1, sizeof(regex_t *));
        if (!s->trigger_regex)
                return -ENOMEM;
        for (size_t t = 0; t < cfg->trigger_config->n_triggers; t++) {
                const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *tr = cfg->trigger_config->triggers[t];
                if (!tr->producer_name_regex || !tr->producer_name_regex[0])
                        continue;
                regex_t *re = malloc(sizeof(*re));
                if (!re)
                        return -ENOMEM;
                r = regex_compile_budgeted(tr->producer_name_regex, SERVICE_CONFIG_REGEX_BUDGET, &budget_used, re,
                                           &reason);
                if (r < 0) {
                        free(re);
                        return regex_error(ret_error, "producer_name_regex", tr->producer_name_regex,
                                           "a trigger", reason);
                }
                s->trigger_regex[t] = re;
        }
        return 0;
}

/* Which machines' data sources start: those named by machine_name_filter
 * ("host" is this machine), else all with trace_all_machines, else only
 * this machine's. */
static bool machine_matches(const struct session *s, const Perfetto__Protos__TraceConfig__DataSource *ds,
                            const struct producer *p) {
        if (ds->n_machine_name_filter > 0) {
                for (size_t i = 0; i < ds->n_machine_name_filter; i++) {
                        const char *want = ds->machine_name_filter[i];
                        if (p->machine_id == 0 ? strcmp(want, "host") == 0
                                               : p->machine_name && strcmp(want, p->machine_name) == 0)
                                return true;
                }
                return false;
        }
        if (p->machine_id == 0)
                return true;
        return s->config->has_trace_all_machines && s->config->trace_all_machines;
}

static bool producer_matches(const struct session *s, size_t idx, const struct producer *p) {
        const Perfetto__Protos__TraceConfig__DataSource *ds = s->config->data_sources[idx];
        if (!machine_matches(s, ds, p))
                return false;
        if (ds->n_producer_name_filter == 0 && ds->n_producer_name_regex_filter == 0)
                return true;
        for (size_t i = 0; i < ds->n_producer_name_filter; i++)
                if (p->name && strcmp(ds->producer_name_filter[i], p->name) == 0)
                        return true;
        /* Compiled once, when the session was created. */
        for (size_t i = 0; s->ds_regex && i < s->ds_regex[idx].n; i++)
                if (regex_matches(&s->ds_regex[idx].re[i], p->name))
                        return true;
        return false;
}

/* Builds the DataSourceConfig a producer receives for an instance. */
static int build_instance_config(struct session *s, const Perfetto__Protos__TraceConfig__DataSource *ds,
                                 uint32_t target_buffer, struct ds_instance *inst) {
        /* Copy through pack/unpack to keep fields we don't declare. */
        size_t n = protobuf_c_message_get_packed_size(&ds->config->base);
        _cleanup_free_ uint8_t *buf = malloc(n ? n : 1);
        if (!buf)
                return -ENOMEM;
        protobuf_c_message_pack(&ds->config->base, buf);
        Perfetto__Protos__DataSourceConfig *c = perfetto__protos__data_source_config__unpack(NULL, n, buf);
        if (!c)
                return -EINVAL;
        c->has_target_buffer = true;
        c->target_buffer = target_buffer;
        c->has_tracing_session_id = true;
        c->tracing_session_id = s->id;
        if (s->config->has_duration_ms) {
                c->has_trace_duration_ms = true;
                c->trace_duration_ms = s->config->duration_ms;
        }
        c->has_stop_timeout_ms = true;
        c->stop_timeout_ms = s->config->has_data_source_stop_timeout_ms && s->config->data_source_stop_timeout_ms
                                     ? s->config->data_source_stop_timeout_ms
                                     : SERVICE_DEFAULT_STOP_TIMEOUT_MS;
        c->has_enable_extra_guardrails = true;
        c->enable_extra_guardrails = s->config->has_enable_extra_guardrails && s->config->enable_extra_guardrails;
        c->has_session_initiator = true;
        c->session_initiator = 0;
        size_t m = perfetto__protos__data_source_config__get_packed_size(c);
        inst->config = malloc(m ? m : 1);
        if (!inst->config) {
                perfetto__protos__data_source_config__free_unpacked(c, NULL);
                return -ENOMEM;
        }
        perfetto__protos__data_source_config__pack(c, inst->config);
        inst->config_size = m;
        perfetto__protos__data_source_config__free_unpacked(c, NULL);
        return 0;
}

/* Creates and sets up an instance of a data source on a producer. */
static int setup_instance(struct session *s, const Perfetto__Protos__TraceConfig__DataSource *ds, struct producer *p,
                          const struct data_source_reg *reg, struct ds_instance **ret) {
        uint32_t target_idx = ds->config->has_target_buffer ? ds->config->target_buffer : 0;
        int r;

        if (target_idx >= s->n_buffers) {
                log_warning("Session %" PRIu64 ": data source \"%s\" targets buffer %u of %zu; skipped.", s->id,
                            reg->name, target_idx, s->n_buffers);
                return 0;
        }
        struct ds_instance *inst = calloc(1, sizeof(*inst));
        if (!inst)
                return -ENOMEM;
        *inst = (struct ds_instance) {
                .session = s,
                .producer = p,
                .producer_id = p->id,
                .id = ++s->svc->last_ds_instance_id,
                .name = strdup(reg->name),
                .state = DS_CONFIGURED,
                .will_notify_on_start = reg->will_notify_on_start,
                .will_notify_on_stop = reg->will_notify_on_stop,
                .target_buffer = s->buffers[target_idx].id,
        };
        if (!inst->name || build_instance_config(s, ds, inst->target_buffer, inst) < 0) {
                instance_free(inst);
                return -ENOMEM;
        }
        /* Keep creation order: commands go out in it. */
        struct ds_instance **tail = &s->instances;
        while (*tail)
                tail = &(*tail)->next;
        *tail = inst;
        if (ret)
                *ret = inst;

        r = p->ops->setup_data_source(p, inst);
        if (r < 0)
                log_warning_errno(r, "Failed to set up data source \"%s\" on producer \"%s\": %m", inst->name,
                                  strna(p->name));
        return 0;
}

static int start_instance(struct session *s, struct ds_instance *inst) {
        if (!inst->producer || inst->state != DS_CONFIGURED)
                return 0;
        inst->state = inst->will_notify_on_start ? DS_STARTING : DS_STARTED;
        return inst->producer->ops->start_data_source(inst->producer, inst);
}

static void check_all_started(struct session *s) {
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->state == DS_STARTING)
                        return;
        if (!s->all_started_notified && s->state == SESSION_STARTED) {
                s->all_started_notified = true;
                session_add_service_event(s, SERVICE_EVENT_ALL_DATA_SOURCES_STARTED);
                session_notify_observers(s, PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED);
        }
}

static int config_error(char **ret_error, const char *msg) {
        if (ret_error)
                *ret_error = strdup(msg);
        return -EINVAL;
}

/* A new session in the service's list, with its own copy of cfg (and its
 * bytes, for the trace_config packet). */
static int session_alloc(struct traced_service *svc, struct consumer *c, enum session_state state,
                         const Perfetto__Protos__TraceConfig *cfg, struct session **ret) {
        struct session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct session) {
                .svc = svc,
                .id = ++svc->last_session_id,
                .consumer = c,
                .uid = c ? c->uid : 0,
                .state = state,
                .file_fd = -EBADF,
                .next_sequence_id = SERVICE_SEQUENCE_ID + 1,
        };
        s->next = svc->sessions;
        svc->sessions = s;
        svc->n_sessions++;
        random_uuid(&s->uuid_msb, &s->uuid_lsb);

        s->config_size = protobuf_c_message_get_packed_size(&cfg->base);
        s->config_bytes = malloc(s->config_size ? s->config_size : 1);
        if (!s->config_bytes) {
                session_free(s);
                return -ENOMEM;
        }
        protobuf_c_message_pack(&cfg->base, s->config_bytes);
        s->config = perfetto__protos__trace_config__unpack(NULL, s->config_size, s->config_bytes);
        if (!s->config) {
                session_free(s);
                return -ENOMEM;
        }
        *ret = s;
        return 0;
}

int session_create(struct traced_service *svc, struct consumer *c, const Perfetto__Protos__TraceConfig *cfg,
                   int file_fd, struct session **ret, char **ret_error) {
        /* Taken: closed on every refusal. */
        _cleanup_close_ int out_fd = file_fd;
        uint64_t total = 0;
        unsigned per_uid = 0;
        int r;

        /* No buffers is valid (a session that only writes the service's
         * packets, or a placeholder for detach/attach); too many is not. */
        if (cfg->n_buffers > SERVICE_MAX_BUFFERS_PER_SESSION)
                return config_error(ret_error, "Too many buffers in the trace config");
        for (size_t i = 0; i < cfg->n_buffers; i++) {
                if (!cfg->buffers[i]->has_size_kb || cfg->buffers[i]->size_kb == 0)
                        return config_error(ret_error, "A buffer in the trace config has no size_kb");
                total += (uint64_t) cfg->buffers[i]->size_kb * 1024u;
        }
        if (total > SERVICE_MAX_TOTAL_BUFFER_BYTES)
                return config_error(ret_error, "The trace config's buffers exceed the service's limit of 1 GiB");
        if (cfg->unique_session_name && strlen(cfg->unique_session_name) > SERVICE_MAX_NAME_LENGTH)
                return config_error(ret_error, "unique_session_name is longer than 1024 bytes");
        if (cfg->has_duration_ms && cfg->duration_ms > SERVICE_MAX_DURATION_MS)
                return config_error(ret_error, "duration_ms exceeds the service's limit of 7 days");
        if (svc->n_sessions >= SERVICE_MAX_SESSIONS)
                return config_error(ret_error, "Too many concurrent tracing sessions");
        for (struct session *o = svc->sessions; o; o = o->next) {
                if (o->uid == (c ? c->uid : 0))
                        per_uid++;
                if (cfg->unique_session_name && cfg->unique_session_name[0] && o->config &&
                    o->config->unique_session_name && strcmp(o->config->unique_session_name, cfg->unique_session_name) == 0)
                        return config_error(ret_error, "A session with the same unique_session_name is active");
        }
        if (per_uid >= SERVICE_MAX_SESSIONS_PER_UID && c && c->uid != 0)
                return config_error(ret_error, "Too many concurrent tracing sessions for this user");
        /* A file name, as upstream: perfetto --save-all-for-bugreport
         * writes to <bugreport dir>/<bugreport_filename>. */
        if (cfg->bugreport_filename &&
            strspn(cfg->bugreport_filename, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
                    strlen(cfg->bugreport_filename))
                return config_error(ret_error, "bugreport_filename may only contain [a-zA-Z0-9-_.]");
        if (cfg->has_write_into_file && cfg->write_into_file && cfg->trigger_config &&
            cfg->trigger_config->has_trigger_mode &&
            cfg->trigger_config->trigger_mode == PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT)
                return config_error(ret_error, "Trigger mode CLONE_SNAPSHOT and write_into_file together are unsupported");
        if (cfg->has_write_into_file && cfg->write_into_file && file_fd < 0)
                return config_error(ret_error, "write_into_file is set but no output file descriptor was passed");
        if (cfg->trigger_config && cfg->trigger_config->has_trigger_mode &&
            cfg->trigger_config->trigger_mode != PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__UNSPECIFIED) {
                if (cfg->trigger_config->n_triggers == 0)
                        return config_error(ret_error, "trigger_config has a mode but no triggers");
                if (!cfg->trigger_config->has_trigger_timeout_ms || cfg->trigger_config->trigger_timeout_ms == 0)
                        return config_error(ret_error, "trigger_config needs trigger_timeout_ms");
        }

        struct session *s;
        int r2 = session_alloc(svc, c, SESSION_CONFIGURED, cfg, &s);
        if (r2 < 0)
                return r2;
        r = session_compile_regexes(s, ret_error);
        if (r < 0) {
                session_free(s);
                return r;
        }

        s->buffers = calloc(cfg->n_buffers ? cfg->n_buffers : 1, sizeof(*s->buffers));
        if (!s->buffers) {
                session_free(s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < cfg->n_buffers; i++) {
                const Perfetto__Protos__TraceConfig__BufferConfig *b = cfg->buffers[i];
                bool discard = b->has_fill_policy &&
                               b->fill_policy == PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__DISCARD;
                r = trace_buffer_new((size_t) b->size_kb * 1024u,
                                     discard ? TRACE_BUFFER_DISCARD : TRACE_BUFFER_RING_BUFFER, &s->buffers[i].tb);
                if (r < 0) {
                        session_free(s);
                        return config_error(ret_error, "Failed to allocate a trace buffer");
                }
                s->buffers[i].id = ++svc->last_buffer_id;
                s->n_buffers++;
        }

        if (out_fd >= 0) {
                r = session_output_open(s, TAKE_FD(out_fd), ret_error);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
                s->max_file_size = cfg->has_max_file_size_bytes ? cfg->max_file_size_bytes : 0;
        }

        /* Set up the data sources on every producer that has them. */
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                const Perfetto__Protos__TraceConfig__DataSource *ds = cfg->data_sources[i];
                if (!ds->config || !ds->config->name)
                        continue;
                for (struct producer *p = svc->producers; p; p = p->next) {
                        if (!p->initialized || !producer_matches(s, i, p))
                                continue;
                        for (size_t k = 0; k < p->n_data_sources; k++)
                                if (strcmp(p->data_sources[k].name, ds->config->name) == 0)
                                        (void) setup_instance(s, ds, p, &p->data_sources[k], NULL);
                }
        }

        log_info("Session %" PRIu64 " configured: %zu buffer(s), %zu data source instance(s)%s.", s->id,
                 s->n_buffers, session_count_instances(s), s->file_fd >= 0 ? ", writing into a file" : "");
        *ret = s;
        service_state_changed(svc);
        return 0;
}

size_t session_count_instances(const struct session *s) {
        size_t n = 0;
        for (struct ds_instance *i = s->instances; i; i = i->next)
                n++;
        return n;
}

static int on_duration(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        log_info("Session %" PRIu64 ": duration reached.", s->id);
        s->free_if_detached = true;
        session_disable(s, NULL);
        return 0;
}

static int on_file_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        s->out_pressure = false;
        int r = session_write_into_file(s);
        if (r == -EFBIG) {
                log_info("Session %" PRIu64 ": max_file_size_bytes reached, stopping.", s->id);
                session_disable(s, NULL);
                return 0;
        }
        if (r < 0) {
                session_disable(s, session_output_error_message(r));
                return 0;
        }
        return sd_event_source_set_time_relative(src, s->file_period_ms * 1000u) < 0
                       ? 0
                       : sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

static void periodic_flush_done(struct session *s, bool success, void *userdata) {
}

static int on_flush_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        if (s->state == SESSION_STARTED)
                (void) session_flush(s, 0, periodic_flush_done, NULL);
        (void) sd_event_source_set_time_relative(src, (uint64_t) s->config->flush_period_ms * 1000u);
        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

static int on_clear_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        struct traced_service *svc = s->svc;

        for (struct producer *p = svc->producers; p; p = p->next) {
                uint64_t ids[64];
                size_t n = 0;
                for (struct ds_instance *i = s->instances; i; i = i->next) {
                        if (i->producer != p || i->state != DS_STARTED)
                                continue;
                        for (size_t k = 0; k < p->n_data_sources; k++)
                                if (strcmp(p->data_sources[k].name, i->name) == 0 &&
                                    p->data_sources[k].handles_incremental_state_clear && n < ELEMENTSOF(ids))
                                        ids[n++] = i->id;
                }
                if (n)
                        (void) p->ops->clear_incremental_state(p, ids, n);
        }
        (void) sd_event_source_set_time_relative(src,
                                                 (uint64_t) s->config->incremental_state_config->clear_period_ms * 1000u);
        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
}

static int on_trigger_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        log_info("Session %" PRIu64 ": no trigger within trigger_timeout_ms, stopping.", s->id);
        s->free_if_detached = true;
        session_disable(s, NULL);
        return 0;
}

static bool is_trigger_mode(const struct session *s, int mode) {
        const Perfetto__Protos__TraceConfig__TriggerConfig *t = s->config->trigger_config;
        return t && t->has_trigger_mode && (int) t->trigger_mode == mode;
}

/* Arms the duration and periodic timers and starts every instance. */
static int session_start_now(struct session *s) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;

        s->state = SESSION_STARTED;
        s->started_ns = now_usec(CLOCK_BOOTTIME) * 1000u;
        session_add_service_event(s, SERVICE_EVENT_TRACING_STARTED);
        for (struct ds_instance *i = s->instances; i; i = i->next)
                (void) start_instance(s, i);

        bool stop_or_clone = is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING) ||
                             is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT);
        if (cfg->has_duration_ms && cfg->duration_ms > 0 && !stop_or_clone)
                (void) add_timer_ms(s, &s->duration_timer, cfg->duration_ms, on_duration);
        if (s->file_fd >= 0) {
                s->file_period_ms = cfg->has_file_write_period_ms && cfg->file_write_period_ms
                                            ? MAX(cfg->file_write_period_ms, SERVICE_MIN_FILE_WRITE_PERIOD_MS)
                                            : SERVICE_DEFAULT_FILE_WRITE_PERIOD_MS;
                /* The first write at once: the file starts with the
                 * session's own packets, and from then on committed chunks
                 * can go straight into it. */
                (void) add_timer_ms(s, &s->file_timer, 0, on_file_timer);
        }
        if (cfg->has_flush_period_ms && cfg->flush_period_ms > 0)
                (void) add_timer_ms(s, &s->flush_timer, cfg->flush_period_ms, on_flush_timer);
        if (cfg->incremental_state_config && cfg->incremental_state_config->has_clear_period_ms &&
            cfg->incremental_state_config->clear_period_ms > 0)
                (void) add_timer_ms(s, &s->clear_timer, cfg->incremental_state_config->clear_period_ms, on_clear_timer);
        /* STOP_TRACING and CLONE_SNAPSHOT sessions end at the trigger
         * timeout (a stop trigger may end them sooner). */
        if (stop_or_clone)
                (void) add_timer_ms(s, &s->trigger_timer, cfg->trigger_config->trigger_timeout_ms,
                                    on_trigger_timeout);
        log_info("Session %" PRIu64 " started.", s->id);
        check_all_started(s);
        service_state_changed(s->svc);
        return 0;
}

int session_start(struct session *s) {
        if (s->state != SESSION_CONFIGURED)
                return -EBUSY;
        if (is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING)) {
                /* Wait for a start trigger, or give up at the timeout. */
                s->waiting_for_start_trigger = true;
                return add_timer_ms(s, &s->trigger_timer, s->config->trigger_config->trigger_timeout_ms,
                                    on_trigger_timeout);
        }
        return session_start_now(s);
}

/* ---- flushes ---------------------------------------------------------- */

static void flush_complete(struct pending_flush *f, bool success) {
        struct session *s = f->session;

        for (struct pending_flush **pp = &s->flushes; *pp; pp = &(*pp)->next)
                if (*pp == f) {
                        *pp = f->next;
                        break;
                }
        sd_event_source_disable_unref(f->timeout);
        /* Take what the producers committed, and what they are still
         * writing, so the flush covers everything written before it. */
        for (size_t i = 0; i < f->n_producers_all; i++) {
                struct producer *p = service_find_producer(s->svc, f->producers_all[i]);
                if (p)
                        p->ops->scrape(p, true);
        }
        if (success) {
                s->flushes_succeeded++;
                session_add_service_event(s, SERVICE_EVENT_ALL_DATA_SOURCES_FLUSHED);
        } else
                s->flushes_failed++;
        flush_done_fn done = f->done;
        void *ud = f->userdata;
        free(f->producers);
        free(f->producers_all);
        free(f);
        if (done)
                done(s, success, ud);
}

/* Names the producers a flush still waits for: in the log, and in the
 * trace as TracingServiceEvent.last_flush_slow_data_sources. */
static void report_slow_flush(struct pending_flush *f) {
        struct session *s = f->session;
        _cleanup_(pbw_done) struct pbw list = {};

        for (size_t k = 0; k < f->n_producers; k++) {
                struct producer *p = service_find_producer(s->svc, f->producers[k]);
                log_notice("Session %" PRIu64 ": flush %" PRIu64 " timed out waiting for producer %u \"%s\" (pid %d).",
                           s->id, f->request_id, f->producers[k], p ? strna(p->name) : "(gone)",
                           p ? (int) p->pid : 0);
                for (struct ds_instance *i = s->instances; i; i = i->next) {
                        if (i->producer_id != f->producers[k])
                                continue;
                        _cleanup_(pbw_done) struct pbw ds = {};
                        if (p && p->name)
                                pbw_string(&ds, 1, p->name);
                        pbw_string(&ds, 2, i->name);
                        pbw_message(&list, 1, &ds);
                }
        }
        if (!list.error && list.len > 0)
                session_add_service_event_msg(s, SERVICE_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES, list.buf, list.len);
}

static int on_flush_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct pending_flush *f = userdata;
        report_slow_flush(f);
        flush_complete(f, false);
        return 0;
}

static int on_flush_now(sd_event_source *src, void *userdata) {
        struct pending_flush *f = userdata;
        f->defer = sd_event_source_disable_unref(f->defer);
        flush_complete(f, true);
        return 0;
}

int session_flush(struct session *s, uint32_t timeout_ms, flush_done_fn done, void *userdata) {
        struct traced_service *svc = s->svc;
        int r;

        struct pending_flush *f = calloc(1, sizeof(*f));
        if (!f)
                return -ENOMEM;
        f->session = s;
        f->request_id = ++svc->last_flush_request_id;
        f->done = done;
        f->userdata = userdata;
        f->producers = calloc(svc->n_producers ? svc->n_producers : 1, sizeof(uint16_t));
        f->producers_all = calloc(svc->n_producers ? svc->n_producers : 1, sizeof(uint16_t));
        if (!f->producers || !f->producers_all) {
                free(f->producers);
                free(f->producers_all);
                free(f);
                return -ENOMEM;
        }
        s->flushes_requested++;
        session_add_service_event(s, SERVICE_EVENT_FLUSH_STARTED);

        for (struct producer *p = svc->producers; p; p = p->next) {
                uint64_t ids[256];
                size_t n = 0;
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer == p && (i->state == DS_STARTED || i->state == DS_STARTING) &&
                            n < ELEMENTSOF(ids))
                                ids[n++] = i->id;
                if (n == 0)
                        continue;
                f->producers_all[f->n_producers_all++] = p->id;
                if (p->ops->flush(p, f->request_id, ids, n) >= 0)
                        f->producers[f->n_producers++] = p->id;
        }

        f->next = s->flushes;
        s->flushes = f;
        if (f->n_producers == 0) {
                r = sd_event_add_defer(svc->event, &f->defer, on_flush_now, f);
                return r < 0 ? r : 0;
        }
        if (timeout_ms == 0)
                timeout_ms = s->config->has_flush_timeout_ms && s->config->flush_timeout_ms
                                     ? s->config->flush_timeout_ms
                                     : SERVICE_DEFAULT_FLUSH_TIMEOUT_MS;
        r = sd_event_add_time_relative(svc->event, &f->timeout, CLOCK_MONOTONIC, (uint64_t) timeout_ms * 1000u, 1000,
                                       on_flush_timeout, f);
        return r < 0 ? r : 0;
}

void session_cancel_flushes(struct session *s) {
        while (s->flushes) {
                struct pending_flush *f = s->flushes;
                s->flushes = f->next;
                sd_event_source_disable_unref(f->timeout);
                sd_event_source_disable_unref(f->defer);
                flush_done_fn done = f->done;
                void *ud = f->userdata;
                free(f->producers);
                free(f->producers_all);
                free(f);
                /* Waiters (a consumer's Flush) learn that it failed. */
                if (done)
                        done(s, false, ud);
        }
}

static void flush_ack(struct pending_flush *f, uint16_t producer_id) {
        for (size_t i = 0; i < f->n_producers; i++)
                if (f->producers[i] == producer_id) {
                        f->producers[i] = f->producers[--f->n_producers];
                        break;
                }
        if (f->n_producers == 0)
                flush_complete(f, true);
}

void session_on_producer_flush_ack(struct traced_service *svc, uint16_t producer_id, uint64_t request_id) {
        /* A producer acks the highest flush id it served: every pending
         * flush up to that id is done for it. */
        for (struct session *s = svc->sessions; s; s = s->next) {
                struct pending_flush *f = s->flushes;
                while (f) {
                        struct pending_flush *next = f->next;
                        if (f->request_id <= request_id)
                                flush_ack(f, producer_id);
                        f = next;
                }
        }
}

/* ---- stopping ----------------------------------------------------------- */

static void check_all_stopped(struct session *s) {
        if (s->state != SESSION_DISABLING || !s->stop_sent)
                return;
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->state == DS_STOPPING)
                        return;
        session_finalize(s);
}

static int on_stop_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->state == DS_STOPPING) {
                        log_notice("Session %" PRIu64 ": data source \"%s\" of producer %u \"%s\" (pid %d) did not "
                                   "acknowledge the stop in time.",
                                   s->id, i->name, i->producer_id, i->producer ? strna(i->producer->name) : "(gone)",
                                   i->producer ? (int) i->producer->pid : 0);
                        i->state = DS_STOPPED;
                }
        check_all_stopped(s);
        return 0;
}

static void stop_all_instances(struct session *s) {
        uint32_t timeout = s->config->has_data_source_stop_timeout_ms && s->config->data_source_stop_timeout_ms
                                   ? s->config->data_source_stop_timeout_ms
                                   : SERVICE_DEFAULT_STOP_TIMEOUT_MS;
        bool waiting = false;

        for (struct ds_instance *i = s->instances; i; i = i->next) {
                if (!i->producer || i->state == DS_STOPPED || i->state == DS_CONFIGURED) {
                        if (i->producer && i->state == DS_CONFIGURED)
                                (void) i->producer->ops->stop_data_source(i->producer, i);
                        i->state = DS_STOPPED;
                        continue;
                }
                (void) i->producer->ops->stop_data_source(i->producer, i);
                if (i->will_notify_on_stop) {
                        i->state = DS_STOPPING;
                        waiting = true;
                } else
                        i->state = DS_STOPPED;
        }
        s->stop_sent = true;
        if (waiting)
                (void) add_timer_ms(s, &s->stop_timer, timeout, on_stop_timeout);
        check_all_stopped(s);
}

static void disable_flush_done(struct session *s, bool success, void *userdata) {
        if (s->state == SESSION_DISABLING)
                stop_all_instances(s);
}

static int on_free_detached(sd_event_source *src, void *userdata) {
        struct session *s = userdata;
        s->free_defer = sd_event_source_disable_unref(s->free_defer);
        if (s->consumer)
                return 0; /* attached again meanwhile: its consumer decides */
        log_info("Session %" PRIu64 " ended while detached; freed.", s->id);
        session_free(s);
        return 0;
}

static void session_finalize(struct session *s) {
        if (s->state == SESSION_DISABLED)
                return;
        s->state = SESSION_DISABLED;
        s->duration_timer = sd_event_source_disable_unref(s->duration_timer);
        s->flush_timer = sd_event_source_disable_unref(s->flush_timer);
        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        s->clear_timer = sd_event_source_disable_unref(s->clear_timer);
        s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
        s->file_timer = sd_event_source_disable_unref(s->file_timer);
        session_add_service_event(s, SERVICE_EVENT_TRACING_DISABLED);

        /* Anything committed while stopping. */
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->producer)
                        i->producer->ops->scrape(i->producer, true);
        /* Nothing more will arrive: read what can be read, as is. */
        for (size_t i = 0; i < s->n_buffers; i++)
                trace_buffer_set_final(s->buffers[i].tb, true);

        if (s->file_fd >= 0) {
                int r = session_write_into_file(s);
                if (r >= 0 || r == -EFBIG) {
                        if (!session_output_drained(s)) {
                                /* The fd takes the rest from the loop; the
                                 * consumer hears of the end after that. */
                                s->out_finalizing = true;
                                return;
                        }
                }
        }
        session_output_finished(s);
}

void session_output_finished(struct session *s) {
        s->out_finalizing = false;
        if (s->file_fd >= 0) {
                log_debug("Session %" PRIu64 ": %" PRIu64 " chunks went straight into the file (%" PRIu64
                          " waits for the disk, %" PRIu64 " held for the next chunk of their commit), %" PRIu64
                          " through the buffers.",
                          s->id, s->chunks_taken, s->take_waits, s->chunks_held, s->chunks_stored);
                if (s->out_error < 0 && !s->disable_error)
                        s->disable_error = strdup(session_output_error_message(s->out_error));
                session_output_free(s);
                s->file_fd = safe_close(s->file_fd);
        }
        log_info("Session %" PRIu64 " disabled%s%s.", s->id, s->disable_error ? ": " : "",
                 s->disable_error ? s->disable_error : "");

        if (s->enable_req) {
                Perfetto__Protos__EnableTracingResponse resp = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
                resp.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
                resp.disabled = true;
                resp.error = s->disable_error;
                ipc_request *req = s->enable_req;
                s->enable_req = NULL;
                (void) ipc_request_reply(req, &resp.base, false, -EBADF);
        }
        session_notify_observers(s, PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED);
        service_state_changed(s->svc);
        /* Nobody can read a detached session that ended by itself: free it
         * (its file, if any, is complete), so its key no longer attaches.
         * Deferred, as callers may be walking the session list. */
        if (s->free_if_detached && !s->consumer && !s->free_defer &&
            sd_event_add_defer(s->svc->event, &s->free_defer, on_free_detached, s) < 0)
                log_warning("Session %" PRIu64 ": could not schedule freeing the detached session.", s->id);
}

void session_force_finalize(struct session *s, const char *error) {
        if (error && !s->disable_error)
                s->disable_error = strdup(error);
        stop_all_instances(s);
        session_finalize(s);
}

void session_disable(struct session *s, const char *error) {
        if (error && !s->disable_error)
                s->disable_error = strdup(error);
        switch (s->state) {
        case SESSION_CONFIGURED:
                stop_all_instances(s);
                session_finalize(s);
                break;
        case SESSION_STARTED:
                s->state = SESSION_DISABLING;
                if (session_flush(s, 0, disable_flush_done, NULL) < 0)
                        stop_all_instances(s);
                break;
        case SESSION_DISABLING:
        case SESSION_DISABLED:
                break;
        }
}

/* ---- producer events ---------------------------------------------------- */

static struct ds_instance *find_instance(struct traced_service *svc, struct producer *p, uint64_t id) {
        for (struct session *s = svc->sessions; s; s = s->next)
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->id == id && i->producer == p)
                                return i;
        return NULL;
}

void session_on_ds_started(struct traced_service *svc, struct producer *p, uint64_t instance_id) {
        struct ds_instance *i = find_instance(svc, p, instance_id);
        if (!i || i->state != DS_STARTING)
                return;
        i->state = DS_STARTED;
        check_all_started(i->session);
}

void session_on_ds_stopped(struct traced_service *svc, struct producer *p, uint64_t instance_id) {
        struct ds_instance *i = find_instance(svc, p, instance_id);
        if (!i || i->state != DS_STOPPING)
                return;
        i->state = DS_STOPPED;
        check_all_stopped(i->session);
}

void session_on_producer_gone(struct traced_service *svc, struct producer *p) {
        for (struct session *s = svc->sessions; s; s = s->next) {
                bool touched = false;
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer == p) {
                                i->producer = NULL;
                                if (i->state == DS_STARTING || i->state == DS_STOPPING)
                                        touched = true;
                                i->state = DS_STOPPED;
                        }
                struct pending_flush *f = s->flushes;
                while (f) {
                        struct pending_flush *next = f->next;
                        bool waiting = false;
                        for (size_t k = 0; k < f->n_producers; k++)
                                if (f->producers[k] == p->id)
                                        waiting = true;
                        if (waiting)
                                flush_ack(f, p->id);
                        f = next;
                }
                if (touched) {
                        check_all_started(s);
                        check_all_stopped(s);
                }
        }
}

void session_on_data_source_registered(struct traced_service *svc, struct producer *p, struct data_source_reg *reg) {
        /* A data source that appears while a session wants it joins it. */
        for (struct session *s = svc->sessions; s; s = s->next) {
                if (s->state != SESSION_CONFIGURED && s->state != SESSION_STARTED)
                        continue;
                for (size_t i = 0; i < s->config->n_data_sources; i++) {
                        const Perfetto__Protos__TraceConfig__DataSource *ds = s->config->data_sources[i];
                        if (!ds->config || !ds->config->name || strcmp(ds->config->name, reg->name) != 0 ||
                            !producer_matches(s, i, p))
                                continue;
                        bool exists = false;
                        for (struct ds_instance *k = s->instances; k; k = k->next)
                                if (k->producer == p && strcmp(k->name, reg->name) == 0)
                                        exists = true;
                        if (exists)
                                continue;
                        struct ds_instance *inst = NULL;
                        if (setup_instance(s, ds, p, reg, &inst) < 0 || !inst)
                                continue;
                        if (s->state == SESSION_STARTED)
                                (void) start_instance(s, inst);
                }
        }
}

static bool trigger_matches(const struct session *s, size_t idx, const char *name, const struct producer *p) {
        const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *t = s->config->trigger_config->triggers[idx];
        if (!t->name || strcmp(t->name, name) != 0)
                return false;
        if (t->producer_name_regex && t->producer_name_regex[0])
                /* Compiled once, when the session was created. */
                return s->trigger_regex && s->trigger_regex[idx] && regex_matches(s->trigger_regex[idx], p->name);
        return true;
}

void received_trigger_done(struct received_trigger *t) {
        free(t->trigger_name);
        free(t->producer_name);
        *t = (struct received_trigger) {};
}

static int received_trigger_copy(const struct received_trigger *from, struct received_trigger *to) {
        *to = *from;
        to->trigger_name = strdup(from->trigger_name ? from->trigger_name : "");
        to->producer_name = strdup(from->producer_name ? from->producer_name : "");
        if (!to->trigger_name || !to->producer_name) {
                received_trigger_done(to);
                return -ENOMEM;
        }
        return 0;
}

static int on_stop_delay(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        s->free_if_detached = true;
        session_disable(s, NULL);
        return 0;
}

static void notify_clone_trigger_hit(struct session *s, const struct received_trigger *t) {
        struct consumer *c = s->consumer;
        if (!c || !c->observe_req ||
            !(c->observe_mask & PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT))
                return;
        Perfetto__Protos__ObserveEventsResponse resp = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
        Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
        Perfetto__Protos__ObservableEvents__CloneTriggerHit hit = PERFETTO__PROTOS__OBSERVABLE_EVENTS__CLONE_TRIGGER_HIT__INIT;
        hit.has_tracing_session_id = hit.has_producer_uid = hit.has_boot_time_ns = hit.has_trigger_delay_ms = true;
        hit.tracing_session_id = (int64_t) s->id;
        hit.trigger_name = t->trigger_name;
        hit.producer_name = t->producer_name;
        hit.producer_uid = (uint32_t) t->producer_uid;
        hit.boot_time_ns = t->boot_time_ns;
        hit.trigger_delay_ms = t->stop_delay_ms;
        ev.clone_trigger_hit = &hit;
        resp.events = &ev;
        (void) ipc_request_reply(c->observe_req, &resp.base, true, -EBADF);
}

static int on_clone_hit_due(sd_event_source *src, uint64_t usec, void *userdata) {
        struct clone_trigger_hit *h = userdata;
        struct session *s = h->session;
        for (struct clone_trigger_hit **pp = &s->clone_hits; *pp; pp = &(*pp)->next)
                if (*pp == h) {
                        *pp = h->next;
                        break;
                }
        if (s->state == SESSION_STARTED)
                notify_clone_trigger_hit(s, &h->trigger);
        sd_event_source_disable_unref(h->timer);
        received_trigger_done(&h->trigger);
        free(h);
        return 0;
}

static void schedule_clone_hit(struct session *s, const struct received_trigger *t) {
        struct clone_trigger_hit *h = calloc(1, sizeof(*h));
        if (!h || received_trigger_copy(t, &h->trigger) < 0) {
                free(h);
                log_oom();
                return;
        }
        h->session = s;
        if (sd_event_add_time_relative(s->svc->event, &h->timer, CLOCK_BOOTTIME, (uint64_t) t->stop_delay_ms * 1000u,
                                       1000, on_clone_hit_due, h) < 0) {
                received_trigger_done(&h->trigger);
                free(h);
                log_warning("Session %" PRIu64 ": could not schedule a clone trigger.", s->id);
                return;
        }
        h->next = s->clone_hits;
        s->clone_hits = h;
}

static int session_record_trigger(struct session *s, const struct received_trigger *t) {
        if (s->n_triggers >= SERVICE_MAX_TRIGGERS_PER_SESSION)
                return -ENOBUFS;
        struct received_trigger *a = realloc(s->triggers, (s->n_triggers + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        s->triggers = a;
        int r = received_trigger_copy(t, &s->triggers[s->n_triggers]);
        if (r < 0)
                return r;
        s->n_triggers++;
        s->n_triggers_received++;
        return 0;
}

/* Sets duration_ms in the session's config (and its packed copy, which
 * the trace_config packet carries). */
static void session_set_duration(struct session *s, uint32_t ms) {
        s->config->has_duration_ms = true;
        s->config->duration_ms = ms;
        size_t n = protobuf_c_message_get_packed_size(&s->config->base);
        uint8_t *b = malloc(n ? n : 1);
        if (!b)
                return;
        protobuf_c_message_pack(&s->config->base, b);
        free(s->config_bytes);
        s->config_bytes = b;
        s->config_size = n;
}

static uint64_t name_hash(const char *name) {
        uint64_t h = 0xcbf29ce484222325ull; /* FNV-1a */
        for (const unsigned char *c = (const unsigned char *) name; *c; c++)
                h = (h ^ *c) * 0x100000001b3ull;
        return h;
}

/* Drops history older than a day; returns how often name_hash matched in
 * the day before now. */
static size_t trigger_history_count(struct traced_service *svc, uint64_t now_ns, uint64_t hash) {
        const uint64_t day_ns = 24ull * 3600u * 1000000000u;
        size_t old = 0, count = 0;
        while (old < svc->n_trigger_history && svc->trigger_history[old].ts_ns + day_ns < now_ns)
                old++;
        if (old > 0) {
                memmove(svc->trigger_history, svc->trigger_history + old,
                        (svc->n_trigger_history - old) * sizeof(*svc->trigger_history));
                svc->n_trigger_history -= old;
        }
        for (size_t i = 0; i < svc->n_trigger_history; i++)
                count += svc->trigger_history[i].name_hash == hash;
        return count;
}

static void trigger_history_add(struct traced_service *svc, uint64_t now_ns, uint64_t hash) {
        if (!svc->trigger_history) {
                svc->trigger_history = calloc(SERVICE_MAX_TRIGGER_HISTORY, sizeof(*svc->trigger_history));
                if (!svc->trigger_history)
                        return;
        }
        if (svc->n_trigger_history == SERVICE_MAX_TRIGGER_HISTORY) {
                memmove(svc->trigger_history, svc->trigger_history + 1,
                        (SERVICE_MAX_TRIGGER_HISTORY - 1) * sizeof(*svc->trigger_history));
                svc->n_trigger_history--;
        }
        svc->trigger_history[svc->n_trigger_history++] = (struct trigger_history) { now_ns, hash };
}

static double random_unit(void) {
        uint64_t v;
        if (getrandom(&v, sizeof(v), GRND_NONBLOCK) != (ssize_t) sizeof(v))
                v = now_usec(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;
        return (double) (v >> 11) / (double) (1ull << 53); /* [0, 1) */
}

void session_on_triggers(struct traced_service *svc, struct producer *p, char **names, size_t n) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        uint64_t now_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;

        for (size_t k = 0; k < n; k++) {
                if (!names[k])
                        continue;
                uint64_t hash = name_hash(names[k]);
                size_t in_window = trigger_history_count(svc, now_ns, hash);
                bool matched = false;
                for (struct session *s = svc->sessions; s; s = s->next) {
                        const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
                        if (!tc || s->is_clone || s->state == SESSION_DISABLED)
                                continue;
                        /* The first trigger of that name decides, as upstream. */
                        size_t t = 0;
                        while (t < tc->n_triggers && !(tc->triggers[t]->name && strcmp(tc->triggers[t]->name, names[k]) == 0))
                                t++;
                        if (t == tc->n_triggers || !trigger_matches(s, t, names[k], p))
                                continue;
                        const Perfetto__Protos__TraceConfig__TriggerConfig__Trigger *tr = tc->triggers[t];
                        if (tr->has_skip_probability && random_unit() < tr->skip_probability)
                                continue;
                        if (tr->has_max_per_24_h && tr->max_per_24_h > 0 && in_window >= tr->max_per_24_h) {
                                log_info("Session %" PRIu64 ": trigger \"%s\" ignored, max_per_24_h reached.", s->id,
                                         names[k]);
                                continue;
                        }
                        matched = true;
                        struct received_trigger rt = {
                                .trigger_name = names[k],
                                .producer_name = p->name,
                                .producer_uid = p->uid,
                                .boot_time_ns = now_ns,
                                .stop_delay_ms = tr->has_stop_delay_ms ? tr->stop_delay_ms : 0,
                        };
                        bool first = s->n_triggers_received == 0;
                        int r = session_record_trigger(s, &rt);
                        if (r < 0)
                                log_warning_errno(r, "Session %" PRIu64 ": trigger \"%s\" not recorded: %m", s->id,
                                                  names[k]);
                        log_info("Session %" PRIu64 ": trigger \"%s\" from producer \"%s\".", s->id, names[k],
                                 strna(p->name));
                        if (!s->triggered_by)
                                s->triggered_by = strdup(names[k]);
                        if (is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING)) {
                                if (s->state != SESSION_CONFIGURED || !s->waiting_for_start_trigger)
                                        continue;
                                s->waiting_for_start_trigger = false;
                                s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
                                /* The trace lasts the trigger's stop_delay_ms from now. */
                                session_set_duration(s, rt.stop_delay_ms);
                                (void) session_start_now(s);
                        } else if (is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING)) {
                                if (!first || s->state != SESSION_STARTED || s->stop_trigger_hit)
                                        continue;
                                s->stop_trigger_hit = true;
                                s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
                                (void) add_timer_ms(s, &s->trigger_timer, rt.stop_delay_ms, on_stop_delay);
                        } else if (is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT))
                                schedule_clone_hit(s, &rt);
                }
                if (matched)
                        trigger_history_add(svc, now_ns, hash);
        }
}

struct session *service_find_bugreport_session(struct traced_service *svc) {
        struct session *best = NULL;
        for (struct session *s = svc->sessions; s; s = s->next) {
                int32_t score = s->config->has_bugreport_score ? s->config->bugreport_score : 0;
                if (score <= 0 || s->state != SESSION_STARTED || s->is_clone)
                        continue;
                if (!best || score > best->config->bugreport_score)
                        best = s;
        }
        return best;
}

bool session_waiting_for_trigger(const struct session *s) {
        if (s->is_clone)
                return false;
        const Perfetto__Protos__TraceConfig__TriggerConfig *tc = s->config->trigger_config;
        if (!tc)
                return false;
        if (tc->n_triggers > 0 && s->n_triggers_received == 0)
                return true;
        return tc->has_trigger_mode &&
               tc->trigger_mode == PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT;
}

void session_notify_observers(struct session *s, uint32_t event_mask) {
        struct consumer *c = s->consumer;
        if (!c || !c->observe_req || !(c->observe_mask & event_mask))
                return;
        if (event_mask != PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED)
                return;
        if (s->state == SESSION_DISABLED)
                return;
        Perfetto__Protos__ObserveEventsResponse resp = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
        Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
        ev.has_all_data_sources_started = true;
        ev.all_data_sources_started = true;
        resp.events = &ev;
        (void) ipc_request_reply(c->observe_req, &resp.base, true, -EBADF);
}

/* ---- cloning and config changes ------------------------------------------ */

/* Appends what src already wrote to its file to out_fd. */
static int copy_written_file(struct session *src, int out_fd) {
        uint8_t buf[32 * 1024];
        off_t off = 0;

        for (;;) {
                ssize_t n = pread(src->file_fd, buf, sizeof(buf), off);
                if (n < 0) {
                        if (errno == EINTR)
                                continue;
                        return -errno;
                }
                if (n == 0)
                        return 0;
                off += n;
                for (ssize_t done = 0; done < n;) {
                        ssize_t w = write(out_fd, buf + done, (size_t) (n - done));
                        if (w < 0) {
                                if (errno == EINTR)
                                        continue;
                                return -errno;
                        }
                        done += w;
                }
        }
}

int session_clone(struct session *src, struct consumer *c, int out_fd, struct session **ret, bool *ret_wrote_file,
                  char **ret_error) {
        _cleanup_close_ int fd = out_fd;
        struct traced_service *svc = src->svc;
        int r;

        *ret_wrote_file = false;
        if (src->file_fd >= 0 && fd < 0)
                return config_error(ret_error, "Cloning a write_into_file session needs an output file descriptor");
        if (svc->n_sessions >= SERVICE_MAX_SESSIONS)
                return config_error(ret_error, "Too many concurrent tracing sessions");

        struct session *s;
        /* A read-only snapshot: disabled from the start. */
        r = session_alloc(svc, c, SESSION_DISABLED, src->config, &s);
        if (r < 0)
                return r;
        s->is_clone = true;
        r = session_compile_regexes(s, ret_error);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->buffers = calloc(src->n_buffers ? src->n_buffers : 1, sizeof(*s->buffers));
        if (!s->buffers) {
                session_free(s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < src->n_buffers; i++) {
                r = trace_buffer_clone(src->buffers[i].tb, &s->buffers[i].tb);
                if (r < 0) {
                        session_free(s);
                        return config_error(ret_error, "Failed to copy a trace buffer");
                }
                /* The clone is read as a finished trace. */
                trace_buffer_set_final(s->buffers[i].tb, true);
                s->buffers[i].id = ++svc->last_buffer_id;
                s->n_buffers++;
        }
        /* The triggers the source saw since its last clone go with this
         * one, as upstream does. */
        s->triggers = src->triggers;
        s->n_triggers = src->n_triggers;
        s->n_triggers_received = src->n_triggers_received;
        src->triggers = NULL;
        src->n_triggers = src->n_triggers_emitted = 0;
        s->packets_invalid = src->packets_invalid;
        s->flushes_requested = src->flushes_requested;
        s->flushes_succeeded = src->flushes_succeeded;
        s->flushes_failed = src->flushes_failed;

        if (src->file_fd >= 0) {
                /* The copy continues the source's file: first what it
                 * wrote, then what its buffers still hold (the read
                 * progress is cloned too, so nothing appears twice), with
                 * the same sequence ids. */
                r = session_output_sync(src);
                if (r >= 0)
                        r = copy_written_file(src, fd);
                session_output_unsync(src);
                if (r < 0) {
                        session_free(s);
                        return config_error(ret_error, "Failed to copy the write_into_file session's file");
                }
                if (src->seq_cap > 0) {
                        s->seqs = calloc(src->seq_cap, sizeof(*s->seqs));
                        if (!s->seqs) {
                                session_free(s);
                                return -ENOMEM;
                        }
                        memcpy(s->seqs, src->seqs, src->seq_cap * sizeof(*s->seqs));
                        s->seq_cap = src->seq_cap;
                        s->n_seqs = src->n_seqs;
                        s->next_sequence_id = src->next_sequence_id;
                }
                r = session_output_open(s, TAKE_FD(fd), ret_error);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
                /* The consumer reads the file once answered: it must be there. */
                r = session_output_complete(s);
                if (r < 0 && r != -EFBIG) {
                        session_free(s);
                        return config_error(ret_error, "Failed to write the clone into the output file");
                }
                if (session_output_drained(s)) {
                        session_output_free(s);
                        s->file_fd = safe_close(s->file_fd);
                } else
                        s->out_finalizing = true; /* the loop waits for the pipe or the writer */
                *ret_wrote_file = true;
        }
        log_info("Session %" PRIu64 " cloned from session %" PRIu64 "%s.", s->id, src->id,
                 *ret_wrote_file ? " into the consumer's file" : "");
        *ret = s;
        service_state_changed(svc);
        return 0;
}

int session_change_config(struct session *s, const Perfetto__Protos__TraceConfig *cfg) {
        int r;
        /* Only the producer filters of data sources may change: producers
         * that now match get the data source, nobody is removed. */
        if (s->state != SESSION_STARTED && s->state != SESSION_CONFIGURED)
                return -EBUSY;
        if (cfg->n_data_sources > SERVICE_MAX_CONFIG_DATA_SOURCES)
                return -E2BIG;
        for (size_t i = 0; i < s->config->n_data_sources; i++) {
                Perfetto__Protos__TraceConfig__DataSource *cur = s->config->data_sources[i];
                if (!cur->config || !cur->config->name)
                        continue;
                const Perfetto__Protos__TraceConfig__DataSource *upd = NULL;
                for (size_t k = 0; k < cfg->n_data_sources && !upd; k++)
                        if (cfg->data_sources[k]->config && cfg->data_sources[k]->config->name &&
                            strcmp(cfg->data_sources[k]->config->name, cur->config->name) == 0)
                                upd = cfg->data_sources[k];
                if (!upd)
                        continue;
                if (upd->n_producer_name_regex_filter > SERVICE_MAX_CONFIG_REGEX_FILTERS ||
                    upd->n_producer_name_filter > SERVICE_MAX_CONFIG_NAME_FILTERS)
                        return -E2BIG;
                struct compiled_regexes re;
                size_t budget_used = 0;
                r = compile_ds_filters(upd, &budget_used, &re, NULL);
                if (r < 0)
                        return r;
                /* Swap in copies of the new filters. */
                char **pf = calloc(upd->n_producer_name_filter + 1, sizeof(char *));
                char **rf = calloc(upd->n_producer_name_regex_filter + 1, sizeof(char *));
                if (!pf || !rf) {
                        free(pf);
                        free(rf);
                        compiled_regexes_done(&re);
                        return -ENOMEM;
                }
                for (size_t k = 0; k < upd->n_producer_name_filter; k++)
                        pf[k] = strdup(upd->producer_name_filter[k]);
                for (size_t k = 0; k < upd->n_producer_name_regex_filter; k++)
                        rf[k] = strdup(upd->producer_name_regex_filter[k]);
                for (size_t k = 0; k < cur->n_producer_name_filter; k++)
                        free(cur->producer_name_filter[k]);
                for (size_t k = 0; k < cur->n_producer_name_regex_filter; k++)
                        free(cur->producer_name_regex_filter[k]);
                free(cur->producer_name_filter);
                free(cur->producer_name_regex_filter);
                cur->producer_name_filter = pf;
                cur->n_producer_name_filter = upd->n_producer_name_filter;
                cur->producer_name_regex_filter = rf;
                cur->n_producer_name_regex_filter = upd->n_producer_name_regex_filter;
                compiled_regexes_done(&s->ds_regex[i]);
                s->ds_regex[i] = re;

                for (struct producer *p = s->svc->producers; p; p = p->next) {
                        if (!p->initialized || !producer_matches(s, i, p))
                                continue;
                        for (size_t k = 0; k < p->n_data_sources; k++) {
                                if (strcmp(p->data_sources[k].name, cur->config->name) != 0)
                                        continue;
                                bool exists = false;
                                for (struct ds_instance *x = s->instances; x; x = x->next)
                                        if (x->producer == p && strcmp(x->name, cur->config->name) == 0)
                                                exists = true;
                                struct ds_instance *inst = NULL;
                                if (exists || setup_instance(s, cur, p, &p->data_sources[k], &inst) < 0 || !inst)
                                        continue;
                                if (s->state == SESSION_STARTED)
                                        (void) start_instance(s, inst);
                        }
                }
        }
        return 0;
}
