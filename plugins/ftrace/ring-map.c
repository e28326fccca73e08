/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stddef.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "basic/macro.h"
#include "ring-map.h"

/* The meta page must at least reach the end of the reader's fields. */
#define META_MIN_LEN (offsetof(struct ring_map_meta, reader) + sizeof(((struct ring_map_meta *) 0)->reader))

/* Total bytes of a mapping with this layout, 0 if the layout is not one
 * this reader can walk. */
static size_t layout_len(uint32_t meta_page_size, uint32_t meta_struct_len, uint32_t subbuf_size, uint32_t nr_subbufs) {
        if (meta_struct_len < META_MIN_LEN || meta_page_size < meta_struct_len)
                return 0;
        if (subbuf_size <= PAGE_HEADER_SIZE || nr_subbufs < 2)
                return 0;
        if ((size_t) nr_subbufs > (SIZE_MAX - meta_page_size) / subbuf_size)
                return 0;
        return meta_page_size + (size_t) nr_subbufs * subbuf_size;
}

int ring_map_attach(struct ring_map *m, void *base, size_t len) {
        const struct ring_map_meta *meta = base;
        if (len < sizeof(*meta))
                return -EPROTO;
        size_t need = layout_len(meta->meta_page_size, meta->meta_struct_len, meta->subbuf_size, meta->nr_subbufs);
        if (need == 0 || need > len)
                return -EPROTO;
        uint32_t id = __atomic_load_n(&meta->reader.id, __ATOMIC_ACQUIRE);
        uint32_t read = __atomic_load_n(&meta->reader.read, __ATOMIC_RELAXED);
        if (id >= meta->nr_subbufs || read > meta->subbuf_size - PAGE_HEADER_SIZE)
                return -EPROTO;
        *m = (struct ring_map) {
                .fd = -EBADF,
                .base = base,
                .len = len,
                .subbuf_size = meta->subbuf_size,
                .nr_subbufs = meta->nr_subbufs,
                .meta_page_size = meta->meta_page_size,
                /* What the kernel counts as read in the reader it has now
                 * was consumed before us (by read(), or not at all when it
                 * was just cleared). */
                .id = id,
                .pos = read,
        };
        return 0;
}

int ring_map_open(struct ring_map *m, int fd) {
        size_t page = (size_t) sysconf(_SC_PAGESIZE);
        /* The meta page alone first, for the sizes; then all of it. */
        void *p = mmap(NULL, page, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        struct ring_map_meta meta;
        memcpy(&meta, p, sizeof(meta));
        (void) munmap(p, page);
        size_t len = layout_len(meta.meta_page_size, meta.meta_struct_len, meta.subbuf_size, meta.nr_subbufs);
        if (len == 0)
                return -EPROTO;
        p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return negative_errno();
        int r = ring_map_attach(m, p, len);
        if (r < 0) {
                (void) munmap(p, len);
                return r;
        }
        m->fd = fd;
        m->mapped = true;
        return 0;
}

void ring_map_close(struct ring_map *m) {
        if (m->mapped)
                (void) munmap(m->base, m->len);
        *m = (struct ring_map) { .fd = -EBADF };
}

int ring_map_get_reader(struct ring_map *m) {
        return ioctl(m->fd, RING_MAP_IOCTL_GET_READER) < 0 ? negative_errno() : 0;
}

int ring_map_parse(struct ring_map *m, page_record_fn fn, void *userdata, struct ring_map_read *ret) {
        const struct ring_map_meta *meta = (const struct ring_map_meta *) m->base;
        *ret = (struct ring_map_read) { .info.status = PAGE_STATUS_OK };
        uint32_t id = __atomic_load_n(&meta->reader.id, __ATOMIC_ACQUIRE);
        if (id >= m->nr_subbufs) {
                ret->info.status = PAGE_STATUS_INVALID_PAGE_HEADER;
                return -EBADMSG;
        }
        const uint8_t *sub = m->base + m->meta_page_size + (size_t) id * m->subbuf_size;
        /* The commit (the header's second word, aligned) is read once: the
         * records below the length it gives are complete, whatever the
         * writer appends meanwhile. */
        uint64_t commit = __atomic_load_n((const uint64_t *) (const void *) (sub + 8), __ATOMIC_ACQUIRE);
        size_t len = (size_t) (commit & ~(PAGE_COMMIT_MISSED_EVENTS | PAGE_COMMIT_MISSED_STORED) & 0xffffffffull);
        bool fresh = id != m->id;
        /* The same sub-buffer with less in it: it went round the ring and
         * came back (only when another reader consumes this buffer too). */
        if (!fresh && len < m->pos)
                fresh = true;
        if (fresh) {
                m->id = id;
                m->pos = 0;
        } else if (len == m->pos)
                return 0;
        size_t from = m->pos;
        int r = page_parse_range(sub, m->subbuf_size, from, len, fn, userdata, &ret->info);
        ret->new_subbuf = fresh;
        if (fresh) {
                ret->lost = ret->info.lost_events ? ret->info.lost_events : (uint64_t) ret->info.missed;
                if (ret->lost == 0)
                        ret->lost = __atomic_load_n(&meta->reader.lost_events, __ATOMIC_RELAXED);
        }
        if (r < 0) {
                /* Not again, unless it grows: the next sub-buffer is the
                 * next chance. */
                m->pos = (uint32_t) len;
                return r;
        }
        m->pos = (uint32_t) ret->info.data_len;
        return ret->info.data_len > from || ret->lost ? 1 : 0;
}
