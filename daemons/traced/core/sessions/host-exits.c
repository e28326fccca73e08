/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Data source instances lost with their plugin host, and plugins their
 * host refused (host-exits.h). */

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/service.h"
#include "core/sessions/host-exits.h"
#include "core/sessions/producer.h"
#include "core/sessions/session-internal.h"
#include "core/sessions/session-stats.h"

/* How the last hosts ended, for a connection that closes after the
 * supervisor's word came. */
#define RECENT_EXITS 16

struct lost_instance {
        struct lost_instance *next;
        struct session *session;
        pid_t pid;
        char *producer;
        char *data_source;
        bool before_start;
        uint64_t lost_usec;
};

struct host_exits {
        struct {
                pid_t pid;
                char plugin[64];
                char cause[320];
        } recent[RECENT_EXITS];
        size_t next_recent;
        struct lost_instance *pending;
        sd_event_source *timer;
        struct host_failed_plugin failed[HOST_EXITS_MAX_FAILED];
        size_t n_failed;
};

static struct host_exits *get(struct traced_service *svc) {
        if (!svc->host_exits)
                svc->host_exits = calloc(1, sizeof(struct host_exits));
        return svc->host_exits;
}

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* plugin: the plugin's file name without .so, when known. */
static void report(struct session *s, const char *producer, const char *data_source, bool before_start, pid_t pid,
                   const char *plugin, const char *cause) {
        char msg[480];
        bool named = plugin && plugin[0];
        snprintf(msg, sizeof(msg), "lost %s: its plugin host (%s%spid %d) %s",
                 before_start ? "before it started" : "while it ran", named ? plugin : "", named ? ".so, " : "",
                 (int) pid, cause);
        if (session_add_ds_loss(s, producer, data_source, msg))
                log_warning("Session %" PRIu64 ": data source \"%s\" of producer \"%s\" %s.", s->id, data_source,
                            strna(producer), msg);
}

static void lost_free(struct lost_instance *l) {
        free(l->producer);
        free(l->data_source);
        free(l);
}

/* Reports (cause non-NULL) or drops the pending losses that match. */
static void settle(struct host_exits *he, const struct session *s, pid_t pid, const char *plugin, const char *cause,
                   bool older_only) {
        uint64_t now = older_only ? now_usec() : 0;
        struct lost_instance **pp = &he->pending;
        while (*pp) {
                struct lost_instance *l = *pp;
                bool match = (!s || l->session == s) && (pid <= 0 || l->pid == pid) &&
                             (!older_only || now - l->lost_usec >= HOST_EXITS_WAIT_USEC);
                if (!match) {
                        pp = &l->next;
                        continue;
                }
                *pp = l->next;
                if (cause)
                        report(l->session, l->producer, l->data_source, l->before_start, l->pid, plugin, cause);
                lost_free(l);
        }
}

static const char *const CLOSED = "closed its connection";

static int on_wait_over(sd_event_source *src, uint64_t usec, void *userdata) {
        struct host_exits *he = userdata;
        settle(he, NULL, 0, NULL, CLOSED, true);
        if (he->pending) {
                (void) sd_event_source_set_time_relative(src, HOST_EXITS_WAIT_USEC);
                (void) sd_event_source_set_enabled(src, SD_EVENT_ONESHOT);
        }
        return 0;
}

static size_t recent_exit(const struct host_exits *he, pid_t pid) {
        for (size_t i = 0; i < RECENT_EXITS; i++)
                if (he->recent[i].pid == pid && pid > 0)
                        return i;
        return SIZE_MAX;
}

