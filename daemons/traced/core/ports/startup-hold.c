/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The hold of the service's first moments: see startup-hold.h. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/startup-hold.h"
#include "core/service.h"

enum host_state {
        HOST_PENDING,
        HOST_REGISTERED,
        HOST_GONE,
};

struct expected_host {
        uint64_t conn_id;
        pid_t pid;
        char plugin[64];
        enum host_state state;
};

struct held_call {
        ipc_request *req;
        ipc_method_handler fn;
        const ipc_host_conn *conn; /* of either port: ids are per port */
};

struct startup_hold {
        struct traced_service *svc;
        bool holding;
        bool launched; /* the supervisor handed over every host of the start */
        uint64_t started_usec, timeout_usec; /* CLOCK_MONOTONIC */
        sd_event_source *timer, *release;
        struct expected_host *hosts;
        size_t n_hosts, cap_hosts;
        struct held_call *calls;
        size_t n_calls, cap_calls;
        size_t n_held_total; /* ever, for the log */
        startup_hold_done_fn done;
        void *userdata;
        /* Plugins whose host a session asked for (startup_hold_demand),
         * not handed over yet. */
        char (*wanted)[64];
        size_t n_wanted, cap_wanted;
        bool demand; /* this hold is for them, not the start's */
};

static double seconds_since_start(const struct startup_hold *h) {
        uint64_t now = h->started_usec;
        (void) sd_event_now(h->svc->event, CLOCK_MONOTONIC, &now);
        return (double) (now - h->started_usec) / 1e6;
}

/* "ftrace, perf" of the hosts in state st (the first few). */
static size_t host_names(const struct startup_hold *h, enum host_state st, char *buf, size_t size) {
        size_t n = 0, len = 0;
        buf[0] = '\0';
        for (size_t i = 0; i < h->n_hosts; i++) {
                if (h->hosts[i].state != st)
                        continue;
                int k = snprintf(buf + len, size - len, "%s%s", n ? ", " : "", h->hosts[i].plugin);
                if (k > 0 && (size_t) k < size - len)
                        len += (size_t) k;
                n++;
        }
        return n;
}

/* Serves what was held, in the order it came, and tells the service. */
static void release(struct startup_hold *h) {
        if (!h->holding)
                return;
        h->holding = false;
        h->timer = sd_event_source_disable_unref(h->timer);
        h->release = sd_event_source_disable_unref(h->release);
        struct held_call *calls = TAKE_PTR(h->calls);
        size_t n = h->n_calls;
        if (n)
                log_debug("Serving %zu call(s) held until now.", n);
        h->n_calls = h->cap_calls = 0;
        h->n_wanted = 0;
        h->demand = false;
        /* A call served now may put the hold on again (a session that
         * names a parked plugin's data source). */
        for (size_t i = 0; i < n; i++) {
                /* Behind one held again, a call of its connection waits
                 * again (its order stays). */
                bool behind = false;
                for (size_t k = 0; h->holding && k < h->n_calls && !behind; k++)
                        behind = h->calls[k].conn == calls[i].conn;
                if (behind && GREEDY_REALLOC(h->calls, h->cap_calls, h->n_calls + 1) >= 0) {
                        h->calls[h->n_calls++] = calls[i];
                        continue;
                }
                ipc_request_redispatch(calls[i].req, calls[i].fn, h->svc);
        }
        free(calls);
        /* The start's end, told once. */
        startup_hold_done_fn done = h->done;
        h->done = NULL;
        if (done)
                done(h->svc, h->userdata);
}

static int on_release(sd_event_source *s, void *userdata) {
        release(userdata);
        return 0;
}

/* Every host of the start registered or went: the hold ends, from the
 * loop (not inside the producer's call that ended it). */
static void check_done(struct startup_hold *h) {
        if (!h->holding || !h->launched || h->release || h->n_wanted > 0)
                return;
        for (size_t i = 0; i < h->n_hosts; i++)
                if (h->hosts[i].state == HOST_PENDING)
                        return;
        char gone[512];
        size_t n_gone = host_names(h, HOST_GONE, gone, sizeof(gone));
        size_t n_ok = h->n_hosts - n_gone;
        if (h->demand)
                log_info("Plugin host(s) a session asked for ready after %.1f s%s%s.", seconds_since_start(h),
                         n_gone ? "; gone before they registered: " : "", n_gone ? gone : "");
        else if (n_gone)
                log_info("Plugins ready %.1f s after the start: %zu registered their data sources, %zu did not "
                         "(%s: gone before).",
                         seconds_since_start(h), n_ok, n_gone, gone);
        else
                log_info("Plugins ready %.1f s after the start: %zu registered their data sources.",
                         seconds_since_start(h), n_ok);
        if (sd_event_add_defer(h->svc->event, &h->release, on_release, h) < 0)
                release(h);
}

