/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Per device: the pairs seen, those waiting for the next scan (wanted),
 * those the running scan looks for (scanning), the mount points, and the
 * InodeFileMap entries not yet written. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hashmap.h"
#include "basic/pb-buf.h"
#include "inode-mounts.h"
#include "inode-resolve.h"
#include "inode-scan.h"
#include "traced/pbzero/perfetto/trace/trace_packet.pbw.h"

/* A device's entries go out once they reach this size, without waiting
 * for the end of the drain or batch. */
#define PACKET_FLUSH_BYTES (64u * 1024u)

struct inode_dev {
        uint64_t dev;
        struct hashmap seen, wanted, scanning;
        char **mounts;
        size_t n_mounts;
        bool scan_allowed;
        struct pb_buf entries; /* InodeFileMap.entries, serialized */
};

struct inode_resolver {
        struct inode_config cfg;
        struct inode_cache *cache;
        char *mountinfo;
        inode_packet_fn fn;
        void *userdata;
        struct inode_dev *devs;
        size_t n_devs, cap_devs;
        struct inode_dev *last; /* of the last note: events come in runs */
        size_t n_wanted, n_scanning;
        struct inode_scan *scan;
        struct pb_buf packet;
        struct inode_resolver_stats stats;
};

int inode_resolver_new(struct inode_config *cfg, struct inode_cache *cache, const char *mountinfo, inode_packet_fn fn,
                       void *userdata, struct inode_resolver **ret) {
        struct inode_resolver *r = calloc(1, sizeof(*r));
        if (!r)
                return -ENOMEM;
        r->mountinfo = strdup(mountinfo);
        if (!r->mountinfo) {
                free(r);
                return -ENOMEM;
        }
        r->cfg = *cfg;
        *cfg = (struct inode_config) {};
        r->cache = cache;
        r->fn = fn;
        r->userdata = userdata;
        *ret = r;
        return 0;
}

void inode_resolver_free(struct inode_resolver *r) {
        if (!r)
                return;
        inode_scan_free(r->scan);
        for (size_t i = 0; i < r->n_devs; i++) {
                struct inode_dev *d = &r->devs[i];
                hashmap_clear(&d->seen);
                hashmap_clear(&d->wanted);
                hashmap_clear(&d->scanning);
                inode_mounts_free(d->mounts, d->n_mounts);
                pb_buf_done(&d->entries);
        }
        free(r->devs);
        pb_buf_done(&r->packet);
        inode_config_done(&r->cfg);
        free(r->mountinfo);
        free(r);
}

const struct inode_config *inode_resolver_config(const struct inode_resolver *r) {
        return &r->cfg;
}

const struct inode_resolver_stats *inode_resolver_stats(const struct inode_resolver *r) {
        return &r->stats;
}

static struct inode_dev *dev_find(struct inode_resolver *r, uint64_t dev) {
        if (r->last && r->last->dev == dev)
                return r->last;
        for (size_t i = 0; i < r->n_devs; i++)
                if (r->devs[i].dev == dev)
                        return r->last = &r->devs[i];
        return NULL;
}

static bool scan_allowed(const struct inode_resolver *r, const struct inode_dev *d) {
        if (r->cfg.do_not_scan)
                return false;
        if (r->cfg.n_scan_mount_points == 0)
                return true;
        for (size_t i = 0; i < d->n_mounts; i++)
                for (size_t k = 0; k < r->cfg.n_scan_mount_points; k++)
                        if (strcmp(d->mounts[i], r->cfg.scan_mount_points[k]) == 0)
                                return true;
        return false;
}

static struct inode_dev *dev_get(struct inode_resolver *r, uint64_t dev) {
        struct inode_dev *d = dev_find(r, dev);
        if (d)
                return d;
        r->last = NULL; /* the array may move */
        if (GREEDY_REALLOC(r->devs, r->cap_devs, r->n_devs + 1) < 0)
                return NULL;
        d = &r->devs[r->n_devs++];
        *d = (struct inode_dev) { .dev = dev };
        /* Not mounted (or no mountinfo): no mount points, nowhere to scan. */
        if (inode_mounts_of(r->mountinfo, dev, &d->mounts, &d->n_mounts) < 0)
                d->n_mounts = 0;
        d->scan_allowed = scan_allowed(r, d);
        return r->last = d;
}

static void emit_dev(struct inode_resolver *r, struct inode_dev *d) {
        if (pb_buf_len(&d->entries) == 0)
                return;
        TracePacket pkt;
        InodeFileMap map;
        pb_buf_reset(&r->packet);
        TracePacket_init(&pkt, pb_buf_stream(&r->packet));
        TracePacket_begin_inode_file_map(&pkt, &map);
        InodeFileMap_set_block_device_id(&map, d->dev);
        for (size_t i = 0; i < d->n_mounts; i++)
                InodeFileMap_add_mount_points(&map, d->mounts[i]);
        traced_pb_msg_append_raw(&map.msg, pb_buf_data(&d->entries), pb_buf_len(&d->entries));
        TracePacket_end_inode_file_map(&pkt, &map);
        if (traced_pb_msg_finish(&pkt.msg) >= 0 && pb_buf_error(&d->entries) == 0)
                r->fn(pb_buf_data(&r->packet), pb_buf_len(&r->packet), r->userdata);
        pb_buf_reset(&d->entries);
}

