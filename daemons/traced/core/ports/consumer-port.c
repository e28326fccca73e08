/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The ConsumerPort service: tracing sessions driven by consumers. */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/utsname.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/output/output-path.h"
#include "pbtxt/pb-check.h"
#include "core/limits.h"
#include "core/ports/consumer-port.h"
#include "core/ports/ports.h"
#include "core/ports/startup-hold.h"
#include "core/sessions/parked.h"
#include "core/service.h"
#include "core/sessions/producer.h"
#include "core/sessions/session.h"
#include "core/sessions/session-stats.h"

#include "perfetto/common/observable_events.pb-c.h"
#include "perfetto/common/tracing_service_capabilities.pb-c.h"
#include "perfetto/common/tracing_service_state.pb-c.h"
#include "perfetto/ipc/consumer_port.pb-c.h"

#define DETACH_KEY_MAX 256u

static int on_bind(ipc_host_conn *conn, void *userdata) {
        struct traced_service *svc = userdata;
        struct consumer *c = calloc(1, sizeof(*c));
        if (!c)
                return log_oom();
        c->svc = svc;
        c->conn = conn;
        c->uid = ipc_host_conn_uid(conn);
        ipc_host_conn_set_userdata(conn, c);
        return 0;
}

static void on_disconnect(ipc_host_conn *conn, void *userdata) {
        struct consumer *c = ipc_host_conn_get_userdata(conn);

        if (!c)
                return;
        ipc_host_conn_set_userdata(conn, NULL);
        if (c->observe_req) {
                ipc_request_unref(c->observe_req);
                c->observe_req = NULL;
        }
        c->read_timer = sd_event_source_disable_unref(c->read_timer);
        c->read_req = ipc_request_unref(c->read_req);
        consumer_query_free(c);
        if (c->session) {
                struct session *s = c->session;
                /* A session dies with its consumer unless it was detached. */
                log_info("Consumer of session %" PRIu64 " went away; freeing the session.", session_id(s));
                session_forget_consumer(s);
                c->session = NULL;
                session_set_enable_req(s, NULL);
                session_force_finalize(s, NULL);
                session_free(s);
        }
        free(c);
}

/* The session is over (or never started): disabled, with the service's
 * error (NULL: none) and why it ended early (0: it did not). */
static void enable_ended(ipc_request *req, const char *msg, int end_reason) {
        Perfetto__Protos__EnableTracingResponse resp = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__INIT;
        resp.state_case = PERFETTO__PROTOS__ENABLE_TRACING_RESPONSE__STATE_DISABLED;
        resp.disabled = true;
        resp.error = (char *) msg;
        if (end_reason) {
                resp.has_traced_end_reason = true;
                resp.traced_end_reason = end_reason;
        }
        reply(req, &resp.base);
}

static void enable_error(ipc_request *req, const char *msg) {
        enable_ended(req, msg, 0);
}

