/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What the consumer port reads of a session and does with it: its
 * identity and state, the EnableTracing request waiting for its end,
 * detaching and attaching, and finding a session to clone. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "core/sessions/session-internal.h"

uint64_t session_id(const struct session *s) {
        return s->id;
}

uid_t session_uid(const struct session *s) {
        return s->uid;
}

enum session_state session_state(const struct session *s) {
        return s->state;
}

int session_end_reason(const struct session *s) {
        return s->end_reason;
}

const Perfetto__Protos__TraceConfig *session_config(const struct session *s) {
        return s->config;
}

bool session_writes_file(const struct session *s) {
        return s->file_fd >= 0;
}

bool session_is_resident(const struct session *s) {
        return s->resident;
}

bool session_all_started(const struct session *s) {
        return s->all_started_notified;
}

bool session_is_freeing(const struct session *s) {
        return s->freeing;
}

void session_uuid(const struct session *s, uint64_t *ret_msb, uint64_t *ret_lsb) {
        *ret_msb = s->uuid_msb;
        *ret_lsb = s->uuid_lsb;
}

void session_set_clone_trigger(struct session *s, struct received_trigger *t) {
        received_trigger_done(&s->clone_trigger);
        s->clone_trigger = *t;
        *t = (struct received_trigger) {};
}

void session_set_enable_req(struct session *s, ipc_request *req) {
        if (s->enable_req)
                ipc_request_unref(s->enable_req);
        s->enable_req = req;
}

void session_forget_consumer(struct session *s) {
        s->consumer = NULL;
}

int session_detach(struct session *s, const char *key) {
        char *k = strdup(key);
        if (!k)
                return -ENOMEM;
        free(s->detach_key);
        s->detach_key = k;
        session_set_enable_req(s, NULL);
        s->consumer = NULL;
        return 0;
}

bool sessions_detach_key_taken(struct traced_service *svc, uid_t uid, const char *key, const struct session *except) {
        for (struct session *s = svc->sessions; s; s = s->next)
                if (s != except && s->detach_key && s->uid == uid && strcmp(s->detach_key, key) == 0)
                        return true;
        return false;
}

struct session *sessions_attach(struct traced_service *svc, struct consumer *c, uid_t uid, const char *key) {
        for (struct session *s = svc->sessions; s; s = s->next) {
                if (!s->detach_key || s->consumer == c || strcmp(s->detach_key, key) != 0 || s->uid != uid)
                        continue;
                if (s->consumer) {
                        /* Attached under its key by another consumer of the
                         * same user (tracectl attach, waiting): taken over,
                         * so that tracectl stop works from another terminal.
                         * The one waiting is told. */
                        if (s->enable_req) {
                                ipc_request *req = s->enable_req;
                                s->enable_req = NULL;
                                svc->consumer_ops->enable_done(req, SESSION_TAKEN_OVER, 0);
                        }
                        svc->consumer_ops->session_taken(s->consumer, s);
                }
                /* The key stays: the session is attached and detached under
                 * it again, and QueryServiceState shows it. */
                s->consumer = c;
                return s;
        }
        return NULL;
}

struct session *sessions_find_by_id(struct traced_service *svc, uint64_t id) {
        for (struct session *s = svc->sessions; s; s = s->next)
                if (s->id == id)
                        return s;
        return NULL;
}

struct session *sessions_find_by_unique_name(struct traced_service *svc, const char *name) {
        for (struct session *s = svc->sessions; s; s = s->next)
                if (!s->retired && !s->is_clone && s->config->unique_session_name &&
                    strcmp(s->config->unique_session_name, name) == 0)
                        return s;
        return NULL;
}
