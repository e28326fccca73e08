/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Resident sessions: started by the service from the sessions directory's
 * files (shared/resident.h reads them), with no consumer. A reload hands
 * the whole set again: what went stops, what changed restarts, what is
 * new or had ended on its own starts. After a core restart the set comes
 * again and every session starts afresh: what a ring buffer held lived in
 * the core and is gone; files a resident session wrote (rotation in the
 * trace directory) are whole and stay. */

#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/output/output-path.h"
#include "core/service.h"
#include "core/sessions/session-internal.h"

static struct session *find_resident(struct traced_service *svc, const char *name) {
        for (struct session *s = svc->sessions; s; s = s->next)
                if (s->resident && !s->retired && strcmp(s->config->unique_session_name, name) == 0)
                        return s;
        return NULL;
}

/* s stops: its trace is finished, then it is freed. */
static void retire(struct session *s, const char *why) {
        log_info("Resident session %s (%s): %s; stopping it.", s->config->unique_session_name, s->resident_path,
                 why);
        s->retired = true;
        if (s->state == SESSION_DISABLED) {
                session_free(s);
                return;
        }
        s->free_if_detached = true;
        session_disable(s, NULL);
}

static void start_resident(struct traced_service *svc, const struct resident_entry *e) {
        _cleanup_free_ char *error = NULL;
        struct session *s = NULL;
        int fd = -EBADF, r;

        Perfetto__Protos__TraceConfig *cfg = perfetto__protos__trace_config__unpack(NULL, e->size, e->config);
        if (!cfg) {
                log_error("Resident session %s (%s): the configuration did not reach the core whole; not started.",
                          e->name, e->path);
                return;
        }
        if (svc->stopping) {
                perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                return;
        }
        if (cfg->has_write_into_file && cfg->write_into_file) {
                fd = output_path_open_dir(svc->trace_dir_fd, svc->trace_dir, cfg->output_path, &error);
                if (fd < 0) {
                        log_error("Resident session %s (%s): %s; not started.", e->name, e->path,
                                  error ? error : strerror(-fd));
                        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
                        return;
                }
        }
        r = session_create(svc, NULL, getuid(), cfg, fd, &s, &error);
        perfetto__protos__trace_config__free_unpacked(cfg, NULL);
        if (r < 0) {
                log_error("Resident session %s (%s): %s; not started.", e->name, e->path,
                          error ? error : strerror(-r));
                return;
        }
        s->resident = true;
        s->resident_path = strdup(e->path);
        s->resident_config = malloc(e->size ? e->size : 1);
        if (!s->resident_path || !s->resident_config) {
                log_error("Resident session %s (%s): out of memory; not started.", e->name, e->path);
                session_free(s);
                return;
        }
        memcpy(s->resident_config, e->config, e->size);
        s->resident_config_size = e->size;
        r = session_start(s);
        if (r < 0) {
                log_error_errno(r, "Resident session %s (%s): failed to start: %m", e->name, e->path);
                session_disable(s, "Failed to start the resident session");
                return;
        }
        log_info("Resident session %s started from %s (session %" PRIu64 ", %zu data source instance(s) so far).",
                 e->name, e->path, s->id, session_count_instances(s));
}

void sessions_set_resident(struct traced_service *svc, const struct resident_entry *v, size_t n) {
        /* What went or changed stops first: a changed one's name is free
         * for its new session at once. */
        for (struct session *s = svc->sessions, *next; s; s = next) {
                next = s->next;
                if (!s->resident || s->retired)
                        continue;
                const struct resident_entry *e = NULL;
                for (size_t i = 0; i < n && !e; i++)
                        if (strcmp(v[i].name, s->config->unique_session_name) == 0)
                                e = &v[i];
                if (!e)
                        retire(s, "its file is gone");
                else if (e->size != s->resident_config_size || memcmp(e->config, s->resident_config, e->size) != 0)
                        retire(s, "its file changed");
                else if (s->state == SESSION_DISABLED)
                        retire(s, "it had ended; starting it again");
        }
        for (size_t i = 0; i < n; i++)
                if (!find_resident(svc, v[i].name))
                        start_resident(svc, &v[i]);
}