static void add_entry(struct inode_resolver *r, struct inode_dev *d, uint64_t ino, const char *path,
                      InodeFileMap_Entry_Type type) {
        /* The entries are InodeFileMap fields, appended to what is there. */
        InodeFileMap map;
        InodeFileMap_Entry e;
        InodeFileMap_init(&map, pb_buf_stream(&d->entries));
        InodeFileMap_begin_entries(&map, &e);
        InodeFileMap_Entry_set_inode_number(&e, ino);
        InodeFileMap_Entry_add_paths(&e, path);
        InodeFileMap_Entry_set_type(&e, type);
        InodeFileMap_end_entries(&map, &e);
        if (pb_buf_len(&d->entries) >= PACKET_FLUSH_BYTES)
                emit_dev(r, d);
}

void inode_resolver_note(struct inode_resolver *r, uint64_t dev, uint64_t ino) {
        struct inode_dev *d = dev_get(r, dev);
        if (!d || hashmap_get(&d->seen, ino, NULL))
                return;
        if (r->stats.seen >= INODE_MAX_SEEN || hashmap_put(&d->seen, ino, 1) < 0) {
                r->stats.dropped++;
                return;
        }
        r->stats.seen++;
        unsigned type;
        const char *path = inode_cache_get(r->cache, dev, ino, &type);
        if (path) {
                r->stats.from_cache++;
                add_entry(r, d, ino, path, type);
        } else if (!d->scan_allowed)
                r->stats.not_scanned++;
        else if (hashmap_put(&d->wanted, ino, 1) > 0)
                r->n_wanted++;
}

void inode_resolver_emit(struct inode_resolver *r) {
        for (size_t i = 0; i < r->n_devs; i++)
                emit_dev(r, &r->devs[i]);
}

bool inode_resolver_scan_wanted(const struct inode_resolver *r) {
        return !r->scan && r->n_wanted > 0;
}

static bool on_entry(uint64_t dev, uint64_t ino, const char *path, unsigned type, void *userdata) {
        struct inode_resolver *r = userdata;
        struct inode_dev *d = dev_find(r, dev);
        if (!d)
                return true;
        if (hashmap_remove(&d->scanning, ino, NULL))
                r->n_scanning--;
        else if (hashmap_remove(&d->wanted, ino, NULL))
                r->n_wanted--; /* seen since the scan started: found all the same */
        else
                return true;
        r->stats.found++;
        (void) inode_cache_put(r->cache, dev, ino, path, type); /* without it, only a later session misses out */
        add_entry(r, d, ino, path, type);
        return r->n_scanning > 0;
}

/* Adds s to roots unless it is there. */
static int root_add(const char ***roots, size_t *n, size_t *cap, const char *s) {
        for (size_t i = 0; i < *n; i++)
                if (strcmp((*roots)[i], s) == 0)
                        return 0;
        if (GREEDY_REALLOC(*roots, *cap, *n + 1) < 0)
                return -ENOMEM;
        (*roots)[(*n)++] = s;
        return 0;
}

/* Where a device is scanned: the scan_roots of the first of its mount
 * points that mount_point_mapping names, else its mount points. */
static int dev_roots(const struct inode_resolver *r, const struct inode_dev *d, const char ***roots, size_t *n,
                     size_t *cap) {
        for (size_t i = 0; i < d->n_mounts; i++)
                for (size_t k = 0; k < r->cfg.n_mapping; k++) {
                        const struct inode_mapping *m = &r->cfg.mapping[k];
                        if (strcmp(m->mountpoint, d->mounts[i]) != 0)
                                continue;
                        for (size_t j = 0; j < m->n_scan_roots; j++)
                                if (root_add(roots, n, cap, m->scan_roots[j]) < 0)
                                        return -ENOMEM;
                        return 0;
                }
        for (size_t i = 0; i < d->n_mounts; i++)
                if (root_add(roots, n, cap, d->mounts[i]) < 0)
                        return -ENOMEM;
        return 0;
}

/* The pairs waiting become the ones looked for, and the walk is set up
 * over the directories of their devices. false when there is nothing to
 * walk. */
static bool scan_start(struct inode_resolver *r) {
        const char **roots = NULL;
        size_t n = 0, cap = 0;
        for (size_t i = 0; i < r->n_devs; i++) {
                struct inode_dev *d = &r->devs[i];
                if (hashmap_size(&d->wanted) == 0)
                        continue;
                hashmap_clear(&d->scanning);
                d->scanning = d->wanted;
                d->wanted = (struct hashmap) {};
                r->n_scanning += hashmap_size(&d->scanning);
                if (dev_roots(r, d, &roots, &n, &cap) < 0)
                        break;
        }
        r->n_wanted = 0;
        r->stats.scans++;
        if (n > 0 && inode_scan_new(roots, n, &r->scan) < 0)
                r->scan = NULL;
        free(roots);
        return r->scan != NULL;
}

static void scan_end(struct inode_resolver *r) {
        if (r->scan)
                r->stats.entries_walked += inode_scan_entries(r->scan);
        inode_scan_free(r->scan);
        r->scan = NULL;
        for (size_t i = 0; i < r->n_devs; i++) {
                r->stats.not_found += hashmap_size(&r->devs[i].scanning);
                hashmap_clear(&r->devs[i].scanning);
        }
        r->n_scanning = 0;
}

int inode_resolver_scan_step(struct inode_resolver *r) {
        if (!r->scan && !scan_start(r)) {
                scan_end(r);
                return 0;
        }
        int k = inode_scan_step(r->scan, r->cfg.scan_batch_size, on_entry, r);
        if (k <= 0 || r->n_scanning == 0)
                scan_end(r);
        inode_resolver_emit(r);
        return r->scan ? 1 : 0;
}
