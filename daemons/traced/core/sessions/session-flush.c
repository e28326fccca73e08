/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Flushing a session's data sources and stopping them: the flush requests
 * and their acks and timeouts, then DisableTracing's flush, stop and
 * finalize. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "basic/pb-buf.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-stats.h"

/* Frees f, unlinked and its timers off, and tells its waiter (a
 * consumer's Flush, a stop) how it ended. */
static void flush_finish(struct session *s, struct pending_flush *f, bool success) {
        flush_done_fn done = f->done;
        void *ud = f->userdata;
        free(f->producers);
        free(f->producers_all);
        free(f);
        if (done)
                done(s, success, ud);
}

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
                struct producer *p = sessions_find_producer(s->svc, f->producers_all[i]);
                if (p)
                        p->ops->scrape(p, true);
        }
        if (success) {
                s->flushes_succeeded++;
                session_add_service_event(s, SERVICE_EVENT_ALL_DATA_SOURCES_FLUSHED);
        } else
                s->flushes_failed++;
        flush_finish(s, f, success);
}

/* Names the producers a flush still waits for: in the log, and in the
 * trace as TracingServiceEvent.last_flush_slow_data_sources. */
static void report_slow_flush(struct pending_flush *f) {
        struct session *s = f->session;
        _cleanup_(pb_buf_done) struct pb_buf b = {};
        TracingServiceEvent_DataSources list;
        size_t n = 0;

        TracingServiceEvent_DataSources_init(&list, pb_buf_stream(&b));
        for (size_t k = 0; k < f->n_producers; k++) {
                struct producer *p = sessions_find_producer(s->svc, f->producers[k]);
                log_notice("Session %" PRIu64 ": flush %" PRIu64 " timed out waiting for producer %u \"%s\" (pid %d).",
                           s->id, f->request_id, f->producers[k], p ? strna(p->name) : "(gone)",
                           p ? (int) p->pid : 0);
                n += session_list_data_sources(s, DS_STARTED, f->producers[k], &list);
        }
        if (n > 0 && traced_pb_msg_finish(&list.msg) >= 0)
                session_add_service_event_msg(s, SERVICE_EVENT_LAST_FLUSH_SLOW_DATA_SOURCES, pb_buf_data(&b),
                                              pb_buf_len(&b));
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

static int flush_start(struct session *s, uint32_t timeout_ms, bool clearing_only, flush_done_fn done,
                       void *userdata) {
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
                /* An instance still starting has written nothing to
                         * flush, and its producer may be busy starting it
                         * (loading BPF programs): a flush would only wait
                         * for it. */
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer == p && i->state == DS_STARTED && n < ELEMENTSOF(ids) &&
                            (!clearing_only || session_instance_clears(i)))
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
        if (svc->stopping)
                timeout_ms = MIN(timeout_ms, SERVICE_STOP_FLUSH_TIMEOUT_MS);
        r = sd_event_add_time_relative(svc->event, &f->timeout, CLOCK_MONOTONIC, (uint64_t) timeout_ms * 1000u, 1000,
                                       on_flush_timeout, f);
        return r < 0 ? r : 0;
}

int session_flush(struct session *s, uint32_t timeout_ms, flush_done_fn done, void *userdata) {
        return flush_start(s, timeout_ms, false, done, userdata);
}

int session_flush_clearing(struct session *s, flush_done_fn done, void *userdata) {
        bool any = false;
        for (struct ds_instance *i = s->instances; i && !any; i = i->next)
                any = session_instance_clears(i);
        return any ? flush_start(s, 0, true, done, userdata) : -ENOENT;
}

void session_cancel_flushes(struct session *s) {
        while (s->flushes) {
                struct pending_flush *f = s->flushes;
                s->flushes = f->next;
                sd_event_source_disable_unref(f->timeout);
                sd_event_source_disable_unref(f->defer);
                flush_finish(s, f, false); /* its waiter learns that it failed */
        }
}

void session_flush_ack(struct pending_flush *f, uint16_t producer_id) {
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
                                session_flush_ack(f, producer_id);
                        f = next;
                }
        }
}

void session_check_all_stopped(struct session *s) {
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
        session_check_all_stopped(s);
        return 0;
}

void session_stop_all_instances(struct session *s) {
        uint32_t timeout = s->config->has_data_source_stop_timeout_ms && s->config->data_source_stop_timeout_ms
                                   ? s->config->data_source_stop_timeout_ms
                                   : SERVICE_DEFAULT_STOP_TIMEOUT_MS;
        bool waiting = false;

        if (s->svc->stopping)
                timeout = MIN(timeout, SERVICE_STOP_FLUSH_TIMEOUT_MS);

        for (struct ds_instance *i = s->instances; i; i = i->next) {
                if (!i->producer || i->state == DS_STOPPED || i->state == DS_CONFIGURED) {
                        if (i->producer && i->state == DS_CONFIGURED)
                                (void) i->producer->ops->stop_data_source(i->producer, i);
                        i->state = DS_STOPPED;
                        continue;
                }
                (void) i->producer->ops->stop_data_source(i->producer, i);
                /* One that never acknowledged its start is told to stop,
                 * not waited for: what it would still write has no
                 * session to go to, and its producer may be busy
                 * starting it for a while yet. Its consumer hears that
                 * the trace lacks it. */
                if (i->state == DS_STARTING) {
                        log_notice("Session %" PRIu64 ": data source \"%s\" of producer %u \"%s\" had not started "
                                   "when the session stopped.",
                                   s->id, i->name, i->producer_id, strna(i->producer->name));
                        (void) session_add_ds_error(s, i->producer->name, i->name, NULL,
                                                    "the session stopped before it had started: nothing of it "
                                                    "was recorded");
                }
                if (i->will_notify_on_stop && i->state != DS_STARTING) {
                        i->state = DS_STOPPING;
                        waiting = true;
                } else
                        i->state = DS_STOPPED;
        }
        s->stop_sent = true;
        if (waiting)
                (void) session_add_timer_ms(s, &s->stop_timer, timeout, on_stop_timeout);
        session_check_all_stopped(s);
}

static void disable_flush_done(struct session *s, bool success, void *userdata) {
        if (s->state == SESSION_DISABLING)
                session_stop_all_instances(s);
}

void session_force_finalize(struct session *s, const char *error) {
        if (error && !s->disable_error)
                s->disable_error = strdup(error);
        session_stop_all_instances(s);
        session_finalize(s);
}

void session_disable(struct session *s, const char *error) {
        if (error && !s->disable_error)
                s->disable_error = strdup(error);
        switch (s->state) {
        case SESSION_CONFIGURED:
                session_stop_all_instances(s);
                session_finalize(s);
                break;
        case SESSION_STARTED:
                s->state = SESSION_DISABLING;
                if (session_flush(s, 0, disable_flush_done, NULL) < 0)
                        session_stop_all_instances(s);
                break;
        case SESSION_DISABLING:
        case SESSION_DISABLED:
                break;
        }
}