static void m_enable_tracing(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__EnableTracingRequest *a = (const void *) args;
        struct traced_service *svc = userdata;
        struct consumer *c = req_consumer(req);
        _cleanup_close_ int fd = ipc_request_take_fd(req);
        _cleanup_free_ char *error = NULL;
        struct session *s = NULL;
        int r;

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        if (a->has_attach_notification_only && a->attach_notification_only) {
                /* After Attach: wait for the attached session to end. */
                if (!c->session) {
                        enable_error(req, "No attached tracing session");
                        return;
                }
                if (session_state(c->session) == SESSION_DISABLED) {
                        enable_ended(req, NULL, session_end_reason(c->session));
                        return;
                }
                session_set_enable_req(c->session, req);
                return;
        }
        if (c->session) {
                enable_error(req, "This consumer already has a tracing session");
                return;
        }
        if (svc->stopping) {
                enable_error(req, "The tracing service is stopping: start the recording again once it runs");
                return;
        }
        if (!a->trace_config) {
                enable_error(req, "EnableTracing without a trace config");
                return;
        }
        /* protobuf-c keeps the low bits of a value too large for its
         * field (size_kb: 2^40 + 4 would be 4 KiB): refuse those. */
        size_t args_len;
        const uint8_t *args_bytes = ipc_request_args(req, &args_len);
        _cleanup_free_ char *range_error = NULL;
        if (args_bytes &&
            pb_check_ranges(&perfetto__protos__enable_tracing_request__descriptor, args_bytes, args_len, &range_error) < 0) {
                _cleanup_free_ char *msg = NULL;
                if (asprintf(&msg, "The trace config has an out-of-range value: %s",
                             range_error ? range_error : "?") < 0)
                        msg = NULL;
                log_notice("Refusing a tracing session from uid %u: %s", (unsigned) c->uid, msg ? msg : "out of range");
                enable_error(req, msg ? msg : "The trace config has an out-of-range value");
                return;
        }
        const Perfetto__Protos__TraceConfig *cfg = a->trace_config;
        bool to_file = cfg->has_write_into_file && cfg->write_into_file;
        bool service_opened = false, created = false;
        size_t path_len = cfg->output_path ? strlen(cfg->output_path) : 0;
        if (to_file && fd >= 0 && cfg->traced_rotation) {
                /* A directory of the consumer's: only one that is its own. */
                const char *why = output_path_check_dir(fd, c->uid);
                if (why) {
                        log_notice("Refusing a tracing session from uid %u: %s", (unsigned) c->uid, why);
                        enable_error(req, why);
                        return;
                }
        } else if (to_file && fd < 0 && path_len > 0 && cfg->output_path[path_len - 1] == '/') {
                /* Rotation into a directory of the trace directory. */
                fd = output_path_open_dir(svc->trace_dir_fd, svc->trace_dir, cfg->output_path, &error);
                if (fd < 0) {
                        log_notice("Refusing a tracing session from uid %u: %s", (unsigned) c->uid,
                                   error ? error : strerror(-fd));
                        enable_error(req, error ? error : "Cannot open output_path");
                        return;
                }
        } else if (to_file && fd < 0 && cfg->output_path && cfg->output_path[0]) {
                /* The service opens the file: only in its trace directory. */
                service_opened = true;
                fd = output_path_open(svc->trace_dir_fd, svc->trace_dir, cfg->output_path, &created, &error);
                if (fd < 0) {
                        log_notice("Refusing a tracing session from uid %u: %s", (unsigned) c->uid,
                                   error ? error : strerror(-fd));
                        enable_error(req, error ? error : "Cannot open output_path");
                        return;
                }
                free(error);
                error = NULL;
        }

        int file_fd = to_file ? fd : -EBADF;
        r = session_create(svc, c, c->uid, cfg, to_file ? TAKE_FD(fd) : -EBADF, &s, &error);
        if (r < 0 && created)
                /* A refused session leaves no file behind it... */
                output_path_unlink(svc->trace_dir_fd, svc->trace_dir, cfg->output_path);
        else if (r >= 0 && service_opened && !created && (r = output_path_claim(file_fd)) < 0) {
                /* ...and an existing one as it was until now. */
                session_free(s);
                s = NULL;
                if (asprintf(&error, "Cannot truncate output_path \"%s\": %s", cfg->output_path, strerror(-r)) < 0)
                        error = NULL;
        }
        if (r < 0) {
                log_notice("Refusing a tracing session from uid %u: %s", (unsigned) c->uid,
                           error ? error : strerror(-r));
                enable_error(req, error ? error : "Failed to create the tracing session");
                return;
        }
        c->session = s;
        session_set_enable_req(s, req);
        if (!(cfg->has_deferred_start && cfg->deferred_start)) {
                r = session_start(s);
                if (r < 0)
                        session_disable(s, "Failed to start the tracing session");
        }
}

static void m_start_tracing(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__StartTracingResponse resp = PERFETTO__PROTOS__START_TRACING_RESPONSE__INIT;
        struct consumer *c = req_consumer(req);

        if (!c || !c->session || session_start(c->session) < 0) {
                ipc_request_fail(req);
                return;
        }
        reply(req, &resp.base);
}

static void m_change_trace_config(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__ChangeTraceConfigRequest *a = (const void *) args;
        Perfetto__Protos__ChangeTraceConfigResponse resp = PERFETTO__PROTOS__CHANGE_TRACE_CONFIG_RESPONSE__INIT;
        struct consumer *c = req_consumer(req);

        /* Like upstream: only producer filters of existing data sources can
         * change; anything else is refused. */
        if (!c || !c->session || !a->trace_config || session_change_config(c->session, a->trace_config) < 0) {
                ipc_request_fail(req);
                return;
        }
        reply(req, &resp.base);
}