void host_exits_instance_lost(struct session *s, const struct producer *p, const struct ds_instance *i,
                              bool before_start) {
        struct traced_service *svc = s->svc;
        if (svc->stopping || !p->plugin_host)
                return;
        struct host_exits *he = get(svc);
        if (!he) {
                report(s, p->name, i->name, before_start, p->pid, NULL, CLOSED);
                return;
        }
        size_t k = recent_exit(he, p->pid);
        if (k != SIZE_MAX) {
                report(s, p->name, i->name, before_start, p->pid, he->recent[k].plugin, he->recent[k].cause);
                return;
        }
        struct lost_instance *l = calloc(1, sizeof(*l));
        if (l) {
                *l = (struct lost_instance) { .session = s, .pid = p->pid, .before_start = before_start,
                                              .lost_usec = now_usec() };
                l->producer = p->name ? strdup(p->name) : NULL;
                l->data_source = strdup(i->name);
        }
        if (!l || !l->data_source || (p->name && !l->producer)) {
                if (l)
                        lost_free(l);
                report(s, p->name, i->name, before_start, p->pid, NULL, CLOSED);
                return;
        }
        struct lost_instance **tail = &he->pending;
        while (*tail)
                tail = &(*tail)->next;
        *tail = l;
        if (!he->timer) {
                if (sd_event_add_time_relative(svc->event, &he->timer, CLOCK_MONOTONIC, HOST_EXITS_WAIT_USEC, 10000,
                                               on_wait_over, he) < 0)
                        he->timer = NULL;
        } else {
                int enabled = SD_EVENT_OFF;
                (void) sd_event_source_get_enabled(he->timer, &enabled);
                if (enabled == SD_EVENT_OFF) {
                        (void) sd_event_source_set_time_relative(he->timer, HOST_EXITS_WAIT_USEC);
                        (void) sd_event_source_set_enabled(he->timer, SD_EVENT_ONESHOT);
                }
        }
        if (!he->timer)
                settle(he, s, p->pid, NULL, CLOSED, false);
}

static void remember_failed(struct host_exits *he, const char *plugin, const char *reason) {
        size_t k = 0;
        while (k < he->n_failed && strcmp(he->failed[k].plugin, plugin) != 0)
                k++;
        if (k == he->n_failed) {
                if (he->n_failed == HOST_EXITS_MAX_FAILED)
                        return;
                he->failed[k].plugin = strdup(plugin);
                if (!he->failed[k].plugin)
                        return;
                he->n_failed++;
        }
        char *r = strdup(reason);
        if (r) {
                free(he->failed[k].reason);
                he->failed[k].reason = r;
        }
}

void sessions_host_exited(struct traced_service *svc, pid_t pid, const char *plugin, const char *cause, bool refused,
                          const char *reason) {
        struct host_exits *he = get(svc);
        if (!he)
                return;
        if (refused && plugin && plugin[0])
                remember_failed(he, plugin, reason && reason[0] ? reason : "its host refused it (see traced's log)");
        snprintf(he->recent[he->next_recent].cause, sizeof(he->recent[0].cause), "%s", cause);
        snprintf(he->recent[he->next_recent].plugin, sizeof(he->recent[0].plugin), "%s", plugin ? plugin : "");
        he->recent[he->next_recent].pid = pid;
        he->next_recent = (he->next_recent + 1) % RECENT_EXITS;
        /* pid 0: a plugin the supervisor refused without starting a host
         * (lost no data source instance). */
        if (pid > 0)
                settle(he, NULL, pid, plugin, cause, false);
}

void host_exits_settle_session(struct session *s) {
        struct host_exits *he = s->svc->host_exits;
        if (he)
                settle(he, s, 0, NULL, session_is_freeing(s) ? NULL : CLOSED, false);
}

const struct host_failed_plugin *host_exits_failed_plugins(const struct traced_service *svc, size_t *ret_n) {
        const struct host_exits *he = svc->host_exits;
        *ret_n = he ? he->n_failed : 0;
        return he ? he->failed : NULL;
}

void host_exits_free(struct traced_service *svc) {
        struct host_exits *he = svc->host_exits;
        if (!he)
                return;
        settle(he, NULL, 0, NULL, NULL, false);
        he->timer = sd_event_source_disable_unref(he->timer);
        for (size_t i = 0; i < he->n_failed; i++) {
                free(he->failed[i].plugin);
                free(he->failed[i].reason);
        }
        free(he);
        svc->host_exits = NULL;
}
