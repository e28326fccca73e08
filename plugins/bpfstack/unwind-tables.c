/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <time.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "basic/alloc.h"
#include "bpfstack.h"
#include "profiling/cfi-table.h"
#include "profiling/elf-image.h"
#include "unwind-tables.h"

/* A file's table: rows [first, first + n) of the array; n 0 when the file
 * has none we can use (remembered, so it is not compiled again). */
struct image_table {
        uint64_t dev, inode;
        uint32_t first, n;
        uint32_t first_page, n_pages;
};

struct unwind_tables {
        int rows_fd, procs_fd;
        struct bpfstack_row *rows; /* the array, mapped */
        size_t map_len;
        uint32_t n_rows, used;
        struct bpfstack_page *pages; /* the page indexes, mapped */
        size_t pages_len;
        uint32_t n_pages, pages_used;
        struct symbolizer *sym;
        struct image_table *img;
        size_t n_img, cap_img;
        int *pids; /* entries we wrote since the last reset */
        size_t n_pids, cap_pids;
        struct bpfstack_uproc entry; /* 4 KiB: not on the stack */
        struct unwind_stats st;
};

/* A BPF array of n elements of size bytes, mapped. */
static void *map_array(int fd, size_t n, size_t size, size_t *ret_len) {
        long page = sysconf(_SC_PAGESIZE);
        size_t len = n * size;
        len = (len + (size_t) page - 1) / (size_t) page * (size_t) page;
        void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
        if (p == MAP_FAILED)
                return NULL;
        *ret_len = len;
        return p;
}

int unwind_tables_new(int rows_fd, uint32_t n_rows, int pages_fd, uint32_t n_pages, int procs_fd,
                      struct symbolizer *sym, struct unwind_tables **ret) {
        struct unwind_tables *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        t->rows = map_array(rows_fd, n_rows, sizeof(struct bpfstack_row), &t->map_len);
        t->pages = t->rows ? map_array(pages_fd, n_pages, sizeof(struct bpfstack_page), &t->pages_len) : NULL;
        if (!t->pages) {
                int r = -errno;
                if (t->rows)
                        munmap(t->rows, t->map_len);
                free(t);
                return r;
        }
        t->n_pages = n_pages;
        t->rows_fd = rows_fd;
        t->procs_fd = procs_fd;
        t->n_rows = n_rows;
        t->sym = sym;
        t->st.rows_max = n_rows;
        *ret = t;
        return 0;
}

void unwind_tables_free(struct unwind_tables *t) {
        if (!t)
                return;
        munmap(t->rows, t->map_len);
        munmap(t->pages, t->pages_len);
        free(t->img);
        free(t->pids);
        free(t);
}

void unwind_tables_stats(const struct unwind_tables *t, struct unwind_stats *ret) {
        *ret = t->st;
        ret->rows = t->used;
        uint64_t n = 0;
        for (size_t k = 0; k < t->n_img; k++)
                n += t->img[k].n > 0;
        ret->images = n;
}

/* Whether pid has an entry written by us since the last reset. */
static bool known(const struct unwind_tables *t, int pid) {
        for (size_t k = 0; k < t->n_pids; k++)
                if (t->pids[k] == pid)
                        return true;
        return false;
}

static int remember_pid(struct unwind_tables *t, int pid) {
        if (known(t, pid))
                return 0;
        if (GREEDY_REALLOC_MIN(t->pids, t->cap_pids, t->n_pids + 1, 64) < 0)
                return -ENOMEM;
        t->pids[t->n_pids++] = pid;
        return 0;
}

/* The array is full: every table goes, and with them every entry that
 * points into it. */
static void reset(struct unwind_tables *t) {
        for (size_t k = 0; k < t->n_pids; k++) {
                uint32_t key = (uint32_t) t->pids[k];
                (void) bpf_map_delete_elem(t->procs_fd, &key);
        }
        t->n_pids = 0;
        t->n_img = 0;
        t->used = 0;
        t->pages_used = 0;
        t->st.resets++;
}

