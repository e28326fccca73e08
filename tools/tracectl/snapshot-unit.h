/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* What systemd says of a unit that failed, for `tracectl snapshot
 * --unit` (traced-snapshot@.service): asked over the system bus. */

#include "perfetto/trace/traced_snapshot.pb-c.h"

/* Fills u (initialised by the caller; strings malloc'ed, freed with
 * snapshot_unit_done). A unit systemd cannot be asked about still gets
 * its name, and u->error says why: 0 either way, -ENOMEM only. */
int snapshot_unit_query(const char *unit, Perfetto__Protos__TracedSnapshot__Unit *u);
void snapshot_unit_done(Perfetto__Protos__TracedSnapshot__Unit *u);
