/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* tracefs: finding (or mounting) it and managing our own instances. All
 * paths are relative to a root so tests can use a fake tree. */

#include <stdbool.h>
#include <stddef.h>

#define TRACEFS_INSTANCE_PREFIX "traced_"

/* Finds tracefs (/sys/kernel/tracing, else debugfs' tracing), mounting it
 * when missing and permitted. Writes the root into ret (size bytes). */
int tracefs_find(char *ret, size_t size);

int tracefs_write(const char *root, const char *rel, const char *value);
/* Appends (for files such as kprobe_events, where a truncating write
 * would clear what others set up). */
int tracefs_append(const char *root, const char *rel, const char *value);
/* Reads a small file into buf (NUL-terminated). */
int tracefs_read(const char *root, const char *rel, char *buf, size_t size);

/* Whether name can be an instance's directory under instances/ (no
 * path of its own: no '/', not "." or ".."). */
bool tracefs_instance_name_valid(const char *name);
/* Creates instances/<name>; fills ret with its root. */
int tracefs_instance_create(const char *root, const char *name, char *ret, size_t size);
int tracefs_instance_remove(const char *root, const char *name);
/* Removes instances of ours left behind by processes that are gone. */
int tracefs_remove_stale_instances(const char *root);
