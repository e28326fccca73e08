/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config-error.h"
#include "basic/alloc.h"
#include "journald-config.h"
#include "basic/pbr.h"
#include "perfetto/config/linux/journald_config.pb-c.h"

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

/* Copies a repeated string field, checked: non-empty, short, no newline
 * (a match is one "FIELD=value" line of the journal). */
static int copy_filters(char *const *in, size_t n, const char *field, char ***ret, size_t *ret_n, char *err,
                        size_t err_size) {
        if (n > JOURNALD_MAX_FILTERS)
                return config_error(err, err_size, "%s: %zu values, at most %d", field, n, JOURNALD_MAX_FILTERS);
        for (size_t i = 0; i < n; i++) {
                size_t len = strlen(in[i]);
                if (len == 0 || len > JOURNALD_MAX_FILTER_LEN || strchr(in[i], '\n'))
                        return config_error(err, err_size, "%s: \"%s\" is not a value (1 to %d bytes, no newline)", field,
                                    in[i], JOURNALD_MAX_FILTER_LEN);
        }
        char **v = calloc(n + 1, sizeof(*v));
        if (!v)
                return -ENOMEM;
        for (size_t i = 0; i < n; i++)
                if (!(v[i] = strdup(in[i]))) {
                        strv_free(v, i);
                        return -ENOMEM;
                }
        *ret = v;
        *ret_n = n;
        return 0;
}

/* DataSourceConfig.journald_config */
#define DATA_SOURCE_CONFIG_JOURNALD_CONFIG 141

int journald_config_parse(const uint8_t *config, size_t size, struct journald_config *ret, char *err,
                          size_t err_size) {
        *ret = (struct journald_config) { .min_prio = 7 };
        /* Only journald_config (141) of the DataSourceConfig is decoded
         * with generated code: unpacking the whole message would link the
         * descriptors of every data source's config into the plugin, 100
         * KiB of pointers relocated into private memory at each load. Its
         * occurrences are concatenated, which decodes as their merge, as
         * the whole message's unpack would have merged them. */
        struct pbr_field f;
        size_t pos = 0, n = 0;
        int k;
        _cleanup_free_ uint8_t *jbuf = NULL;
        while ((k = pbr_next(config, size, &pos, &f)) > 0) {
                if (f.number != DATA_SOURCE_CONFIG_JOURNALD_CONFIG)
                        continue;
                if (f.wire_type != 2)
                        return config_error(err, err_size, "DataSourceConfig does not decode");
                uint8_t *b = realloc(jbuf, n + f.len + 1);
                if (!b)
                        return -ENOMEM;
                jbuf = b;
                memcpy(jbuf + n, f.data, f.len);
                n += f.len;
        }
        if (k < 0)
                return config_error(err, err_size, "DataSourceConfig does not decode");
        if (!jbuf)
                return 0;
        Perfetto__Protos__SystemdJournaldConfig *jc = perfetto__protos__systemd_journald_config__unpack(NULL, n, jbuf);
        if (!jc)
                return config_error(err, err_size, "journald_config does not decode");
        int r = 0;
        if (jc->has_min_prio && jc->min_prio > 7) {
                r = config_error(err, err_size, "min_prio: %u is not a syslog priority (0 emerg .. 7 debug)", jc->min_prio);
                goto out;
        }
        if (jc->has_min_prio && jc->min_prio > 0)
                ret->min_prio = jc->min_prio;
        if (jc->has_lookback_ms && jc->lookback_ms > JOURNALD_MAX_LOOKBACK_MS) {
                r = config_error(err, err_size, "lookback_ms: %u is more than a week (%u)", jc->lookback_ms,
                         JOURNALD_MAX_LOOKBACK_MS);
                goto out;
        }
        ret->lookback_ms = jc->lookback_ms;
        if (jc->journal_namespace && jc->journal_namespace[0]) {
                if (strlen(jc->journal_namespace) > JOURNALD_MAX_FILTER_LEN || strchr(jc->journal_namespace, '/')) {
                        r = config_error(err, err_size, "journal_namespace: \"%s\" is not a namespace name",
                                 jc->journal_namespace);
                        goto out;
                }
                if (!(ret->journal_namespace = strdup(jc->journal_namespace))) {
                        r = -ENOMEM;
                        goto out;
                }
        }
        r = copy_filters(jc->filter_identifiers, jc->n_filter_identifiers, "filter_identifiers", &ret->identifiers,
                         &ret->n_identifiers, err, err_size);
        if (r >= 0)
                r = copy_filters(jc->filter_units, jc->n_filter_units, "filter_units", &ret->units, &ret->n_units,
                                 err, err_size);
out:
        perfetto__protos__systemd_journald_config__free_unpacked(jc, NULL);
        if (r < 0)
                journald_config_done(ret);
        return r;
}

void journald_config_done(struct journald_config *c) {
        strv_free(c->identifiers, c->n_identifiers);
        strv_free(c->units, c->n_units);
        free(c->journal_namespace);
        *c = (struct journald_config) { .min_prio = 7 };
}

void journald_matches_free(char **m) {
        for (size_t i = 0; m && m[i]; i++)
                free(m[i]);
        free(m);
}

static int add(char ***m, size_t *n, size_t *cap, const char *field, const char *value) {
        if (GREEDY_REALLOC(*m, *cap, *n + 2) < 0)
                return -ENOMEM;
        char *match;
        if (asprintf(&match, "%s=%s", field, value) < 0)
                return -ENOMEM;
        (*m)[(*n)++] = match;
        (*m)[*n] = NULL;
        return 0;
}

int journald_config_matches(const struct journald_config *c, char ***ret, size_t *ret_n) {
        char **m = NULL;
        size_t n = 0, cap = 0;
        int r = GREEDY_REALLOC(m, cap, 1);
        if (r < 0)
                return r;
        m[0] = NULL;
        /* 7 (debug) keeps everything, entries with no PRIORITY field too. */
        for (uint32_t p = 0; c->min_prio < 7 && p <= c->min_prio && r >= 0; p++) {
                char v[4];
                snprintf(v, sizeof(v), "%u", p);
                r = add(&m, &n, &cap, "PRIORITY", v);
        }
        for (size_t i = 0; i < c->n_identifiers && r >= 0; i++)
                r = add(&m, &n, &cap, "SYSLOG_IDENTIFIER", c->identifiers[i]);
        for (size_t i = 0; i < c->n_units && r >= 0; i++)
                r = add(&m, &n, &cap, "_SYSTEMD_UNIT", c->units[i]);
        if (r < 0) {
                journald_matches_free(m);
                return r;
        }
        *ret = m;
        *ret_n = n;
        return 0;
}