static int on_timeout(sd_event_source *s, uint64_t usec, void *userdata) {
        struct startup_hold *h = userdata;
        char pending[512];
        size_t n = host_names(h, HOST_PENDING, pending, sizeof(pending));
        if (h->demand)
                log_warning("Plugin host(s) %s%s%s did not register their data sources within %.0f s of a "
                            "session's request; serving the session without them.",
                            n ? pending : "", n && h->n_wanted ? ", " : "", h->n_wanted ? h->wanted[0] : "",
                            (double) h->timeout_usec / 1e6);
        else if (!h->launched)
                log_warning("The supervisor did not hand over the plugin hosts within %.0f s of the start; serving "
                            "sessions without waiting for them (start_timeout_sec= in traced.conf).",
                            (double) h->timeout_usec / 1e6);
        else
                log_warning("Plugin(s) %s did not register their data sources within %.0f s of the start; serving "
                            "sessions without them (start_timeout_sec= in traced.conf).",
                            n ? pending : "?", (double) h->timeout_usec / 1e6);
        release(h);
        return 0;
}

int startup_hold_begin(struct traced_service *svc, uint64_t timeout_usec, startup_hold_done_fn done,
                       void *userdata) {
        if (svc->startup_hold)
                return -EBUSY;
        if (timeout_usec == 0) {
                if (done)
                        done(svc, userdata);
                return 0;
        }
        struct startup_hold *h = calloc(1, sizeof(*h));
        if (!h)
                return -ENOMEM;
        *h = (struct startup_hold) {
                .svc = svc,
                .holding = true,
                .timeout_usec = timeout_usec,
                .done = done,
                .userdata = userdata,
        };
        int r = sd_event_now(svc->event, CLOCK_MONOTONIC, &h->started_usec);
        if (r >= 0)
                r = sd_event_add_time_relative(svc->event, &h->timer, CLOCK_MONOTONIC, timeout_usec, 10000, on_timeout,
                                               h);
        if (r < 0) {
                free(h);
                if (done)
                        done(svc, userdata);
                return r;
        }
        svc->startup_hold = h;
        log_debug("Holding sessions until the plugins registered their data sources (at most %.0f s).",
                  (double) timeout_usec / 1e6);
        return 0;
}

/* Takes plugin off the wanted list: true if it was on it. */
static bool unwant(struct startup_hold *h, const char *plugin) {
        for (size_t i = 0; plugin && i < h->n_wanted; i++)
                if (strcmp(h->wanted[i], plugin) == 0) {
                        memmove(&h->wanted[i], &h->wanted[i + 1], (h->n_wanted - i - 1) * sizeof(h->wanted[0]));
                        h->n_wanted--;
                        return true;
                }
        return false;
}

int startup_hold_demand(struct traced_service *svc, const char *plugin) {
        struct startup_hold *h = svc->startup_hold;
        if (!h) {
                /* No hold at the start (start_timeout_sec=0): one now,
                 * with the default bound. */
                h = calloc(1, sizeof(*h));
                if (!h)
                        return -ENOMEM;
                *h = (struct startup_hold) { .svc = svc, .launched = true,
                                             .timeout_usec = STARTUP_HOLD_DEMAND_USEC };
                svc->startup_hold = h;
        }
        for (size_t i = 0; i < h->n_wanted; i++)
                if (strcmp(h->wanted[i], plugin) == 0)
                        return 0;
        if (GREEDY_REALLOC(h->wanted, h->cap_wanted, h->n_wanted + 1) < 0)
                return -ENOMEM;
        snprintf(h->wanted[h->n_wanted++], sizeof(h->wanted[0]), "%s", plugin);
        if (h->holding)
                return 0;
        h->holding = true;
        h->demand = true;
        h->release = sd_event_source_disable_unref(h->release);
        int r = sd_event_now(svc->event, CLOCK_MONOTONIC, &h->started_usec);
        if (r >= 0)
                r = sd_event_add_time_relative(svc->event, &h->timer, CLOCK_MONOTONIC, h->timeout_usec, 10000,
                                               on_timeout, h);
        if (r < 0) {
                h->holding = false;
                h->n_wanted = 0;
                return r;
        }
        return 0;
}

