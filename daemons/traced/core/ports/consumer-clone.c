/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* CloneSession and SaveTraceForBugreport: the source session flushed,
 * then copied for the consumer, or into the bugreport file. */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "log/log.h"
#include "core/ports/consumer-port.h"
#include "core/output/trace-file.h"
#include "core/service.h"
#include "core/sessions/session.h"

#include "perfetto/ipc/consumer_port.pb-c.h"

struct clone_ctx {
        ipc_request *req;
        int out_fd;
        struct received_trigger clone_trigger;
        /* SaveTraceForBugreport: write the copy to this path instead. */
        bool for_save;
};

static void clone_ctx_free(struct clone_ctx *k) {
        safe_close(k->out_fd);
        received_trigger_done(&k->clone_trigger);
        free(k);
}

static void clone_error(ipc_request *req, const char *msg) {
        Perfetto__Protos__CloneSessionResponse resp = PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
        resp.has_success = true;
        resp.success = false;
        resp.error = (char *) msg;
        reply(req, &resp.base);
}

static void save_reply(ipc_request *req, bool success, const char *msg) {
        Perfetto__Protos__SaveTraceForBugreportResponse resp = PERFETTO__PROTOS__SAVE_TRACE_FOR_BUGREPORT_RESPONSE__INIT;
        resp.has_success = true;
        resp.success = success;
        resp.msg = (char *) msg;
        reply(req, &resp.base);
}

/* SaveTraceForBugreport: the snapshot written into a fresh file next to
 * the final path, then renamed over it. */
static void save_after_flush(struct session *src, struct clone_ctx *k) {
        _cleanup_free_ char *path = NULL, *tmp = NULL;
        _cleanup_free_ char *err = NULL;
        struct session *s = NULL;
        bool wrote = false;
        int fd;

        fd = trace_file_bugreport_open(&path, &tmp);
        if (fd < 0 && !tmp) {
                save_reply(k->req, false, "Out of memory");
                return;
        }
        if (fd < 0) {
                log_warning_errno(fd, "Failed to create %s for SaveTraceForBugreport: %m", tmp);
                save_reply(k->req, false, "Failed to create the bugreport trace file");
                return;
        }
        if (session_writes_file(src)) {
                /* The clone continues the source's file into fd. */
                if (session_clone(src, NULL, 0, fd, &s, &wrote, &err) < 0) {
                        trace_file_bugreport_discard(tmp);
                        save_reply(k->req, false, err ? err : "Failed to copy the session");
                        return;
                }
        } else {
                if (session_clone(src, NULL, 0, -EBADF, &s, &wrote, &err) < 0) {
                        safe_close(fd);
                        trace_file_bugreport_discard(tmp);
                        save_reply(k->req, false, err ? err : "Failed to copy the session");
                        return;
                }
                int r = session_write_into_fd(s, fd);
                if (r < 0) {
                        session_free(s);
                        trace_file_bugreport_discard(tmp);
                        save_reply(k->req, false, "Failed to write the bugreport trace file");
                        return;
                }
        }
        session_free(s);
        int r = trace_file_bugreport_commit(tmp, path);
        if (r < 0) {
                log_warning_errno(r, "Failed to rename %s to %s: %m", tmp, path);
                save_reply(k->req, false, "Failed to move the bugreport trace file in place");
                return;
        }
        log_info("Session %" PRIu64 " saved for a bugreport into %s.", session_id(src), path);
        save_reply(k->req, true, path);
}

static void clone_after_flush(struct session *src, bool success, void *userdata) {
        struct clone_ctx *k = userdata;
        ipc_request *req = k->req;
        struct consumer *c = req_consumer(req);
        if (!c) {
                ipc_request_unref(req);
                clone_ctx_free(k);
                return;
        }
        if (session_is_freeing(src)) {
                if (k->for_save)
                        save_reply(req, false, "The tracing session went away");
                else
                        clone_error(req, "The tracing session went away");
                clone_ctx_free(k);
                return;
        }
        if (k->for_save) {
                save_after_flush(src, k);
                clone_ctx_free(k);
                return;
        }
        if (c->session) {
                clone_error(req, "This consumer already has a tracing session");
                clone_ctx_free(k);
                return;
        }
        struct session *s = NULL;
        _cleanup_free_ char *err = NULL;
        bool wrote_file = false;
        int fd = TAKE_FD(k->out_fd);
        if (!session_writes_file(src))
                fd = safe_close(fd); /* read back over IPC, as usual */
        if (session_clone(src, c, c->uid, fd, &s, &wrote_file, &err) < 0) {
                clone_error(req, err ? err : "Failed to clone the session");
                clone_ctx_free(k);
                return;
        }
        session_set_clone_trigger(s, &k->clone_trigger);
        clone_ctx_free(k);
        c->session = s;
        Perfetto__Protos__CloneSessionResponse resp = PERFETTO__PROTOS__CLONE_SESSION_RESPONSE__INIT;
        resp.has_success = resp.has_uuid_msb = resp.has_uuid_lsb = resp.has_was_write_into_file = true;
        resp.success = true;
        uint64_t msb, lsb;
        session_uuid(s, &msb, &lsb);
        resp.uuid_msb = (int64_t) msb;
        resp.uuid_lsb = (int64_t) lsb;
        resp.was_write_into_file = wrote_file;
        reply(req, &resp.base);
}

