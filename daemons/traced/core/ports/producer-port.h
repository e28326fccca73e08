/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* Shared by the producer port's two files: producer-port.c (connections,
 * registrations, the async command stream, the producer_ops the sessions
 * call) and producer-commit.c (CommitData, scraping and the trace writers'
 * target buffers: the commit path into chunk-sink.c). */

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>

#include "ipc/ipc.h"

struct producer;

static inline struct producer *req_producer(ipc_request *req) {
        ipc_host_conn *conn = ipc_request_conn(req);
        return conn ? ipc_host_conn_get_userdata(conn) : NULL;
}

static inline void reply_empty(ipc_request *req, const ProtobufCMessage *msg) {
        (void) ipc_request_reply(req, msg, false, -EBADF);
}

/* A protocol violation: the producer loses its connection, nothing else
 * is affected. */
void producer_kick(struct producer *p, const char *why);

/* producer-commit.c */
/* Counts the chunks a departing producer left being written against the
 * sessions their writers served. Returns the number counted. */
size_t producer_count_torn_chunks(struct producer *p);
void producer_scrape(struct producer *p, bool scrape_incomplete);
/* Frees what the commit path and the scrape keep between calls. */
void producer_commit_done(struct producer *p);
void m_commit_data(ipc_request *req, const ProtobufCMessage *args, void *userdata);
void m_register_trace_writer(ipc_request *req, const ProtobufCMessage *args, void *userdata);
void m_unregister_trace_writer(ipc_request *req, const ProtobufCMessage *args, void *userdata);
