/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The end of every session when the service stops (SIGTERM, what
 * `systemctl stop` and `restart` send): each running session is ended as
 * DisableTracing ends it, so that its file holds what its data sources
 * had recorded until then, and says why it ended. */

#include <errno.h>
#include <stdlib.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"

#include "perfetto/common/trace_stats.pb-c.h"

void sessions_begin_shutdown(struct traced_service *svc) {
        struct session *next;
        for (struct session *s = svc->sessions; s; s = next) {
                next = s->next;
                /* One that is being stopped already, by its consumer, its
                 * duration or a trigger, ends as it was asked to. */
                if (s->state != SESSION_CONFIGURED && s->state != SESSION_STARTED)
                        continue;
                s->end_reason = PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_SERVICE_STOPPED;
                log_info("Session %" PRIu64 ": the service is stopping; flushing its data sources and finishing "
                         "its trace.",
                         s->id);
                session_disable(s, NULL);
        }
}

/* Whether the session's consumer reads it back over the connection once
 * told it ended (no file was written for it). */
static bool read_back_by_consumer(const struct session *s) {
        const Perfetto__Protos__TraceConfig *cfg = s->config;
        return s->consumer && !(cfg->has_write_into_file && cfg->write_into_file);
}

bool sessions_shutdown_done(const struct traced_service *svc) {
        for (const struct session *s = svc->sessions; s; s = s->next)
                if (s->state != SESSION_DISABLED || s->out_finalizing || read_back_by_consumer(s))
                        return false;
        return true;
}

void sessions_shutdown(struct traced_service *svc) {
        /* No more waiting: take what is committed and write it out. */
        struct session *next;
        for (struct session *s = svc->sessions; s; s = next) {
                next = s->next;
                if (s->state == SESSION_CONFIGURED || s->state == SESSION_STARTED)
                        s->end_reason = PERFETTO__PROTOS__TRACE_STATS__TRACED_END_REASON__TRACED_END_SERVICE_STOPPED;
                if (s->state != SESSION_DISABLED) {
                        session_cancel_flushes(s);
                        if (s->state == SESSION_STARTED || s->state == SESSION_DISABLING)
                                s->state = SESSION_DISABLING;
                        session_force_finalize(s, NULL);
                }
                if (s->out_finalizing) {
                        int r = session_output_complete(s);
                        if (r < 0 && r != -EFBIG)
                                log_warning_errno(r, "Session %" PRIu64 ": failed to finish its trace file: %m",
                                                  s->id);
                        session_output_finished(s);
                }
        }
}