static void m_disable_tracing(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__DisableTracingResponse resp = PERFETTO__PROTOS__DISABLE_TRACING_RESPONSE__INIT;
        struct consumer *c = req_consumer(req);

        if (!c || !c->session) {
                ipc_request_fail(req);
                return;
        }
        session_disable(c->session, NULL);
        reply(req, &resp.base);
}

static void m_free_buffers(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__FreeBuffersResponse resp = PERFETTO__PROTOS__FREE_BUFFERS_RESPONSE__INIT;
        struct consumer *c = req_consumer(req);

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        if (c->session) {
                struct session *s = c->session;
                c->session = NULL;
                session_forget_consumer(s);
                if (session_state(s) != SESSION_DISABLED)
                        session_force_finalize(s, NULL);
                session_free(s);
        }
        reply(req, &resp.base);
}

static void flush_reply(struct session *s, bool success, void *userdata) {
        ipc_request *req = userdata;
        Perfetto__Protos__FlushResponse resp = PERFETTO__PROTOS__FLUSH_RESPONSE__INIT;

        if (success)
                reply(req, &resp.base);
        else
                ipc_request_fail(req);
}

static void m_flush(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__FlushRequest *a = (const void *) args;
        struct consumer *c = req_consumer(req);

        if (!c || !c->session || session_state(c->session) != SESSION_STARTED) {
                ipc_request_fail(req);
                return;
        }
        if (session_flush(c->session, a->has_timeout_ms ? a->timeout_ms : 0, flush_reply, req) < 0)
                ipc_request_fail(req);
}

static void m_detach(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__DetachRequest *a = (const void *) args;
        Perfetto__Protos__DetachResponse resp = PERFETTO__PROTOS__DETACH_RESPONSE__INIT;
        struct traced_service *svc = userdata;
        struct consumer *c = req_consumer(req);

        if (!c || !c->session || !a->key || !a->key[0] || strlen(a->key) > DETACH_KEY_MAX) {
                ipc_request_fail(req);
                return;
        }
        if (sessions_detach_key_taken(svc, c->uid, a->key, c->session)) {
                ipc_request_fail(req);
                return;
        }
        struct session *s = c->session;
        if (session_detach(s, a->key) < 0) {
                ipc_request_fail(req);
                return;
        }
        c->session = NULL;
        log_info("Session %" PRIu64 " detached as \"%s\".", session_id(s), a->key);
        reply(req, &resp.base);
}

static void m_attach(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__AttachRequest *a = (const void *) args;
        Perfetto__Protos__AttachResponse resp = PERFETTO__PROTOS__ATTACH_RESPONSE__INIT;
        struct traced_service *svc = userdata;
        struct consumer *c = req_consumer(req);

        if (!c || c->session || !a->key) {
                ipc_request_fail(req);
                return;
        }
        struct session *s = sessions_attach(svc, c, c->uid, a->key);
        if (!s) {
                ipc_request_fail(req);
                return;
        }
        c->session = s;
        resp.trace_config = (Perfetto__Protos__TraceConfig *) session_config(s);
        log_info("Session %" PRIu64 " attached.", session_id(s));
        reply(req, &resp.base);
}

static void m_get_trace_stats(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__GetTraceStatsResponse resp = PERFETTO__PROTOS__GET_TRACE_STATS_RESPONSE__INIT;
        struct consumer *c = req_consumer(req);

        if (!c || !c->session) {
                ipc_request_fail(req);
                return;
        }
        Perfetto__Protos__TraceStats *st = session_build_trace_stats(c->session);
        if (!st) {
                ipc_request_fail(req);
                return;
        }
        resp.trace_stats = st;
        reply(req, &resp.base);
        session_free_trace_stats(st);
}

static void m_observe_events(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__ObserveEventsRequest *a = (const void *) args;
        struct consumer *c = req_consumer(req);
        uint32_t mask = 0;

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        for (size_t i = 0; i < a->n_events_to_observe; i++)
                mask |= (uint32_t) a->events_to_observe[i];
        if (c->observe_req) {
                ipc_request *old = c->observe_req;
                c->observe_req = NULL;
                Perfetto__Protos__ObserveEventsResponse end = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
                (void) ipc_request_reply(old, &end.base, false, -EBADF);
        }
        if (mask == 0) {
                Perfetto__Protos__ObserveEventsResponse end = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
                reply(req, &end.base);
                return;
        }
        c->observe_req = req;
        c->observe_mask = mask;
        if (c->session && session_all_started(c->session))
                session_notify_all_started(c->session);
}

