/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The service's first moments (ports layer). traced's supervisor starts
 * one plugin host per plugin right after the core; each registers its
 * plugin's data sources a moment later (a second or more on a loaded
 * machine), and a session configured before then would start without
 * them. With socket activation that is every first recording after boot:
 * the first consumer's connection is what starts traced.
 *
 * So from the core's start until every plugin host the supervisor
 * launched at the start has registered its data sources (the host's Sync
 * after them), has gone (its connection closed, or the supervisor saw it
 * exit), or the bound passed, the ports hold the calls that start
 * sessions, look at the data sources or name a session that may be held:
 * the consumer port's EnableTracing, StartTracing, QueryServiceState,
 * CloneSession, Attach and SaveTraceForBugreport, with every later call of
 * a connection that has one held (its order stays), and the producer
 * port's ActivateTriggers (a trigger for a session held). When the hold
 * ends they are served in the order they came, as if they came then.
 * Plugin hosts restarted later, in-process plugins and other producers
 * are not waited for; everything else is served at once. The hold comes
 * back while a plugin host a session asked for starts
 * (startup_hold_demand).
 */

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "ipc/ipc.h"

struct traced_service;

typedef void (*startup_hold_done_fn)(struct traced_service *svc, void *userdata);

/* Starts holding, for at most timeout_usec from now (0: no hold). done
 * runs once the hold ends (or at once, without one). */
int startup_hold_begin(struct traced_service *svc, uint64_t timeout_usec, startup_hold_done_fn done,
                       void *userdata);
/* The service's end of plugin host pid's connection, handed over before
 * the supervisor said it launched them all: waited for. */
void startup_hold_expect(struct traced_service *svc, uint64_t conn_id, pid_t pid, const char *plugin);
/* The supervisor launched every plugin host of the start. */
void startup_hold_all_launched(struct traced_service *svc);
/* The connection's producer is done registering (its Sync). */
void startup_hold_registered(struct traced_service *svc, uint64_t conn_id);
/* The connection closed, or (by pid) the supervisor saw the host exit. */
void startup_hold_conn_gone(struct traced_service *svc, uint64_t conn_id);
void startup_hold_host_exited(struct traced_service *svc, pid_t pid, const char *plugin);
/*
 * traced.conf's hosts=lazy: a session asked for the host of plugin
 * (sessions/parked.h). The hold is on again (or still) until that host
 * was handed over and registered its data sources, ended, or
 * timeout passed (the start's bound, else STARTUP_HOLD_DEMAND_USEC): the
 * same calls wait, so the session that asked starts with the plugin's
 * data sources.
 */
#define STARTUP_HOLD_DEMAND_USEC (10u * 1000000u)
int startup_hold_demand(struct traced_service *svc, const char *plugin);
/* Whether the hold is on. */
bool startup_hold_active(const struct traced_service *svc);
/* While a hold is on (the start's, or one a session's demand brought
 * back): done runs once it ends, unless the start's own is still to run
 * (it is then the one that runs). false, and nothing kept, without a hold. */
bool startup_hold_when_done(struct traced_service *svc, startup_hold_done_fn done, void *userdata);
/* Ends the hold now and serves what it held (the service stops). */
void startup_hold_end(struct traced_service *svc);
/* Frees it; calls still held are failed. */
void startup_hold_free(struct traced_service *svc);

/*
 * A port's entry point: true when req is held (postponed, to be served by
 * fn(req, args, userdata) when the hold ends), false when the caller
 * serves it now. Held while the hold is on when always is set, or when
 * its connection has calls held already.
 */
bool startup_hold_call(struct traced_service *svc, ipc_request *req, ipc_method_handler fn, bool always);
