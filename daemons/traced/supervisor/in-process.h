/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* traced --plugins-in-process: every plugin runs as a thread of traced
 * itself, each still its own producer with its own connection and shared
 * memory buffer, so one process can be debugged as a whole. There is no
 * isolation in this mode: a crashing plugin takes traced down, and traced
 * keeps the privileges the plugins need. */

#include <systemd/sd-event.h>

#include "supervisor/plugins.h"

struct traced_service;
struct in_process;

struct in_process_options {
        const char *dir;
        char *const *disabled;
        unsigned n_disabled;
        struct in_process *state; /* set by in_process_start */
};

/* core_options.started / .stopping with userdata = struct in_process_options. */
int in_process_start(sd_event *event, struct traced_service *svc, void *userdata);
void in_process_stop(void *userdata);
