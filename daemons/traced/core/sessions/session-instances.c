/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Data source instances of a session: which producers a data source
 * config matches (name, machine and regex filters), the DataSourceConfig
 * each gets, their start and stop acknowledgements, producers that come
 * and go, and ChangeTraceConfig. */

#include <errno.h>
#include <inttypes.h>
#include <regex.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "basic/regex-limits.h"
#include "log/log.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/parked.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-stats.h"

#include "perfetto/config/data_source_config.pb-c.h"

void session_instance_free(struct ds_instance *i) {
        free(i->name);
        free(i->config);
        free(i);
}

static void compiled_regexes_done(struct compiled_regexes *c) {
        for (size_t i = 0; i < c->n; i++)
                regfree(&c->re[i]);
        free(c->re);
        *c = (struct compiled_regexes) {};
}

void session_free_regexes(struct session *s) {
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
int session_compile_regexes(struct session *s, char **ret_error) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        size_t n_regex = 0, n_names = 0, budget_used = 0;
        const char *reason;
        int r;

        if (cfg->n_data_sources > SERVICE_MAX_CONFIG_DATA_SOURCES)
                return session_config_error(ret_error, "The trace config has more than 1024 data sources");
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                n_regex += cfg->data_sources[i]->n_producer_name_regex_filter;
                n_names += cfg->data_sources[i]->n_producer_name_filter;
                n_names += cfg->data_sources[i]->n_machine_name_filter;
        }
        if (n_regex > SERVICE_MAX_CONFIG_REGEX_FILTERS)
                return session_config_error(ret_error, "The trace config has more than 64 producer_name_regex_filter entries");
        if (n_names > SERVICE_MAX_CONFIG_NAME_FILTERS)
                return session_config_error(ret_error,
                                    "The trace config has more than 4096 producer_name_filter and machine_name_filter entries");
        if (cfg->trigger_config && cfg->trigger_config->n_triggers > SERVICE_MAX_CONFIG_TRIGGERS)
                return session_config_error(ret_error, "The trace config has more than 256 triggers");

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

/* TraceConfig.producers: the shared memory size and page size a producer
 * gets when its first data source is set up (upstream's rule: the config
 * first, then the producer's hints, then the defaults). Once the producer
 * has its buffer it keeps it. */
static void apply_producer_config(const struct session *s, struct producer *p) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        if (p->setup_tracing_sent || !p->name)
                return;
        for (size_t i = 0; i < cfg->n_producers; i++) {
                const Perfetto__Protos__TraceConfig__ProducerConfig *pc = cfg->producers[i];
                if (!pc->producer_name || strcmp(pc->producer_name, p->name) != 0)
                        continue;
                p->smb_size_config = pc->has_shm_size_kb ? (size_t) pc->shm_size_kb * 1024u : 0;
                p->smb_page_size_config = pc->has_page_size_kb ? (size_t) pc->page_size_kb * 1024u : 0;
                return;
        }
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
                session_instance_free(inst);
                return -ENOMEM;
        }
        /* Keep creation order: commands go out in it. */
        struct ds_instance **tail = &s->instances;
        while (*tail)
                tail = &(*tail)->next;
        *tail = inst;
        if (ret)
                *ret = inst;

        apply_producer_config(s, p);
        r = p->ops->setup_data_source(p, inst);
        if (r < 0)
                log_warning_errno(r, "Failed to set up data source \"%s\" on producer \"%s\": %m", inst->name,
                                  strna(p->name));
        return 0;
}

/* Sets up the session's data sources on every producer that has them. */
void session_setup_data_sources(struct session *s) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        for (size_t i = 0; i < cfg->n_data_sources; i++) {
                const Perfetto__Protos__TraceConfig__DataSource *ds = cfg->data_sources[i];
                if (!ds->config || !ds->config->name)
                        continue;
                /* Its plugin's host is asked for: its data sources join
                 * when it registers them. */
                (void) parked_request(s->svc, ds->config->name);
                for (struct producer *p = s->svc->producers; p; p = p->next) {
                        if (!p->initialized || !producer_matches(s, i, p) ||
                            (p->plugin_host && parked_host_retiring(s->svc, p->pid)))
                                continue;
                        for (size_t k = 0; k < p->n_data_sources; k++)
                                if (strcmp(p->data_sources[k].name, ds->config->name) == 0)
                                        (void) setup_instance(s, ds, p, &p->data_sources[k], NULL);
                }
        }
}