/* One row of the compact CFI in the walker's form. */
static struct bpfstack_row convert(const struct cfi_row *c) {
        struct bpfstack_row r = { .pc = (uint32_t) c->start };
        if (c->flags & CFI_NONE)
                r.kind = BPFSTACK_ROW_NONE;
        else if (c->flags & CFI_REFUSED)
                r.kind = BPFSTACK_ROW_REFUSED;
        else if (c->flags & CFI_OUTERMOST)
                r.kind = BPFSTACK_ROW_OUTERMOST;
        else if (c->ra_off != -8 || c->cfa_off < INT16_MIN || c->cfa_off > INT16_MAX)
                r.kind = BPFSTACK_ROW_REFUSED;
        else {
                r.kind = c->cfa_reg == CFI_CFA_SP ? BPFSTACK_ROW_CFA_SP : BPFSTACK_ROW_CFA_BP;
                r.cfa_off = (int16_t) c->cfa_off;
                if (c->flags & CFI_BP_SAVED) {
                        if (c->bp_off % 8 == 0 && c->bp_off / 8 >= INT8_MIN && c->bp_off / 8 <= INT8_MAX) {
                                r.kind |= BPFSTACK_ROW_BP_SAVED;
                                r.bp_off8 = (int8_t) (c->bp_off / 8);
                        } else
                                r.kind |= BPFSTACK_ROW_BP_LOST;
                } else if (c->flags & CFI_BP_LOST)
                        r.kind |= BPFSTACK_ROW_BP_LOST;
        }
        return r;
}

static uint64_t now_us(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

/* The vDSO: the kernel maps the same image into every process, ours too,
 * so its tables come from our own copy. Its size: up to the end of its
 * section headers, which come last. */
static const uint8_t *own_vdso(size_t *ret_size) {
        const Elf64_Ehdr *eh = (const Elf64_Ehdr *) getauxval(AT_SYSINFO_EHDR);
        if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) != 0 || eh->e_ident[EI_CLASS] != ELFCLASS64)
                return NULL;
        *ret_size = (size_t) eh->e_shoff + (size_t) eh->e_shnum * eh->e_shentsize;
        return (const uint8_t *) eh;
}

/* Compiles the image data/size into the array at t->used. 0 and the run,
 * or a negative errno (-ENOSPC: the array has no room left for it). */
static int compile_into(struct unwind_tables *t, const uint8_t *data, size_t size, struct image_table *ret) {
        if (!data)
                return -ENODATA;
        size_t room = t->n_rows - t->used;
        struct cfi_row *rows = NULL;
        size_t n = 0;
        uint64_t t0 = now_us();
        int r = cfi_table_compile(data, size, t->n_rows, &rows, &n);
        t->st.compile_us += now_us() - t0;
        if (r < 0)
                return r;
        if (n == 0 || rows[n - 1].start > UINT32_MAX) {
                free(rows);
                return -ERANGE; /* addresses past 4 GiB do not fit a row */
        }
        /* Converted and merged again: rows libdw tells apart (a different
         * saved register, say) may read the same to the walker. */
        size_t out = 0;
        for (size_t k = 0; k < n; k++) {
                struct bpfstack_row b = convert(&rows[k]);
                if (out > 0) {
                        const struct bpfstack_row *last = &t->rows[t->used + out - 1];
                        if (last->kind == b.kind && last->cfa_off == b.cfa_off && last->bp_off8 == b.bp_off8)
                                continue;
                }
                if (out == room) {
                        free(rows);
                        return -ENOSPC;
                }
                t->rows[t->used + out++] = b;
        }
        free(rows);
        /* The page index: for each page from the first row's, the rows in
         * force from its start to its end. The closing row has no end:
         * pages stop at its start. */
        const struct bpfstack_row *v = &t->rows[t->used];
        uint32_t base = v[0].pc & ~(BPFSTACK_PAGE - 1);
        uint32_t n_pages = ((v[out - 1].pc - base) >> BPFSTACK_PAGE_SHIFT) + 1;
        if (n_pages > t->n_pages - t->pages_used)
                return -ENOSPC;
        struct bpfstack_page *pg = &t->pages[t->pages_used];
        size_t k = 0; /* the row in force at the page's start (row 0 below the first row: the walker checks) */
        for (uint32_t p = 0; p < n_pages; p++) {
                uint64_t at = (uint64_t) base + ((uint64_t) p << BPFSTACK_PAGE_SHIFT);
                uint64_t end = at + BPFSTACK_PAGE;
                while (k + 1 < out && v[k + 1].pc <= at)
                        k++;
                size_t last = k; /* the last row starting in the page */
                while (last + 1 < out && v[last + 1].pc < end)
                        last++;
                pg[p] = (struct bpfstack_page) { .lo = (uint32_t) k, .hi = (uint32_t) last + 1 };
        }
        *ret = (struct image_table) { .dev = ret->dev, .inode = ret->inode, .first = t->used, .n = (uint32_t) out,
                                      .first_page = t->pages_used, .n_pages = n_pages };
        t->used += (uint32_t) out;
        t->pages_used += n_pages;
        return 0;
}

