/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* CloneSession: a read-only copy of a session's buffers, continuing its
 * file for a write_into_file session. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/sessions/session-internal.h"
#include "core/buffers/trace-buffer.h"
#include "core/output/trace-file.h"

int session_clone(struct session *src, struct consumer *c, uid_t uid, int out_fd, struct session **ret,
                  bool *ret_wrote_file, char **ret_error) {
        _cleanup_close_ int fd = out_fd;
        struct traced_service *svc = src->svc;
        int r;

        *ret_wrote_file = false;
        if (src->file_fd >= 0 && fd < 0)
                return session_config_error(ret_error, "Cloning a write_into_file session needs an output file descriptor");
        if (svc->n_sessions >= SERVICE_MAX_SESSIONS)
                return session_config_error(ret_error, "Too many concurrent tracing sessions");

        struct session *s;
        /* A read-only snapshot: disabled from the start. */
        r = session_alloc(svc, c, uid, SESSION_DISABLED, src->config, &s);
        if (r < 0)
                return r;
        s->is_clone = true;
        r = session_compile_regexes(s, ret_error);
        if (r < 0) {
                session_free(s);
                return r;
        }
        s->buffers = calloc(src->n_buffers ? src->n_buffers : 1, sizeof(*s->buffers));
        if (!s->buffers) {
                session_free(s);
                return -ENOMEM;
        }
        for (size_t i = 0; i < src->n_buffers; i++) {
                r = trace_buffer_clone(src->buffers[i].tb, &s->buffers[i].tb);
                if (r < 0) {
                        session_free(s);
                        return session_config_error(ret_error, "Failed to copy a trace buffer");
                }
                /* The clone is read as a finished trace. */
                trace_buffer_set_final(s->buffers[i].tb, true);
                s->buffers[i].id = ++svc->last_buffer_id;
                s->n_buffers++;
        }
        /* The triggers the source saw since its last clone go with this
         * one, as upstream does. */
        s->triggers = src->triggers;
        s->n_triggers = src->n_triggers;
        s->n_triggers_received = src->n_triggers_received;
        src->triggers = NULL;
        src->n_triggers = src->n_triggers_emitted = 0;
        s->packets_invalid = src->packets_invalid;
        s->flushes_requested = src->flushes_requested;
        s->flushes_succeeded = src->flushes_succeeded;
        s->flushes_failed = src->flushes_failed;

        if (src->file_fd >= 0) {
                /* The copy continues the source's file: first what it
                 * wrote, then what its buffers still hold (the read
                 * progress is cloned too, so nothing appears twice), with
                 * the same sequence ids. */
                r = session_output_sync(src);
                if (r >= 0)
                        r = trace_file_copy(src->file_fd, fd);
                session_output_unsync(src);
                if (r < 0) {
                        session_free(s);
                        return session_config_error(ret_error, "Failed to copy the write_into_file session's file");
                }
                if (src->seq_cap > 0) {
                        s->seqs = calloc(src->seq_cap, sizeof(*s->seqs));
                        if (!s->seqs) {
                                session_free(s);
                                return -ENOMEM;
                        }
                        memcpy(s->seqs, src->seqs, src->seq_cap * sizeof(*s->seqs));
                        s->seq_cap = src->seq_cap;
                        s->n_seqs = src->n_seqs;
                        s->next_sequence_id = src->next_sequence_id;
                }
                r = session_output_open(s, TAKE_FD(fd), ret_error);
                if (r < 0) {
                        session_free(s);
                        return r;
                }
                /* The consumer reads the file once answered: it must be there. */
                r = session_output_complete(s);
                if (r < 0 && r != -EFBIG) {
                        session_free(s);
                        return session_config_error(ret_error, "Failed to write the clone into the output file");
                }
                if (session_output_drained(s)) {
                        session_output_free(s);
                        s->file_fd = safe_close(s->file_fd);
                } else
                        s->out_finalizing = true; /* the loop waits for the pipe or the writer */
                *ret_wrote_file = true;
        }
        log_info("Session %" PRIu64 " cloned from session %" PRIu64 "%s.", s->id, src->id,
                 *ret_wrote_file ? " into the consumer's file" : "");
        *ret = s;
        sessions_state_changed(svc);
        return 0;
}
