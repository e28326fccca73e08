/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Plugins whose host starts when a session needs it: see parked.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "log/log.h"
#include "core/service.h"
#include "core/sessions/parked.h"
#include "core/sessions/session-internal.h"
#include "perfetto/common/data_source_descriptor.pb-c.h"

struct parked_set {
        struct parked_plugin *plugins;
        size_t n, cap;
        sd_event_source *idle_timer;
};

static void arm_idle(struct traced_service *svc);

static void data_sources_free(struct parked_plugin *p) {
        for (size_t i = 0; i < p->n_data_sources; i++) {
                free(p->data_sources[i].name);
                free(p->data_sources[i].descriptor);
        }
        free(p->data_sources);
        p->data_sources = NULL;
        p->n_data_sources = 0;
}

static struct parked_plugin *find_plugin(const struct traced_service *svc, const char *plugin) {
        struct parked_set *ps = svc->parked;
        for (size_t i = 0; ps && i < ps->n; i++)
                if (strcmp(ps->plugins[i].plugin, plugin) == 0)
                        return &ps->plugins[i];
        return NULL;
}

static int describe(struct parked_data_source *d) {
        Perfetto__Protos__DataSourceDescriptor desc = PERFETTO__PROTOS__DATA_SOURCE_DESCRIPTOR__INIT;
        desc.name = d->name;
        desc.has_will_notify_on_stop = desc.will_notify_on_stop = d->will_notify_on_stop;
        desc.has_handles_incremental_state_clear = desc.handles_incremental_state_clear =
                d->handles_incremental_state_clear;
        d->descriptor_size = perfetto__protos__data_source_descriptor__get_packed_size(&desc);
        d->descriptor = malloc(d->descriptor_size ? d->descriptor_size : 1);
        if (!d->descriptor)
                return -ENOMEM;
        perfetto__protos__data_source_descriptor__pack(&desc, d->descriptor);
        return 0;
}

/* One line into d: "NAME" and the descriptor's flags set, by name. */
static int parse_line(const char *line, size_t len, struct parked_data_source *d) {
        _cleanup_free_ char *copy = strndup(line, len);
        if (!copy)
                return -ENOMEM;
        char *save = NULL, *name = strtok_r(copy, " ", &save);
        if (!name)
                return -EBADMSG;
        *d = (struct parked_data_source) {};
        for (char *w = strtok_r(NULL, " ", &save); w; w = strtok_r(NULL, " ", &save)) {
                if (strcmp(w, "will_notify_on_stop") == 0)
                        d->will_notify_on_stop = true;
                else if (strcmp(w, "handles_incremental_state_clear") == 0)
                        d->handles_incremental_state_clear = true;
                else
                        return -EBADMSG;
        }
        d->name = strdup(name);
        if (!d->name)
                return -ENOMEM;
        int r = describe(d);
        if (r < 0)
                d->name = (free(d->name), NULL);
        return r;
}

int parked_set(struct traced_service *svc, const char *plugin, const char *text, uint64_t idle_usec) {
        struct parked_plugin next = { .idle_usec = idle_usec };
        size_t cap = 0;
        int r = 0;
        for (const char *line = text; *line && r >= 0;) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                if (len > 0) {
                        if (GREEDY_REALLOC(next.data_sources, cap, next.n_data_sources + 1) < 0)
                                r = -ENOMEM;
                        else {
                                r = parse_line(line, len, &next.data_sources[next.n_data_sources]);
                                if (r >= 0)
                                        next.n_data_sources++;
                        }
                }
                line += len + (nl ? 1 : 0);
        }
        if (r < 0) {
                data_sources_free(&next);
                return r;
        }
        if (!svc->parked && !(svc->parked = calloc(1, sizeof(struct parked_set)))) {
                data_sources_free(&next);
                return -ENOMEM;
        }
        struct parked_plugin *p = find_plugin(svc, plugin);
        if (!p) {
                struct parked_set *ps = svc->parked;
                next.plugin = strdup(plugin);
                if (!next.plugin || GREEDY_REALLOC(ps->plugins, ps->cap, ps->n + 1) < 0) {
                        free(next.plugin);
                        data_sources_free(&next);
                        return -ENOMEM;
                }
                ps->plugins[ps->n++] = next;
                return 0;
        }
        data_sources_free(p);
        p->data_sources = next.data_sources;
        p->n_data_sources = next.n_data_sources;
        p->idle_usec = idle_usec;
        return 0;
}

void parked_host_adopted(struct traced_service *svc, const char *plugin, pid_t pid) {
        struct parked_plugin *p = find_plugin(svc, plugin);
        if (!p)
                return;
        p->host_pid = pid;
        p->requested = false;
        p->retiring = false;
        p->idle_since = 0;
        arm_idle(svc);
}

void parked_host_exited(struct traced_service *svc, const char *plugin, pid_t pid) {
        struct parked_plugin *p = find_plugin(svc, plugin);
        if (!p)
                return;
        if (pid == 0) {
                /* The supervisor would not start it. */
                p->requested = false;
                return;
        }
        if (p->host_pid != pid)
                return;
        /* Asked for again while it retired: the supervisor starts the
         * next one, requested stays. */
        p->host_pid = 0;
        p->retiring = false;
        p->idle_since = 0;
}

bool parked_host_retiring(const struct traced_service *svc, pid_t pid) {
        struct parked_set *ps = svc->parked;
        for (size_t i = 0; ps && pid > 0 && i < ps->n; i++)
                if (ps->plugins[i].host_pid == pid)
                        return ps->plugins[i].retiring;
        return false;
}