static void m_query_capabilities(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        Perfetto__Protos__QueryCapabilitiesResponse resp = PERFETTO__PROTOS__QUERY_CAPABILITIES_RESPONSE__INIT;
        Perfetto__Protos__TracingServiceCapabilities caps = PERFETTO__PROTOS__TRACING_SERVICE_CAPABILITIES__INIT;
        Perfetto__Protos__ObservableEvents__Type events[] = {
                PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED,
                PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT,
        };

        caps.has_has_query_capabilities = true;
        caps.has_query_capabilities = true;
        caps.n_observable_events = ELEMENTSOF(events);
        caps.observable_events = events;
        caps.has_has_trace_config_output_path = true;
        caps.has_trace_config_output_path = true;
        caps.has_has_clone_session = true;
        caps.has_clone_session = true;
        resp.capabilities = &caps;
        reply(req, &resp.base);
}

/* The sessions' events, told to their consumers. */
static void on_enable_drop(ipc_request *req) {
        ipc_request_fail(req);
}

static void on_all_started(struct consumer *c) {
        if (!c->observe_req ||
            !(c->observe_mask & PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_ALL_DATA_SOURCES_STARTED))
                return;
        Perfetto__Protos__ObserveEventsResponse resp = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
        Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
        ev.has_all_data_sources_started = true;
        ev.all_data_sources_started = true;
        resp.events = &ev;
        (void) ipc_request_reply(c->observe_req, &resp.base, true, -EBADF);
}

static void on_clone_trigger_hit(struct consumer *c, uint64_t session_id, const struct received_trigger *t) {
        if (!c->observe_req ||
            !(c->observe_mask & PERFETTO__PROTOS__OBSERVABLE_EVENTS__TYPE__TYPE_CLONE_TRIGGER_HIT))
                return;
        Perfetto__Protos__ObserveEventsResponse resp = PERFETTO__PROTOS__OBSERVE_EVENTS_RESPONSE__INIT;
        Perfetto__Protos__ObservableEvents ev = PERFETTO__PROTOS__OBSERVABLE_EVENTS__INIT;
        Perfetto__Protos__ObservableEvents__CloneTriggerHit hit = PERFETTO__PROTOS__OBSERVABLE_EVENTS__CLONE_TRIGGER_HIT__INIT;
        hit.has_tracing_session_id = hit.has_producer_uid = hit.has_boot_time_ns = hit.has_trigger_delay_ms = true;
        hit.tracing_session_id = (int64_t) session_id;
        hit.trigger_name = t->trigger_name;
        hit.producer_name = t->producer_name;
        hit.producer_uid = (uint32_t) t->producer_uid;
        hit.boot_time_ns = t->boot_time_ns;
        hit.trigger_delay_ms = t->stop_delay_ms;
        ev.clone_trigger_hit = &hit;
        resp.events = &ev;
        (void) ipc_request_reply(c->observe_req, &resp.base, true, -EBADF);
}

static void on_session_freed(struct consumer *c, struct session *s) {
        if (c->session == s)
                c->session = NULL;
}

const struct session_consumer_ops consumer_port_session_ops = {
        .enable_done = enable_ended,
        .enable_drop = on_enable_drop,
        .all_started = on_all_started,
        .clone_trigger_hit = on_clone_trigger_hit,
        .session_freed = on_session_freed,
        .session_taken = on_session_freed,
};

/* The entry points. In the service's first moments (startup-hold.h) the
 * calls that start sessions, list the data sources or name a session of
 * another connection (which may be held) wait until the plugins
 * registered their data sources (HOLD), and any call behind a held one on
 * its connection waits too (its order stays). */
#define HOLD true
#define SERVE false
#define ENTRY(fn, hold)                                                                      \
        static void fn##_entry(ipc_request *req, const ProtobufCMessage *args, void *userdata) { \
                if (!startup_hold_call(userdata, req, fn, hold))                              \
                        fn(req, args, userdata);                                              \
        }
