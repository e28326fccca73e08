/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/*
 * The ports layer: the IPC services that turn the wire protocol into
 * calls on the sessions layer (producer-port.c: ProducerPort, with
 * CommitData through chunk-sink.c; consumer-port.c: ConsumerPort;
 * relay-port.c: RelayPort) and implement the listeners the sessions call
 * back (producer_ops, session_consumer_ops). Nothing below includes this.
 */

#include "ipc/ipc.h"

#include "perfetto/common/data_source_descriptor.pb-c.h"

struct producer;
struct session_consumer_ops;

extern const struct ipc_service_desc producer_port_desc;
extern const struct ipc_service_desc consumer_port_desc;
extern const struct ipc_service_desc relay_port_desc;
extern const struct session_consumer_ops consumer_port_session_ops;

int producer_setup_smb(struct producer *p);

/* consumer-query.c: whether a QueryServiceState reply can list a data
 * source with descriptor d of producer_id whole, in one IPC frame (a
 * descriptor that came in a frame of its own can be a few bytes larger
 * than the frame of its listing allows); *ret_max_size: the largest
 * descriptor that can be listed. */
bool consumer_query_can_list(const Perfetto__Protos__DataSourceDescriptor *d, uint16_t producer_id,
                             size_t *ret_max_size);

/* producer-trust.c */
struct traced_service;
/* Whether name is reserved (trusted_names), and whether p may register
 * reserved names. */
bool service_name_is_reserved(const struct traced_service *svc, const char *name);
/* Whether p may register (or call itself) name, reserved or not. */
bool service_producer_may_use_name(const struct traced_service *svc, const struct producer *p, const char *name);
bool service_producer_is_trusted(const struct traced_service *svc, const struct producer *p);
/* Whether conn is one traced made for a plugin (consumes the mark). */
bool service_take_plugin_conn(struct traced_service *svc, uint64_t conn_id);
