/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What data source registrations may cost: every registration (name,
 * descriptor, bookkeeping) is charged to its producer, the producer's uid
 * and the service, and refused past any of the three quotas. */

#include <stddef.h>

#define SERVICE_MAX_REGISTRATION_BYTES_PER_PRODUCER (8u * 1024u * 1024u)
#define SERVICE_MAX_REGISTRATION_BYTES_PER_UID (32u * 1024u * 1024u)
#define SERVICE_MAX_REGISTRATION_BYTES (256u * 1024u * 1024u)
/* The service's own bookkeeping per registration, charged too. */
#define REGISTRATION_OVERHEAD 64u

struct registration_usage {
        size_t producer; /* bytes this producer's registrations hold */
        size_t uid;      /* all producers of its uid */
        size_t all;      /* every producer */
};

size_t registration_cost(const char *name, size_t descriptor_size);
/* NULL when extra more bytes fit every quota; otherwise why not. */
const char *registration_quota_refusal(const struct registration_usage *u, size_t extra);
