/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <string.h>

#include "core/ports/quota.h"

size_t registration_cost(const char *name, size_t descriptor_size) {
        return REGISTRATION_OVERHEAD + strlen(name) + 1 + descriptor_size;
}

const char *registration_quota_refusal(const struct registration_usage *u, size_t extra) {
        /* Written as "what is left" so that nothing can overflow. */
        if (u->producer > SERVICE_MAX_REGISTRATION_BYTES_PER_PRODUCER ||
            extra > SERVICE_MAX_REGISTRATION_BYTES_PER_PRODUCER - u->producer)
                return "Data source registrations exceed this producer's quota of 8 MiB";
        if (u->uid > SERVICE_MAX_REGISTRATION_BYTES_PER_UID || extra > SERVICE_MAX_REGISTRATION_BYTES_PER_UID - u->uid)
                return "Data source registrations exceed this user's quota of 32 MiB";
        if (u->all > SERVICE_MAX_REGISTRATION_BYTES || extra > SERVICE_MAX_REGISTRATION_BYTES - u->all)
                return "Data source registrations exceed the service's limit of 256 MiB";
        return NULL;
}
