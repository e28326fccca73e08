/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "basic/pbr.h"
#include "inode-config.h"

static void strv_free(char **v, size_t n) {
        for (size_t i = 0; i < n; i++)
                free(v[i]);
        free(v);
}

void inode_config_done(struct inode_config *c) {
        strv_free(c->scan_mount_points, c->n_scan_mount_points);
        for (size_t i = 0; i < c->n_mapping; i++) {
                free(c->mapping[i].mountpoint);
                strv_free(c->mapping[i].scan_roots, c->mapping[i].n_scan_roots);
        }
        free(c->mapping);
        *c = (struct inode_config) {};
}

/* Appends a copy of the string field f to *v; -EINVAL for an empty one or
 * one holding a NUL. */
static int strv_add(char ***v, size_t *n, const struct pbr_field *f) {
        if (f->wire_type != 2 || f->len == 0 || memchr(f->data, '\0', f->len))
                return -EINVAL;
        char *s = strndup((const char *) f->data, f->len);
        if (!s)
                return -ENOMEM;
        char **a = realloc(*v, (*n + 1) * sizeof(**v));
        if (!a) {
                free(s);
                return -ENOMEM;
        }
        a[(*n)++] = s;
        *v = a;
        return 0;
}

/* A MountPointMappingEntry; its mountpoint is required (the last one
 * counts, as for any optional field). */
static int parse_mapping(const struct pbr_field *f, struct inode_config *c) {
        if (f->wire_type != 2)
                return -EINVAL;
        struct inode_mapping *a = realloc(c->mapping, (c->n_mapping + 1) * sizeof(*a));
        if (!a)
                return -ENOMEM;
        c->mapping = a;
        struct inode_mapping *m = &c->mapping[c->n_mapping++];
        *m = (struct inode_mapping) {};
        struct pbr_field g;
        size_t pos = 0;
        int k;
        while ((k = pbr_next(f->data, f->len, &pos, &g)) > 0) {
                int r = 0;
                if (g.number == 1) {
                        if (g.wire_type != 2 || g.len == 0 || memchr(g.data, '\0', g.len))
                                return -EINVAL;
                        free(m->mountpoint);
                        if (!(m->mountpoint = strndup((const char *) g.data, g.len)))
                                return -ENOMEM;
                } else if (g.number == 2)
                        r = strv_add(&m->scan_roots, &m->n_scan_roots, &g);
                if (r < 0)
                        return r;
        }
        return k < 0 || !m->mountpoint ? -EINVAL : 0;
}

static uint32_t period(uint64_t v, uint32_t def) {
        return v == 0 ? def : (uint32_t) MIN(v, (uint64_t) INODE_MAX_PERIOD_MS);
}

int inode_config_parse(const uint8_t *ds_config, size_t size, struct inode_config *ret, const char **ret_field) {
        struct inode_config c = {
                .scan_interval_ms = INODE_DEFAULT_SCAN_INTERVAL_MS,
                .scan_delay_ms = INODE_DEFAULT_SCAN_DELAY_MS,
                .scan_batch_size = INODE_DEFAULT_SCAN_BATCH_SIZE,
        };
        struct pbr_field fc, f;
        *ret_field = NULL;
        if (!pbr_get(ds_config, size, 102, true, &fc) || fc.wire_type != 2) {
                *ret = c;
                return 0;
        }
        size_t pos = 0;
        int k, r = 0;
        while (r >= 0 && (k = pbr_next(fc.data, fc.len, &pos, &f)) > 0) {
                switch (f.number) {
                case 1:
                        c.scan_interval_ms = period(f.varint, INODE_DEFAULT_SCAN_INTERVAL_MS);
                        break;
                case 2:
                        c.scan_delay_ms = period(f.varint, INODE_DEFAULT_SCAN_DELAY_MS);
                        break;
                case 3:
                        c.scan_batch_size = f.varint == 0 ? INODE_DEFAULT_SCAN_BATCH_SIZE
                                                          : (uint32_t) MIN(f.varint, (uint64_t) UINT32_MAX);
                        break;
                case 4:
                        c.do_not_scan = f.varint != 0;
                        break;
                case 5:
                        r = strv_add(&c.scan_mount_points, &c.n_scan_mount_points, &f);
                        if (r == -EINVAL)
                                *ret_field = "scan_mount_points";
                        break;
                case 6:
                        r = parse_mapping(&f, &c);
                        if (r == -EINVAL)
                                *ret_field = "mount_point_mapping";
                        break;
                }
        }
        if (r >= 0 && k < 0) {
                r = -EINVAL;
                *ret_field = "inode_file_config";
        }
        if (r < 0) {
                inode_config_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}