/* Whether a session that runs has an instance on host pid. */
static bool host_serves(const struct traced_service *svc, pid_t pid) {
        for (struct session *s = svc->sessions; s; s = s->next) {
                if (s->state == SESSION_DISABLED)
                        continue;
                for (struct ds_instance *i = s->instances; i; i = i->next)
                        if (i->producer && i->producer->plugin_host && i->producer->pid == pid &&
                            i->state != DS_STOPPED)
                                return true;
        }
        return false;
}

static int on_idle_timer(sd_event_source *src, uint64_t usec, void *userdata) {
        struct traced_service *svc = userdata;
        struct parked_set *ps = svc->parked;
        uint64_t now = usec;
        (void) sd_event_now(svc->event, CLOCK_MONOTONIC, &now);
        for (size_t i = 0; i < ps->n; i++) {
                struct parked_plugin *p = &ps->plugins[i];
                if (p->host_pid == 0 || p->retiring || p->idle_usec == 0 || svc->stopping)
                        continue;
                if (host_serves(svc, p->host_pid)) {
                        p->idle_since = 0;
                        continue;
                }
                if (p->idle_since == 0) {
                        p->idle_since = now;
                        continue;
                }
                if (now - p->idle_since < p->idle_usec || !svc->stop_plugin_host)
                        continue;
                int r = svc->stop_plugin_host(svc, p->plugin, p->host_pid);
                if (r < 0)
                        log_warning_errno(r, "Failed to ask for the stop of idle plugin host %d (%s): %m",
                                          (int) p->host_pid, p->plugin);
                else {
                        log_info("Plugin host %d (%s) served no session for %.0f s: stopping it; it starts again "
                                 "when a session names one of its data sources.",
                                 (int) p->host_pid, p->plugin, (double) (now - p->idle_since) / 1e6);
                        p->retiring = true;
                }
        }
        arm_idle(svc);
        return 0;
}

/* Looks at the hosts started for sessions every idle_usec / 2 (the
 * shortest), while one runs. */
static void arm_idle(struct traced_service *svc) {
        struct parked_set *ps = svc->parked;
        uint64_t period = 0;
        for (size_t i = 0; ps && i < ps->n; i++) {
                const struct parked_plugin *p = &ps->plugins[i];
                if (p->host_pid != 0 && !p->retiring && p->idle_usec > 0 && (period == 0 || p->idle_usec / 2 < period))
                        period = p->idle_usec / 2;
        }
        if (!ps)
                return;
        if (period == 0) {
                if (ps->idle_timer)
                        (void) sd_event_source_set_enabled(ps->idle_timer, SD_EVENT_OFF);
                return;
        }
        period = MAX(period, (uint64_t) 100000u);
        int r;
        if (!ps->idle_timer)
                r = sd_event_add_time_relative(svc->event, &ps->idle_timer, CLOCK_MONOTONIC, period, period / 10,
                                               on_idle_timer, svc);
        else {
                uint64_t due = 0;
                /* Armed already: it keeps its time. */
                int enabled = SD_EVENT_OFF;
                (void) sd_event_source_get_enabled(ps->idle_timer, &enabled);
                if (enabled != SD_EVENT_OFF && sd_event_source_get_time(ps->idle_timer, &due) >= 0 && due > 0)
                        return;
                r = sd_event_source_set_time_relative(ps->idle_timer, period);
                if (r >= 0)
                        r = sd_event_source_set_enabled(ps->idle_timer, SD_EVENT_ONESHOT);
        }
        if (r < 0)
                log_warning_errno(r, "Failed to watch the plugin hosts started for sessions: they are not stopped "
                                     "when idle: %m");
}

const struct parked_plugin *parked_find(const struct traced_service *svc, const char *ds_name) {
        struct parked_set *ps = svc->parked;
        for (size_t i = 0; ps && ds_name && i < ps->n; i++) {
                const struct parked_plugin *p = &ps->plugins[i];
                if (p->host_pid != 0 && !p->retiring)
                        continue;
                for (size_t k = 0; k < p->n_data_sources; k++)
                        if (strcmp(p->data_sources[k].name, ds_name) == 0)
                                return p;
        }
        return NULL;
}

const char *parked_request(struct traced_service *svc, const char *ds_name) {
        struct parked_plugin *p = (struct parked_plugin *) parked_find(svc, ds_name);
        if (!p)
                return NULL;
        if (!p->requested && svc->start_plugin_host) {
                int r = svc->start_plugin_host(svc, p->plugin);
                if (r < 0) {
                        log_warning_errno(r, "Failed to ask for the host of plugin %s: %m", p->plugin);
                        return NULL;
                }
                log_info("Asking for the host of plugin %s: a session names its data source %s.", p->plugin,
                         ds_name);
                p->requested = true;
        }
        return p->requested ? p->plugin : NULL;
}

const struct parked_plugin *parked_list(const struct traced_service *svc, size_t *ret_n) {
        struct parked_set *ps = svc->parked;
        *ret_n = ps ? ps->n : 0;
        return ps ? ps->plugins : NULL;
}

void parked_free(struct traced_service *svc) {
        struct parked_set *ps = svc->parked;
        if (!ps)
                return;
        for (size_t i = 0; i < ps->n; i++) {
                data_sources_free(&ps->plugins[i]);
                free(ps->plugins[i].plugin);
        }
        free(ps->plugins);
        sd_event_source_disable_unref(ps->idle_timer);
        free(ps);
        svc->parked = NULL;
}
