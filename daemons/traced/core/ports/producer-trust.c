/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Who may register what: reserved data source names, the producers
 * trusted with them, and the connections traced made for its plugins. */

#include <string.h>

#include "core/ports/ports.h"
#include "core/service.h"
#include "core/sessions/producer.h"

bool service_take_plugin_conn(struct traced_service *svc, uint64_t conn_id) {
        for (size_t i = 0; i < svc->n_plugin_conns; i++)
                if (svc->plugin_conns[i] == conn_id) {
                        svc->plugin_conns[i] = svc->plugin_conns[--svc->n_plugin_conns];
                        return true;
                }
        return false;
}

bool service_name_is_reserved(const struct traced_service *svc, const char *name) {
        for (size_t i = 0; i < svc->n_trusted_names; i++) {
                const char *pat = svc->trusted_names[i];
                size_t n = strlen(pat);
                if (n > 0 && pat[n - 1] == '*' ? strncmp(name, pat, n - 1) == 0 : strcmp(name, pat) == 0)
                        return true;
        }
        return false;
}

bool service_producer_is_trusted(const struct traced_service *svc, const struct producer *p) {
        /* A relayed producer's uid is a claim nobody checked. */
        if (p->remote)
                return false;
        if (p->plugin_host || p->uid == 0)
                return true;
        for (size_t i = 0; i < svc->n_trusted_uids; i++)
                if (svc->trusted_uids[i] == p->uid)
                        return true;
        return false;
}

bool service_producer_may_use_name(const struct traced_service *svc, const struct producer *p, const char *name) {
        if (!service_name_is_reserved(svc, name))
                return true;
        /* Reserved names are this machine's. A relayed machine's producers
         * name their own machine's sources: every packet of theirs carries
         * their machine id, so they cannot pass for ours. A TCP peer that
         * named no machine is machine 0 and gets no such leeway. */
        if (p->remote)
                return p->machine_id != 0;
        return service_producer_is_trusted(svc, p);
}
