/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <systemd/sd-bus.h>

#include "basic/macro.h"
#include "snapshot-unit.h"

#define SYSTEMD_DEST "org.freedesktop.systemd1"
#define UNIT_IFACE "org.freedesktop.systemd1.Unit"
#define SERVICE_IFACE "org.freedesktop.systemd1.Service"

static int set_error(Perfetto__Protos__TracedSnapshot__Unit *u, const char *what, int r) {
        free(u->error);
        if (asprintf(&u->error, "%s: %s", what, strerror(r < 0 ? -r : r)) < 0) {
                u->error = NULL;
                return -ENOMEM;
        }
        return 0;
}

int snapshot_unit_query(const char *unit, Perfetto__Protos__TracedSnapshot__Unit *u) {
        _cleanup_(sd_bus_flush_close_unrefp) sd_bus *bus = NULL;
        _cleanup_free_ char *path = NULL;
        sd_bus_error e = SD_BUS_ERROR_NULL;
        int r;

        u->name = strdup(unit);
        if (!u->name)
                return -ENOMEM;
        r = sd_bus_open_system(&bus);
        if (r < 0)
                return set_error(u, "Cannot connect to the system bus", r);
        r = sd_bus_path_encode("/org/freedesktop/systemd1/unit", unit, &path);
        if (r < 0)
                return set_error(u, "Cannot name the unit's object", r);

        r = sd_bus_get_property_string(bus, SYSTEMD_DEST, path, UNIT_IFACE, "ActiveState", &e, &u->active_state);
        if (r < 0) {
                int k = set_error(u, e.message ? e.message : "Cannot read the unit's ActiveState", r);
                sd_bus_error_free(&e);
                return k;
        }
        uint64_t usec = 0;
        if (sd_bus_get_property_trivial(bus, SYSTEMD_DEST, path, UNIT_IFACE, "InactiveEnterTimestamp", &e, 't',
                                        &usec) >= 0 && usec) {
                u->has_failed_realtime_ns = true;
                u->failed_realtime_ns = (int64_t) usec * 1000;
        }
        sd_bus_error_free(&e);
        _cleanup_(sd_bus_message_unrefp) sd_bus_message *m = NULL;
        if (sd_bus_get_property(bus, SYSTEMD_DEST, path, UNIT_IFACE, "InvocationID", &e, &m, "ay") >= 0) {
                const void *id;
                size_t n;
                if (sd_bus_message_read_array(m, 'y', &id, &n) >= 0 && n == 16) {
                        u->invocation_id = malloc(33);
                        if (!u->invocation_id)
                                return -ENOMEM;
                        for (size_t i = 0; i < 16; i++)
                                snprintf(u->invocation_id + 2 * i, 3, "%02x", ((const uint8_t *) id)[i]);
                }
        }
        sd_bus_error_free(&e);

        /* Services: how the main process ended. */
        size_t n = strlen(unit);
        if (n > 8 && strcmp(unit + n - 8, ".service") == 0) {
                uint32_t pid = 0;
                int32_t code = 0, status = 0;
                (void) sd_bus_get_property_string(bus, SYSTEMD_DEST, path, SERVICE_IFACE, "Result", &e, &u->result);
                sd_bus_error_free(&e);
                if (sd_bus_get_property_trivial(bus, SYSTEMD_DEST, path, SERVICE_IFACE, "ExecMainPID", &e, 'u',
                                                &pid) >= 0 && pid) {
                        u->has_main_pid = true;
                        u->main_pid = (int32_t) pid;
                }
                sd_bus_error_free(&e);
                if (sd_bus_get_property_trivial(bus, SYSTEMD_DEST, path, SERVICE_IFACE, "ExecMainCode", &e, 'i',
                                                &code) >= 0 && code) {
                        u->has_exit_code = u->has_exit_status = true;
                        u->exit_code = code;
                        sd_bus_error_free(&e);
                        if (sd_bus_get_property_trivial(bus, SYSTEMD_DEST, path, SERVICE_IFACE, "ExecMainStatus",
                                                        &e, 'i', &status) >= 0)
                                u->exit_status = status;
                }
                sd_bus_error_free(&e);
        }
        return 0;
}

void snapshot_unit_done(Perfetto__Protos__TracedSnapshot__Unit *u) {
        free(u->name);
        free(u->active_state);
        free(u->result);
        free(u->invocation_id);
        free(u->error);
        perfetto__protos__traced_snapshot__unit__init(u);
}