/* Flushes src, then clones it (k->req is answered either way). */
static void clone_start(struct session *src, struct clone_ctx *k) {
        if (session_state(src) != SESSION_STARTED || session_flush(src, 0, clone_after_flush, k) < 0)
                clone_after_flush(src, false, k);
}

void m_save_trace_for_bugreport(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        struct traced_service *svc = userdata;
        struct consumer *c = req_consumer(req);
        struct session *src = service_find_bugreport_session(svc);

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        if (!src || (c->uid != 0 && session_uid(src) != c->uid)) {
                save_reply(req, false, "No trace with TraceConfig.bugreport_score > 0 eligible for bug reporting was found");
                return;
        }
        struct clone_ctx *k = calloc(1, sizeof(*k));
        if (!k) {
                ipc_request_fail(req);
                return;
        }
        *k = (struct clone_ctx) { .req = req, .out_fd = -EBADF, .for_save = true };
        clone_start(src, k);
}

void m_clone_session(ipc_request *req, const ProtobufCMessage *args, void *userdata) {
        const Perfetto__Protos__CloneSessionRequest *a = (const void *) args;
        struct traced_service *svc = userdata;
        struct consumer *c = req_consumer(req);
        _cleanup_close_ int fd = ipc_request_take_fd(req);
        struct session *src = NULL;

        if (!c) {
                ipc_request_fail(req);
                return;
        }
        if (a->selector_case == PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID &&
            a->session_id == UINT64_MAX) {
                /* The bugreport id: the started session with the highest
                 * bugreport_score. */
                src = service_find_bugreport_session(svc);
                if (!src) {
                        clone_error(req, "No tracing sessions eligible for bugreport found");
                        return;
                }
        }
        if (!src && a->selector_case == PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_SESSION_ID)
                src = sessions_find_by_id(svc, a->session_id);
        else if (!src && a->selector_case == PERFETTO__PROTOS__CLONE_SESSION_REQUEST__SELECTOR_UNIQUE_SESSION_NAME &&
                 a->unique_session_name)
                src = sessions_find_by_unique_name(svc, a->unique_session_name);
        if (!src) {
                clone_error(req, "Tracing session not found");
                return;
        }
        if (c->uid != 0 && session_uid(src) != c->uid && !session_is_resident(src)) {
                clone_error(req, "Not allowed to clone a session of another user");
                return;
        }
        if (c->session) {
                clone_error(req, "This consumer already has a tracing session");
                return;
        }
        if (session_writes_file(src) && fd < 0) {
                clone_error(req, "Cloning a write_into_file session needs an output file descriptor");
                return;
        }
        /* Flush first so the copy holds what was written until now. */
        struct clone_ctx *k = calloc(1, sizeof(*k));
        if (!k) {
                ipc_request_fail(req);
                return;
        }
        *k = (struct clone_ctx) { .req = req, .out_fd = TAKE_FD(fd) };
        if (a->clone_trigger_name) {
                k->clone_trigger.trigger_name = strdup(a->clone_trigger_name);
                k->clone_trigger.producer_name = strdup(a->clone_trigger_producer_name ? a->clone_trigger_producer_name : "");
                k->clone_trigger.producer_uid = (uid_t) a->clone_trigger_trusted_producer_uid;
                k->clone_trigger.boot_time_ns = a->clone_trigger_boot_time_ns;
                k->clone_trigger.stop_delay_ms = (uint32_t) a->clone_trigger_delay_ms;
                if (!k->clone_trigger.trigger_name || !k->clone_trigger.producer_name) {
                        clone_ctx_free(k);
                        ipc_request_fail(req);
                        return;
                }
        }
        clone_start(src, k);
}
