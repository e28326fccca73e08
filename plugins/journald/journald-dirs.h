/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

#include <stdbool.h>
#include <stddef.h>

/* Where systemd-journald keeps its files: volatile, then persistent. */
#define JOURNALD_RUNTIME_DIR "/run/log/journal"
#define JOURNALD_PERSISTENT_DIR "/var/log/journal"

/* Whether any of the n directories holds an entry (a machine's or a
 * namespace's directory, a file): a cheap look (no inotify watch, no file
 * opened) before sd-journal is opened again. A directory that cannot be
 * read counts as holding something, so that sd-journal says why. */
bool journald_dirs_have_entries(const char *const *dirs, size_t n);
