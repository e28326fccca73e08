/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Triggers: which sessions a producer's ActivateTriggers matches, their
 * rate limits, and what each trigger mode does (start, stop after a
 * delay, or tell the consumer to clone). */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <sys/random.h>

#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/regex-limits.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"

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
        if (s->consumer)
                s->svc->consumer_ops->clone_trigger_hit(s->consumer, s->id, t);
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

/* Drops history older than a day; returns how often a name's hash matched in
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
                v = session_now_usec(CLOCK_MONOTONIC) * 0x9E3779B97F4A7C15ull;
        return (double) (v >> 11) / (double) (1ull << 53); /* [0, 1) */
}

void session_on_triggers(struct traced_service *svc, struct producer *p, char **names, size_t n) {
        struct timespec ts;
        clock_gettime(CLOCK_BOOTTIME, &ts);
        uint64_t now_ns = (uint64_t) ts.tv_sec * 1000000000u + (uint64_t) ts.tv_nsec;

        for (size_t k = 0; k < n; k++) {
                if (!names[k])
                        continue;
                uint64_t hash = fnv1a64_str(names[k]);
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
                        if (session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__START_TRACING)) {
                                if (s->state != SESSION_CONFIGURED || !s->waiting_for_start_trigger)
                                        continue;
                                s->waiting_for_start_trigger = false;
                                s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
                                /* The trace lasts the trigger's stop_delay_ms from now. */
                                session_set_duration(s, rt.stop_delay_ms);
                                (void) session_start_now(s);
                        } else if (session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__STOP_TRACING)) {
                                if (!first || s->state != SESSION_STARTED || s->stop_trigger_hit)
                                        continue;
                                s->stop_trigger_hit = true;
                                s->trigger_timer = sd_event_source_disable_unref(s->trigger_timer);
                                (void) session_add_timer_ms(s, &s->trigger_timer, rt.stop_delay_ms, on_stop_delay);
                        } else if (session_is_trigger_mode(s, PERFETTO__PROTOS__TRACE_CONFIG__TRIGGER_CONFIG__TRIGGER_MODE__CLONE_SNAPSHOT))
                                schedule_clone_hit(s, &rt);
                }
                if (matched)
                        trigger_history_add(svc, now_ns, hash);
        }
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