int session_start_instance(struct session *s, struct ds_instance *inst) {
        if (!inst->producer || inst->state != DS_CONFIGURED)
                return 0;
        inst->state = inst->will_notify_on_start ? DS_STARTING : DS_STARTED;
        return inst->producer->ops->start_data_source(inst->producer, inst);
}

void session_check_all_started(struct session *s) {
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->state == DS_STARTING)
                        return;
        if (s->state != SESSION_STARTED)
                return;
        session_start_complete(s);
        /* An instance lost before it started did not start: the trace
         * and the consumer are not told they all did. */
        if (!s->all_started_notified && !s->instance_lost_before_start) {
                s->all_started_notified = true;
                session_add_service_event(s, SERVICE_EVENT_ALL_DATA_SOURCES_STARTED);
                session_notify_all_started(s);
        }
}

size_t session_list_data_sources(struct session *s, enum ds_instance_state state, uint16_t producer_id,
                                 TracingServiceEvent_DataSources *list) {
        size_t n = 0;

        for (struct ds_instance *i = s->instances; i; i = i->next) {
                if (i->state != state || (producer_id && i->producer_id != producer_id))
                        continue;
                TracingServiceEvent_DataSources_DataSource ds;
                TracingServiceEvent_DataSources_begin_data_source(list, &ds);
                if (i->producer && i->producer->name)
                        TracingServiceEvent_DataSources_DataSource_set_producer_name(&ds, i->producer->name);
                TracingServiceEvent_DataSources_DataSource_set_data_source_name(&ds, i->name);
                TracingServiceEvent_DataSources_end_data_source(list, &ds);
                n++;
        }
        return n;
}

static void describe_delay(const struct session *s, char *buf, size_t size) {
        uint64_t ms = (session_now_usec(CLOCK_BOOTTIME) * 1000u - s->started_ns) / 1000000u;
        snprintf(buf, size, "%" PRIu64 ".%01" PRIu64 " s", ms / 1000u, ms % 1000u / 100u);
}

/* The start timeout passed with instances still starting: each is named
 * (log, TraceStats' data source errors, the slow_starting_data_sources
 * event) and the session's duration counts from now. */
int session_on_start_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        TracingServiceEvent_DataSources list;
        char msg[160];

        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        snprintf(msg, sizeof(msg),
                 "had not started %u s after the session started: recorded without it until it does%s",
                 SERVICE_DATA_SOURCE_START_TIMEOUT_MS / 1000u,
                 s->duration_pending ? "; the duration counts from now" : "");
        for (struct ds_instance *i = s->instances; i; i = i->next) {
                if (i->state != DS_STARTING)
                        continue;
                s->start_timed_out = true;
                log_notice("Session %" PRIu64 ": data source \"%s\" of producer %u \"%s\" (pid %d) %s.", s->id,
                           i->name, i->producer_id, i->producer ? strna(i->producer->name) : "(gone)",
                           i->producer ? (int) i->producer->pid : 0, msg);
                (void) session_add_ds_error(s, i->producer ? i->producer->name : NULL, i->name, NULL, msg);
        }
        TracingServiceEvent_DataSources_init(&list, pb_buf_stream(&b));
        if (session_list_data_sources(s, DS_STARTING, 0, &list) > 0 && traced_pb_msg_finish(&list.msg) >= 0)
                session_add_service_event_msg(s, SERVICE_EVENT_SLOW_STARTING_DATA_SOURCES, pb_buf_data(&b),
                                              pb_buf_len(&b));
        session_start_complete(s);
        return 0;
}

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
        struct session *s = i->session;
        if (s->start_timed_out && s->state == SESSION_STARTED) {
                char msg[128], delay[32];
                describe_delay(s, delay, sizeof(delay));
                snprintf(msg, sizeof(msg), "started %s after the session started; recorded from then on", delay);
                log_notice("Session %" PRIu64 ": data source \"%s\" of producer %u \"%s\" %s.", s->id, i->name,
                           p->id, strna(p->name), msg);
                (void) session_add_ds_error(s, p->name, i->name, NULL, msg);
        }
        session_check_all_started(s);
}