/* A config that names a data source of a plugin whose host is not
 * running (hosts=lazy) asks for the host, and waits, as at the start,
 * until it registered its data sources. */
static void m_enable_tracing_entry(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__EnableTracingRequest *a = (const void *) args;
        struct traced_service *svc = userdata;
        for (size_t i = 0; a->trace_config && !svc->stopping && i < a->trace_config->n_data_sources; i++) {
                const Perfetto__Protos__TraceConfig__DataSource *ds = a->trace_config->data_sources[i];
                const char *plugin = ds && ds->config ? parked_request(svc, ds->config->name) : NULL;
                if (plugin && startup_hold_demand(svc, plugin) < 0)
                        log_warning("Failed to hold a session until the host of plugin %s registered its data "
                                    "sources: they join it when they do.",
                                    plugin);
        }
        /* Held, it comes back here: a plugin parked meanwhile is asked
         * for then. */
        if (!startup_hold_call(userdata, req, m_enable_tracing_entry, HOLD))
                m_enable_tracing(req, args, userdata);
}
ENTRY(m_start_tracing, HOLD)
ENTRY(m_query_service_state, HOLD)
ENTRY(m_disable_tracing, SERVE)
ENTRY(m_read_buffers, SERVE)
ENTRY(m_free_buffers, SERVE)
ENTRY(m_flush, SERVE)
ENTRY(m_change_trace_config, SERVE)
ENTRY(m_detach, SERVE)
ENTRY(m_attach, HOLD)
ENTRY(m_get_trace_stats, SERVE)
ENTRY(m_observe_events, SERVE)
ENTRY(m_query_capabilities, SERVE)
ENTRY(m_save_trace_for_bugreport, HOLD)
ENTRY(m_clone_session, HOLD)

#define M(name, req_t, resp_t, fn) { name, &req_t##__descriptor, &resp_t##__descriptor, fn##_entry }
static const struct ipc_method_desc consumer_methods[] = {
        M("EnableTracing", perfetto__protos__enable_tracing_request, perfetto__protos__enable_tracing_response,
          m_enable_tracing),
        M("DisableTracing", perfetto__protos__disable_tracing_request, perfetto__protos__disable_tracing_response,
          m_disable_tracing),
        M("ReadBuffers", perfetto__protos__read_buffers_request, perfetto__protos__read_buffers_response,
          m_read_buffers),
        M("FreeBuffers", perfetto__protos__free_buffers_request, perfetto__protos__free_buffers_response,
          m_free_buffers),
        M("Flush", perfetto__protos__flush_request, perfetto__protos__flush_response, m_flush),
        M("StartTracing", perfetto__protos__start_tracing_request, perfetto__protos__start_tracing_response,
          m_start_tracing),
        M("ChangeTraceConfig", perfetto__protos__change_trace_config_request,
          perfetto__protos__change_trace_config_response, m_change_trace_config),
        M("Detach", perfetto__protos__detach_request, perfetto__protos__detach_response, m_detach),
        M("Attach", perfetto__protos__attach_request, perfetto__protos__attach_response, m_attach),
        M("GetTraceStats", perfetto__protos__get_trace_stats_request, perfetto__protos__get_trace_stats_response,
          m_get_trace_stats),
        M("ObserveEvents", perfetto__protos__observe_events_request, perfetto__protos__observe_events_response,
          m_observe_events),
        M("QueryServiceState", perfetto__protos__query_service_state_request,
          perfetto__protos__query_service_state_response, m_query_service_state),
        M("QueryCapabilities", perfetto__protos__query_capabilities_request,
          perfetto__protos__query_capabilities_response, m_query_capabilities),
        M("SaveTraceForBugreport", perfetto__protos__save_trace_for_bugreport_request,
          perfetto__protos__save_trace_for_bugreport_response, m_save_trace_for_bugreport),
        M("CloneSession", perfetto__protos__clone_session_request, perfetto__protos__clone_session_response,
          m_clone_session),
};

const struct ipc_service_desc consumer_port_desc = {
        .name = "ConsumerPort",
        .methods = consumer_methods,
        .n_methods = ELEMENTSOF(consumer_methods),
        .on_bind = on_bind,
        .on_disconnect = on_disconnect,
};
