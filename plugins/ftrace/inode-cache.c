/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* A map per device (there are few) from inode number to a record of the
 * type and path, allocated in one piece. */

#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hashmap.h"
#include "inode-cache.h"

struct cached {
        unsigned type;
        char path[];
};

struct dev_map {
        uint64_t dev;
        struct hashmap inos; /* ino -> struct cached * */
};

struct inode_cache {
        struct dev_map *devs;
        size_t n_devs, cap_devs;
        size_t n, max;
};

int inode_cache_new(size_t max, struct inode_cache **ret) {
        struct inode_cache *c = calloc(1, sizeof(*c));
        if (!c)
                return -ENOMEM;
        c->max = max ? max : 1;
        *ret = c;
        return 0;
}

static void forget_all(struct inode_cache *c) {
        for (size_t i = 0; i < c->n_devs; i++) {
                size_t it = 0;
                uint64_t v;
                while (hashmap_next(&c->devs[i].inos, &it, NULL, &v))
                        free((void *) (uintptr_t) v);
                hashmap_clear(&c->devs[i].inos);
        }
        c->n = 0;
}

void inode_cache_free(struct inode_cache *c) {
        if (!c)
                return;
        forget_all(c);
        free(c->devs);
        free(c);
}

static struct dev_map *dev_map(const struct inode_cache *c, uint64_t dev) {
        for (size_t i = 0; i < c->n_devs; i++)
                if (c->devs[i].dev == dev)
                        return &c->devs[i];
        return NULL;
}

const char *inode_cache_get(const struct inode_cache *c, uint64_t dev, uint64_t ino, unsigned *ret_type) {
        struct dev_map *m = dev_map(c, dev);
        struct cached *e = m ? hashmap_get_ptr(&m->inos, ino) : NULL;
        if (!e)
                return NULL;
        if (ret_type)
                *ret_type = e->type;
        return e->path;
}

int inode_cache_put(struct inode_cache *c, uint64_t dev, uint64_t ino, const char *path, unsigned type) {
        struct dev_map *m = dev_map(c, dev);
        if (!m) {
                if (GREEDY_REALLOC(c->devs, c->cap_devs, c->n_devs + 1) < 0)
                        return -ENOMEM;
                m = &c->devs[c->n_devs++];
                *m = (struct dev_map) { .dev = dev };
        }
        size_t l = strlen(path);
        struct cached *e = malloc(sizeof(*e) + l + 1);
        if (!e)
                return -ENOMEM;
        e->type = type;
        memcpy(e->path, path, l + 1);
        uint64_t old;
        if (hashmap_remove(&m->inos, ino, &old)) {
                free((void *) (uintptr_t) old);
                c->n--;
        } else if (c->n >= c->max)
                forget_all(c);
        int r = hashmap_put_ptr(&m->inos, ino, e);
        if (r < 0) {
                free(e);
                return r;
        }
        c->n++;
        return 0;
}

size_t inode_cache_size(const struct inode_cache *c) {
        return c->n;
}