/* The table of the file (dev, inode) whose image is data/size. */
static int image_table(struct unwind_tables *t, const uint8_t *data, size_t size, uint64_t dev, uint64_t inode,
                       const struct image_table **ret) {
        for (size_t k = 0; k < t->n_img; k++)
                if (t->img[k].dev == dev && t->img[k].inode == inode) {
                        *ret = &t->img[k];
                        return 0;
                }
        if (GREEDY_REALLOC_MIN(t->img, t->cap_img, t->n_img + 1, 32) < 0)
                return -ENOMEM;
        struct image_table e = { .dev = dev, .inode = inode };
        int r = compile_into(t, data, size, &e);
        if (r == -ENOSPC)
                return r;
        if (r < 0)
                t->st.images_refused++;
        t->img[t->n_img] = e;
        *ret = &t->img[t->n_img++];
        return 0;
}

/* Fills t->entry for p; -ENOSPC when the array ran out of room. */
static int fill_entry(struct unwind_tables *t, const struct proc_info *p) {
        struct bpfstack_uproc *u = &t->entry;
        memset(u, 0, sizeof(*u));
        for (size_t k = 0; k < p->maps.n; k++) {
                const struct pmap *m = &p->maps.v[k];
                if (!(m->prot & 4 /* PROT_EXEC */))
                        continue;
                const uint8_t *data = NULL;
                size_t size = 0;
                uint64_t vaddr, dev = 0, inode = 0;
                if (strcmp(m->path, "[vdso]") == 0) {
                        /* Linked at 0, mapped whole: its first byte is vaddr 0. */
                        if (!(data = own_vdso(&size)))
                                continue;
                        vaddr = 0;
                } else if (m->path[0] == '/') {
                        struct elf_image *img = symbolizer_image(t->sym, p, m);
                        if (!img || !elf_image_offset_to_vaddr(img, m->pgoff, &vaddr))
                                continue;
                        data = elf_image_data(img, &size);
                        dev = makedev(m->dev_major, m->dev_minor);
                        inode = m->inode;
                } else
                        continue;
                const struct image_table *it;
                int r = image_table(t, data, size, dev, inode, &it);
                if (r < 0)
                        return r;
                if (it->n == 0)
                        continue;
                if (u->n == BPFSTACK_UNWIND_MAPS) {
                        t->st.maps_dropped++;
                        continue;
                }
                u->m[u->n++] = (struct bpfstack_umap) {
                        .start = m->start, .end = m->end, .bias = m->start - vaddr,
                        .first_row = it->first, .n_rows = it->n,
                        .first_page = it->first_page, .n_pages = it->n_pages,
                };
        }
        return 0;
}

int unwind_tables_load(struct unwind_tables *t, const struct proc_info *p) {
        int r = fill_entry(t, p);
        if (r == -ENOSPC) {
                /* Room for this process at least, after the others go. */
                reset(t);
                r = fill_entry(t, p);
        }
        if (r < 0)
                return r;
        uint32_t key = (uint32_t) p->pid;
        if (bpf_map_update_elem(t->procs_fd, &key, &t->entry, BPF_ANY) < 0) {
                t->st.procs_failed++;
                return errno == E2BIG ? -ENOSPC : -errno;
        }
        t->st.procs_loaded++;
        return remember_pid(t, p->pid);
}
