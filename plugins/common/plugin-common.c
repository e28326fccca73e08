/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "plugin-common.h"

void plugin_host_log(const struct traced_host_api *api, struct traced_host *host, int level, const char *fmt, ...) {
        char msg[1024];
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        api->log(host, level, msg);
}

void plugin_host_log_cpu_change(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                                uint64_t id, uint32_t cpu, enum cpu_hotplug_change what, int error) {
        unsigned long long n = (unsigned long long) id;
        if (what == CPU_HOTPLUG_STOPPED)
                plugin_host_log(api, host, TRACED_LOG_INFO, "%s instance %llu: CPU %u went offline", ds, n, cpu);
        else if (what == CPU_HOTPLUG_BACK)
                plugin_host_log(api, host, TRACED_LOG_INFO, "%s instance %llu: CPU %u is back online, sampled again",
                                ds, n, cpu);
        else
                plugin_host_log(api, host, TRACED_LOG_WARNING,
                                "%s instance %llu: CPU %u is back online but cannot be sampled: %s", ds, n, cpu,
                                strerror(-error));
}

int plugin_check_host(const struct traced_host_api *api) {
        return api->struct_size < offsetof(struct traced_host_api, end_packet) + sizeof(api->end_packet) ||
                               !api->begin_packet || !api->end_packet ?
                       -EPROTO :
                       0;
}

void plugin_host_report(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                        uint64_t instance_id, const char *field, const char *fmt, ...) {
        char message[512];
        va_list ap;
        va_start(ap, fmt);
        (void) vsnprintf(message, sizeof(message), fmt, ap);
        va_end(ap);
        int32_t r = -EOPNOTSUPP;
        if (api->struct_size >= offsetof(struct traced_host_api, report_error) + sizeof(api->report_error) &&
            api->report_error)
                r = api->report_error(host, instance_id, field, message);
        /* The service's log names the session; without the report (an older
         * host, upstream's service) the plugin's log is all there is. */
        plugin_host_log(api, host, r < 0 ? TRACED_LOG_ERR : TRACED_LOG_INFO, "%s instance %llu: %s%s%s", ds,
                        (unsigned long long) instance_id, field ? field : "", field ? ": " : "", message);
}

void plugin_host_report_parsed(const struct traced_host_api *api, struct traced_host *host, const char *ds,
                               uint64_t instance_id, const char *prefix, const char *err) {
        char field[160];
        const char *why = strstr(err, ": ");
        if (why)
                snprintf(field, sizeof(field), "%s.%.*s", prefix, (int) (why - err), err);
        else
                snprintf(field, sizeof(field), "%s", prefix);
        plugin_host_report(api, host, ds, instance_id, field, "%s", why ? why + 2 : err);
}

void plugin_instance_add(struct plugin_instance **list, struct plugin_instance *i) {
        i->next = *list;
        *list = i;
}

struct plugin_instance *plugin_instance_find(struct plugin_instance *list, uint64_t id) {
        for (; list; list = list->next)
                if (list->id == id)
                        return list;
        return NULL;
}

struct plugin_instance *plugin_instance_take(struct plugin_instance **list, uint64_t id) {
        for (struct plugin_instance **pp = list; *pp; pp = &(*pp)->next)
                if ((*pp)->id == id) {
                        struct plugin_instance *i = *pp;
                        *pp = i->next;
                        i->next = NULL;
                        return i;
                }
        return NULL;
}

struct plugin_instance *plugin_instance_pop(struct plugin_instance **list) {
        struct plugin_instance *i = *list;
        if (i) {
                *list = i->next;
                i->next = NULL;
        }
        return i;
}
