/* SPDX-License-Identifier: LGPL-2.1-or-later */
#pragma once

/* linux.systemd_journald's config (SystemdJournaldConfig inside the
 * DataSourceConfig) and the sd-journal matches it makes. */

#include <stddef.h>
#include <stdint.h>

#define JOURNALD_MAX_FILTERS 64   /* identifiers, and units, each */
#define JOURNALD_MAX_FILTER_LEN 255
#define JOURNALD_MAX_LOOKBACK_MS (7u * 24 * 3600 * 1000)

struct journald_config {
        /* Most verbose priority kept, 0..7; 7 keeps every entry. */
        uint32_t min_prio;
        char **identifiers;
        size_t n_identifiers;
        char **units;
        size_t n_units;
        uint32_t lookback_ms;
        char *journal_namespace; /* NULL: the default journal */
};

/* Parses a serialized DataSourceConfig. Returns 0, -ENOMEM, or -EINVAL
 * with the offending field (under journald_config.) described in err. */
int journald_config_parse(const uint8_t *config, size_t size, struct journald_config *ret, char *err,
                          size_t err_size);
void journald_config_done(struct journald_config *c);

/*
 * The matches to give sd_journal_add_match, in order, "FIELD=value" each:
 * sd-journal ORs the matches of one field and ANDs different fields, so
 * the list keeps entries whose PRIORITY is at most min_prio, whose
 * SYSLOG_IDENTIFIER is one of the identifiers and whose _SYSTEMD_UNIT is
 * one of the units (each only when asked). Returns 0 and a NULL-terminated
 * array (free with journald_matches_free; empty when nothing is filtered),
 * or -ENOMEM.
 */
int journald_config_matches(const struct journald_config *c, char ***ret, size_t *ret_n);
void journald_matches_free(char **m);
