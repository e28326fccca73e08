/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Tracing sessions: creation, start, the timers of a running session, the
 * end of a session (finalize) and freeing it. Data source instances, flushes
 * and stopping, triggers, clones and the sequence map have files of their
 * own next to this one (session-internal.h); reading the buffers out is
 * session-read.c, writing them into a file session-output.c. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/output/output-fd.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-stats.h"
#include "core/sessions/session-read.h"
#include "core/sessions/session-rotate.h"
#include <sys/stat.h>
#include "core/buffers/trace-buffer.h"

static void random_uuid(uint64_t *msb, uint64_t *lsb) {
        uint64_t v[2] = {};
        if (getrandom(v, sizeof(v), GRND_NONBLOCK) != (ssize_t) sizeof(v)) {
                v[0] = session_now_usec(CLOCK_REALTIME) ^ ((uint64_t) getpid() << 32);
                v[1] = session_now_usec(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;
        }
        /* RFC 4122 version 4 layout. */
        v[0] = (v[0] & ~0xF000ull) | 0x4000ull;
        v[1] = (v[1] & 0x3FFFFFFFFFFFFFFFull) | 0x8000000000000000ull;
        *msb = v[0];
        *lsb = v[1];
}

static struct session_buffer *find_buffer(struct traced_service *svc, uint32_t buffer_id,
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

static bool producer_may_write(struct session *s, uint16_t producer_id) {
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->producer_id == producer_id)
                        return true;
        return false;
}

struct session *sessions_writable_buffer(struct traced_service *svc, uint32_t buffer_id, uint16_t producer_id,
                                         struct trace_buffer **ret_tb) {
        struct session *s = NULL;
        struct session_buffer *b = find_buffer(svc, buffer_id, &s);
        /* A producer may only write into buffers of sessions it serves. */
        if (!b || !producer_may_write(s, producer_id))
                return NULL;
        *ret_tb = b->tb;
        return s;
}

void sessions_count_chunk_without_buffer(struct traced_service *svc, uint16_t producer_id) {
        for (struct session *s = svc->sessions; s; s = s->next)
                if (producer_may_write(s, producer_id))
                        s->chunks_discarded_no_buffer++;
}

bool sessions_count_torn_chunk(struct traced_service *svc, uint32_t buffer_id, uint16_t producer_id) {
        struct trace_buffer *tb;
        struct session *s = sessions_writable_buffer(svc, buffer_id, producer_id, &tb);
        if (!s)
                return false;
        s->chunks_torn++;
        return true;
}

void session_count_discarded_patch(struct session *s) {
        s->patches_discarded++;
}

void sessions_settle(struct traced_service *svc) {
        for (struct session *s = svc->sessions; s; s = s->next)
                for (size_t i = 0; i < s->n_buffers; i++)
                        trace_buffer_settle(s->buffers[i].tb);
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
        if (s->consumer)
                svc->consumer_ops->session_freed(s->consumer, s);
        s->state = SESSION_DISABLED;
        s->freeing = true;
        host_exits_settle_session(s);
        /* Producers still running instances of this session stop them. */
        for (struct ds_instance *i = s->instances; i; i = i->next)
                if (i->producer && i->state != DS_STOPPED && i->state != DS_STOPPING)
                        (void) i->producer->ops->stop_data_source(i->producer, i);
        while (s->instances) {
                struct ds_instance *i = s->instances;
                s->instances = i->next;
                session_instance_free(i);
        }
        session_cancel_flushes(s);
        if (s->enable_req) {
                svc->consumer_ops->enable_drop(s->enable_req);
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
        sd_event_source_disable_unref(s->start_timer);
        session_output_free(s);
        safe_close(s->file_fd);
        session_rotate_free(s);
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
        free(s->resident_path);
        free(s->resident_config);
        free(s->disable_error);
        free(s->state_text);
        free(s->output_text);
        session_free_ds_errors(s);
        free(s->triggered_by);
        free(s);
        sessions_state_changed(svc);
}

uint64_t session_now_usec(clockid_t clk) {
        struct timespec ts;
        clock_gettime(clk, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

int session_add_timer_ms(struct session *s, sd_event_source **src, uint64_t ms, sd_event_time_handler_t cb) {
        *src = sd_event_source_disable_unref(*src);
        return sd_event_add_time_relative(s->svc->event, src, CLOCK_BOOTTIME, ms * 1000u, 1000, cb, s);
}

int session_config_error(char **ret_error, const char *msg) {
        if (ret_error)
                *ret_error = strdup(msg);
        return -EINVAL;
}

/* A new session in the service's list, with its own copy of cfg (and its
 * bytes, for the trace_config packet). */
int session_alloc(struct traced_service *svc, struct consumer *c, uid_t uid, enum session_state state,
                         const Perfetto__Protos__TraceConfig *cfg, struct session **ret) {
        struct session *s = calloc(1, sizeof(*s));
        if (!s)
                return -ENOMEM;
        *s = (struct session) {
                .svc = svc,
                .id = ++svc->last_session_id,
                .consumer = c,
                .uid = uid,
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

int session_create(struct traced_service *svc, struct consumer *c, uid_t uid,
                   const Perfetto__Protos__TraceConfig *cfg, int file_fd, struct session **ret, char **ret_error) {
        /* Taken: closed on every refusal. */
        _cleanup_close_ int out_fd = file_fd;
        uint64_t total = 0;
        unsigned per_uid = 0;
        int r;

        /* No buffers is valid (a session that only writes the service's
         * packets, or a placeholder for detach/attach); too many is not. */
        if (cfg->n_buffers > SERVICE_MAX_BUFFERS_PER_SESSION)
                return session_config_error(ret_error, "Too many buffers in the trace config");
        for (size_t i = 0; i < cfg->n_buffers; i++) {
                if (!cfg->buffers[i]->has_size_kb || cfg->buffers[i]->size_kb == 0)
                        return session_config_error(ret_error, "A buffer in the trace config has no size_kb");
                total += (uint64_t) cfg->buffers[i]->size_kb * 1024u;
        }
        if (total > SERVICE_MAX_TOTAL_BUFFER_BYTES)
                return session_config_error(ret_error, "The trace config's buffers exceed the service's limit of 1 GiB");
        if (cfg->unique_session_name && strlen(cfg->unique_session_name) > SERVICE_MAX_NAME_LENGTH)
                return session_config_error(ret_error, "unique_session_name is longer than 1024 bytes");
        if (cfg->has_duration_ms && cfg->duration_ms > SERVICE_MAX_DURATION_MS)
                return session_config_error(ret_error, "duration_ms exceeds the service's limit of 7 days");
        if (svc->n_sessions >= SERVICE_MAX_SESSIONS)
                return session_config_error(ret_error, "Too many concurrent tracing sessions");
        for (struct session *o = svc->sessions; o; o = o->next) {
                if (o->uid == uid)
                        per_uid++;
                if (cfg->unique_session_name && cfg->unique_session_name[0] && o->config && !o->retired &&
                    o->config->unique_session_name && strcmp(o->config->unique_session_name, cfg->unique_session_name) == 0)
                        return session_config_error(ret_error, "A session with the same unique_session_name is active");
        }
        if (per_uid >= SERVICE_MAX_SESSIONS_PER_UID && c && uid != 0)
                return session_config_error(ret_error, "Too many concurrent tracing sessions for this user");
        /* A file name, as upstream: perfetto --save-all-for-bugreport
         * writes to <bugreport dir>/<bugreport_filename>. */
        if (cfg->bugreport_filename &&
            strspn(cfg->bugreport_filename, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") !=
                    strlen(cfg->bugreport_filename))
                return session_config_error(ret_error, "bugreport_filename may only contain [a-zA-Z0-9-_.]");
        if (cfg->has_write_into_file && cfg->write_into_file && cfg->trigger_config &&
            cfg->trigger_config->has_trigger_mode &&
            cfg->trigger_config->trigger_mode == PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT)
                return session_config_error(ret_error, "Trigger mode CLONE_SNAPSHOT and write_into_file together are unsupported");
        if (cfg->has_write_into_file && cfg->write_into_file && file_fd < 0)
                return session_config_error(ret_error, "write_into_file is set but no output file descriptor was passed");
        if (cfg->trigger_config && cfg->trigger_config->has_trigger_mode &&
            cfg->trigger_config->trigger_mode != PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__UNSPECIFIED) {
                if (cfg->trigger_config->n_triggers == 0)
                        return session_config_error(ret_error, "trigger_config has a mode but no triggers");
                if (!cfg->trigger_config->has_trigger_timeout_ms || cfg->trigger_config->trigger_timeout_ms == 0)
                        return session_config_error(ret_error, "trigger_config needs trigger_timeout_ms");
        }

        struct session *s;
        int r2 = session_alloc(svc, c, uid, SESSION_CONFIGURED, cfg, &s);
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
                        return session_config_error(ret_error, "Failed to allocate a trace buffer");
                }
                s->buffers[i].id = ++svc->last_buffer_id;
                s->n_buffers++;
        }

        struct stat st;
        if (out_fd >= 0 && fstat(out_fd, &st) == 0 && S_ISDIR(st.st_mode)) {
                r = session_rotate_open(s, TAKE_FD(out_fd), ret_error);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
        } else if (s->config->traced_rotation && out_fd >= 0) {
                session_free(s);
                return session_config_error(ret_error, "traced_rotation needs a directory to write its files in "
                                                       "(tracectl record -o DIR/), not a file");
        } else if (out_fd >= 0) {
                r = session_output_open(s, TAKE_FD(out_fd), ret_error);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
                s->max_file_size = cfg->has_max_file_size_bytes ? cfg->max_file_size_bytes : 0;
        }

        session_setup_data_sources(s);

        log_info("Session %" PRIu64 " configured: %zu buffer(s), %zu data source instance(s)%s.", s->id,
                 s->n_buffers, session_count_instances(s), s->file_fd >= 0 ? ", writing into a file" : "");
        *ret = s;
        sessions_state_changed(svc);
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
                session_disable(s, output_error_message(r));
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

static int on_trigger_timeout(sd_event_source *src, uint64_t usec, void *userdata) {
        struct session *s = userdata;
        log_info("Session %" PRIu64 ": no trigger within trigger_timeout_ms, stopping.", s->id);
        s->free_if_detached = true;
        session_disable(s, NULL);
        return 0;
}

bool session_is_trigger_mode(const struct session *s, int mode) {
        const Perfetto__Protos__TraceConfig__TriggerConfig *t = s->config->trigger_config;
        return t && t->has_trigger_mode && (int) t->trigger_mode == mode;
}

/* Arms the periodic timers and starts every instance. duration_ms counts
 * from when they all run: a data source that takes a while to start
 * (loading BPF programs on a busy machine) acknowledges its start only
 * once it records, and the session then records for the whole duration
 * with it, not for what is left of it. One that has not started after
 * SERVICE_DATA_SOURCE_START_TIMEOUT_MS is named and the duration counts
 * from then, so nothing holds a session forever. Upstream's perfetto
 * command line bounds its wait by duration_ms plus a minute, more than
 * the timeout. */
int session_start_now(struct session *s) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        struct timespec rt;

        s->state = SESSION_STARTED;
        s->started_ns = session_now_usec(CLOCK_BOOTTIME) * 1000u;
        clock_gettime(CLOCK_REALTIME, &rt);
        s->start_realtime_ns = (int64_t) rt.tv_sec * 1000000000 + rt.tv_nsec;
        session_add_service_event(s, SERVICE_EVENT_TRACING_STARTED);
        for (struct ds_instance *i = s->instances; i; i = i->next)
                (void) session_start_instance(s, i);

        bool stop_or_clone = session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING) ||
                             session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT);
        s->duration_pending = cfg->has_duration_ms && cfg->duration_ms > 0 && !stop_or_clone;
        (void) session_add_timer_ms(s, &s->start_timer, SERVICE_DATA_SOURCE_START_TIMEOUT_MS, session_on_start_timeout);
        if (s->file_fd >= 0) {
                s->file_period_ms = cfg->has_file_write_period_ms && cfg->file_write_period_ms
                                            ? MAX(cfg->file_write_period_ms, SERVICE_MIN_FILE_WRITE_PERIOD_MS)
                                            : SERVICE_DEFAULT_FILE_WRITE_PERIOD_MS;
                /* The first write at once: the file starts with the
                 * session's own packets, and from then on committed chunks
                 * can go straight into it. */
                (void) session_add_timer_ms(s, &s->file_timer, 0, on_file_timer);
                session_rotate_started(s);
        }
        if (cfg->has_flush_period_ms && cfg->flush_period_ms > 0)
                (void) session_add_timer_ms(s, &s->flush_timer, cfg->flush_period_ms, on_flush_timer);
        if (cfg->incremental_state_config && cfg->incremental_state_config->has_clear_period_ms &&
            cfg->incremental_state_config->clear_period_ms > 0)
                (void) session_add_timer_ms(s, &s->clear_timer, cfg->incremental_state_config->clear_period_ms, session_on_clear_timer);
        /* STOP_TRACING and CLONE_SNAPSHOT sessions end at the trigger
         * timeout (a stop trigger may end them sooner). */
        if (stop_or_clone)
                (void) session_add_timer_ms(s, &s->trigger_timer, cfg->trigger_config->trigger_timeout_ms,
                                    on_trigger_timeout);
        log_info("Session %" PRIu64 " started.", s->id);
        session_check_all_started(s);
        sessions_state_changed(s->svc);
        return 0;
}

void session_start_complete(struct session *s) {
        s->start_timer = sd_event_source_disable_unref(s->start_timer);
        if (!s->duration_pending || s->state != SESSION_STARTED)
                return;
        s->duration_pending = false;
        (void) session_add_timer_ms(s, &s->duration_timer, s->config->duration_ms, on_duration);
}

int session_start(struct session *s) {
        if (s->state != SESSION_CONFIGURED)
                return -EBUSY;
        if (session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING)) {
                /* Wait for a start trigger, or give up at the timeout. */
                s->waiting_for_start_trigger = true;
                return session_add_timer_ms(s, &s->trigger_timer, s->config->trigger_config->trigger_timeout_ms,
                                    on_trigger_timeout);
        }
        return session_start_now(s);
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

void session_finalize(struct session *s) {
        if (s->state == SESSION_DISABLED)
                return;
        /* A cut under way ends first: what follows goes into the next
         * file, which is the last. */
        session_rotate_finish(s);
        if (s->rot)
                s->rot->period_timer = sd_event_source_disable_unref(s->rot->period_timer);
        /* Instances lost with a plugin host whose end is not told yet
         * go into this trace's last TraceStats as lost all the same. */
        host_exits_settle_session(s);
        s->state = SESSION_DISABLED;
        s->duration_timer = sd_event_source_disable_unref(s->duration_timer);
        s->flush_timer = sd_event_source_disable_unref(s->flush_timer);
        s->stop_timer = sd_event_source_disable_unref(s->stop_timer);
        s->clear_timer = sd_event_source_disable_unref(s->clear_timer);
        s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
        s->start_timer = sd_event_source_disable_unref(s->start_timer);
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
                (void) session_output_settle(s);
                if (s->out_error < 0 && !s->disable_error)
                        s->disable_error = strdup(output_error_message(s->out_error));
                session_output_free(s);
                session_rotate_close_last(s, s->out_error);
                s->file_fd = safe_close(s->file_fd);
        }
        log_info("Session %" PRIu64 " disabled%s%s.", s->id, s->disable_error ? ": " : "",
                 s->disable_error ? s->disable_error : "");

        if (s->enable_req) {
                ipc_request *req = s->enable_req;
                s->enable_req = NULL;
                s->svc->consumer_ops->enable_done(req, s->disable_error, s->end_reason);
        }
        session_notify_all_started(s);
        sessions_state_changed(s->svc);
        /* Nobody can read a detached session that ended by itself: free it
         * (its file, if any, is complete), so its key no longer attaches.
         * Deferred, as callers may be walking the session list. */
        if (s->free_if_detached && !s->consumer && !s->free_defer &&
            sd_event_add_defer(s->svc->event, &s->free_defer, on_free_detached, s) < 0)
                log_warning("Session %" PRIu64 ": could not schedule freeing the detached session.", s->id);
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

void session_notify_all_started(struct session *s) {
        if (!s->consumer || s->state == SESSION_DISABLED)
                return;
        s->svc->consumer_ops->all_started(s->consumer);
}

void sessions_state_changed(struct traced_service *svc) {
        if (svc->state_changed)
                svc->state_changed(svc);
}

size_t sessions_count_started(const struct traced_service *svc) {
        size_t n = 0;
        for (const struct session *s = svc->sessions; s; s = s->next)
                if (s->state == SESSION_STARTED)
                        n++;
        return n;
}