void startup_hold_expect(struct traced_service *svc, uint64_t conn_id, pid_t pid, const char *plugin) {
        struct startup_hold *h = svc->startup_hold;
        if (!h || !h->holding)
                return;
        bool wanted = unwant(h, plugin);
        if (h->launched && !wanted)
                return; /* a restart: not waited for */
        if (GREEDY_REALLOC(h->hosts, h->cap_hosts, h->n_hosts + 1) < 0) {
                log_oom();
                return; /* not waited for: the bound still holds */
        }
        struct expected_host *e = &h->hosts[h->n_hosts++];
        *e = (struct expected_host) { .conn_id = conn_id, .pid = pid, .state = HOST_PENDING };
        snprintf(e->plugin, sizeof(e->plugin), "%s", plugin ? plugin : "?");
}

void startup_hold_all_launched(struct traced_service *svc) {
        struct startup_hold *h = svc->startup_hold;
        if (!h || h->launched)
                return;
        h->launched = true;
        log_debug("The supervisor started %zu plugin host(s).", h->n_hosts);
        check_done(h);
}

static void host_done(struct startup_hold *h, struct expected_host *e, enum host_state st) {
        if (e->state != HOST_PENDING)
                return;
        e->state = st;
        if (st == HOST_REGISTERED)
                log_debug("Plugin %s registered its data sources %.1f s after the start.", e->plugin,
                          seconds_since_start(h));
        else
                log_info("Plugin %s (host %d) went away before it registered its data sources: not waiting for it.",
                         e->plugin, (int) e->pid);
        check_done(h);
}

void startup_hold_registered(struct traced_service *svc, uint64_t conn_id) {
        struct startup_hold *h = svc->startup_hold;
        for (size_t i = 0; h && h->holding && i < h->n_hosts; i++)
                if (h->hosts[i].conn_id == conn_id)
                        host_done(h, &h->hosts[i], HOST_REGISTERED);
}

void startup_hold_conn_gone(struct traced_service *svc, uint64_t conn_id) {
        struct startup_hold *h = svc->startup_hold;
        for (size_t i = 0; h && h->holding && i < h->n_hosts; i++)
                if (h->hosts[i].conn_id == conn_id)
                        host_done(h, &h->hosts[i], HOST_GONE);
}

void startup_hold_host_exited(struct traced_service *svc, pid_t pid, const char *plugin) {
        struct startup_hold *h = svc->startup_hold;
        /* One asked for that will not come (refused, or an earlier host
         * of it that ended). */
        if (h && h->holding && unwant(h, plugin))
                check_done(h);
        for (size_t i = 0; h && h->holding && i < h->n_hosts; i++)
                if (h->hosts[i].pid == pid)
                        host_done(h, &h->hosts[i], HOST_GONE);
}

bool startup_hold_when_done(struct traced_service *svc, startup_hold_done_fn done, void *userdata) {
        struct startup_hold *h = svc->startup_hold;
        if (!h || !h->holding)
                return false;
        if (!h->done) {
                h->done = done;
                h->userdata = userdata;
        }
        return true;
}

bool startup_hold_active(const struct traced_service *svc) {
        return svc->startup_hold && svc->startup_hold->holding;
}

void startup_hold_end(struct traced_service *svc) {
        struct startup_hold *h = svc->startup_hold;
        if (h && h->holding) {
                log_info("Not waiting for the plugins any more (%.1f s after the start).", seconds_since_start(h));
                release(h);
        }
}

void startup_hold_free(struct traced_service *svc) {
        struct startup_hold *h = svc->startup_hold;
        if (!h)
                return;
        svc->startup_hold = NULL;
        for (size_t i = 0; i < h->n_calls; i++) {
                (void) ipc_request_fail(h->calls[i].req);
                ipc_request_unref(h->calls[i].req);
        }
        sd_event_source_disable_unref(h->timer);
        sd_event_source_disable_unref(h->release);
        free(h->calls);
        free(h->hosts);
        free(h->wanted);
        free(h);
}

bool startup_hold_call(struct traced_service *svc, ipc_request *req, ipc_method_handler fn, bool always) {
        struct startup_hold *h = svc->startup_hold;
        if (!h || !h->holding)
                return false;
        ipc_host_conn *conn = ipc_request_conn(req);
        if (!conn)
                return false;
        bool behind = false;
        for (size_t i = 0; i < h->n_calls && !behind; i++)
                behind = h->calls[i].conn == conn;
        if (!always && !behind)
                return false;
        /* Short of memory, the call is served now rather than lost. */
        if (GREEDY_REALLOC(h->calls, h->cap_calls, h->n_calls + 1) < 0 || ipc_request_postpone(req) < 0)
                return false;
        h->calls[h->n_calls++] = (struct held_call) { .req = req, .fn = fn, .conn = conn };
        if (h->n_held_total++ == 0)
                log_info("Holding sessions until the plugins registered their data sources (at most %.0f s).",
                         (double) h->timeout_usec / 1e6);
        return true;
}
