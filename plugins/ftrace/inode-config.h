/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* InodeFileConfig (DataSourceConfig.inode_file_config, field 102), with
 * upstream's defaults for the fields left unset or 0. */

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define INODE_DEFAULT_SCAN_INTERVAL_MS 10000u
#define INODE_DEFAULT_SCAN_DELAY_MS 10000u
#define INODE_DEFAULT_SCAN_BATCH_SIZE 15000u
/* Timers take 32-bit milliseconds: a day at most. */
#define INODE_MAX_PERIOD_MS (24u * 3600u * 1000u)

struct inode_mapping {
        char *mountpoint;
        char **scan_roots;
        size_t n_scan_roots;
};

struct inode_config {
        uint32_t scan_interval_ms; /* 1: between two batches of a scan */
        uint32_t scan_delay_ms;    /* 2: from the first inode waiting to the scan */
        uint32_t scan_batch_size;  /* 3: directory entries per batch */
        bool do_not_scan;          /* 4: names from the cache only */
        char **scan_mount_points;  /* 5: when set, only devices mounted on one of these are scanned */
        size_t n_scan_mount_points;
        struct inode_mapping *mapping; /* 6: a device mounted there is scanned in scan_roots instead */
        size_t n_mapping;
};

/* Parses the DataSourceConfig's bytes (no field 102: the defaults).
 * -EINVAL (with the field at fault in *ret_field) for an InodeFileConfig
 * that is not one, -ENOMEM. */
int inode_config_parse(const uint8_t *ds_config, size_t size, struct inode_config *ret, const char **ret_field);
void inode_config_done(struct inode_config *c);