void session_on_ds_stopped(struct traced_service *svc, struct producer *p, uint64_t instance_id) {
        struct ds_instance *i = find_instance(svc, p, instance_id);
        if (!i || i->state != DS_STOPPING)
                return;
        i->state = DS_STOPPED;
        session_check_all_stopped(i->session);
}

void session_on_ds_error(struct traced_service *svc, struct producer *p, uint64_t instance_id, const char *field,
                         const char *message) {
        struct ds_instance *i = find_instance(svc, p, instance_id);
        if (!i)
                return;
        if (session_add_ds_error(i->session, p->name, i->name, field, message))
                log_notice("Session %" PRIu64 ": producer %u \"%.64s\" reports for data source %s: %.200s%s%.400s",
                           i->session->id, p->id, strna(p->name), i->name, field ? field : "", field ? ": " : "",
                           message ? message : "");
}

void session_on_producer_gone(struct traced_service *svc, struct producer *p) {
        for (struct session *s = svc->sessions; s; s = s->next) {
                bool touched = false;
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer == p) {
                                /* A session that runs loses what was not
                                 * stopped yet (its plugin host ended). */
                                bool running = s->state == SESSION_CONFIGURED || s->state == SESSION_STARTED ||
                                               s->state == SESSION_DISABLING;
                                if (running && i->state != DS_STOPPED) {
                                        bool before_start = i->state == DS_CONFIGURED || i->state == DS_STARTING;
                                        host_exits_instance_lost(s, p, i, before_start);
                                        if (before_start && p->plugin_host && !svc->stopping)
                                                s->instance_lost_before_start = true;
                                }
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
                                session_flush_ack(f, p->id);
                        f = next;
                }
                if (touched) {
                        session_check_all_started(s);
                        session_check_all_stopped(s);
                }
        }
}

void session_on_data_source_registered(struct traced_service *svc, struct producer *p, struct data_source_reg *reg) {
        /* A data source that appears while a session wants it joins it. */
        if (p->plugin_host && parked_host_retiring(svc, p->pid))
                return;
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
                                (void) session_start_instance(s, inst);
                }
        }
}

bool session_instance_clears(const struct ds_instance *i) {
        const struct producer *p = i->producer;
        if (!p || i->state != DS_STARTED)
                return false;
        for (size_t k = 0; k < p->n_data_sources; k++)
                if (strcmp(p->data_sources[k].name, i->name) == 0 && p->data_sources[k].handles_incremental_state_clear)
                        return true;
        return false;
}

void session_clear_incremental_state(struct session *s) {
        struct traced_service *svc = s->svc;

        for (struct producer *p = svc->producers; p; p = p->next) {
                uint64_t ids[64];
                size_t n = 0;
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer == p && session_instance_clears(i) && n < ELEMENTSOF(ids))
                                ids[n++] = i->id;
                if (n)
                        (void) p->ops->clear_incremental_state(p, ids, n);
        }
}

int session_on_clear_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        session_clear_incremental_state(s);
        (void) sd_event_source_set_time_relative(src,
                                                 (uint64_t) s->config->incremental_state_config->clear_period_ms * 1000u);
        return sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
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
                        if (!p->initialized || !producer_matches(s, i, p) ||
                            (p->plugin_host && parked_host_retiring(s->svc, p->pid)))
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
                                        (void) session_start_instance(s, inst);
                        }
                }
        }
        return 0;
}

struct producer *sessions_find_producer(struct traced_service *svc, uint16_t id) {
        for (struct producer *p = svc->producers; p; p = p->next)
                if (p->id == id)
                        return p;
        return NULL;
}
