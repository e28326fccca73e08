/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <elf.h>
#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <sys/auxv.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/sysmacros.h>
#include <unistd.h>

#include <bpf/bpf.h>

#include "basic/alloc.h"
#include "bpfstack.h"
#include "profiling/elf-image.h"
#include "unwind-compiler.h"
#include "unwind-tables.h"

/* Compiled rows kept across resets: at most this many times the array. */
#define HOST_ROWS_FACTOR 4u
/* One file may take this share of the array at most (1/N). */
#define IMAGE_SHARE 4u
/* A file of the process none of its samples were seen in gets this share
 * of its heat (1/N): compiled after those they were. */
#define COLD_SHARE 16u

/* A file's table: compiled (rows, kept here across resets), being
 * compiled (job), or refused (error); resident when the rows are in the
 * array at [first, first + n) with their page index. */
struct image_table {
        uint64_t dev, inode;
        struct unwind_job *job;
        struct bpfstack_row *rows;
        size_t n_host;
        int error;
        bool resident;
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
        struct unwind_compiler *compiler;
        size_t host_rows; /* rows kept here, resident or not */
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

int unwind_tables_new(uint32_t n_rows, struct symbolizer *sym, const char *cache_dir, struct unwind_tables **ret) {
        struct unwind_tables *t = calloc(1, sizeof(*t));
        if (!t)
                return -ENOMEM;
        int r = unwind_compiler_new(cache_dir, &t->compiler);
        if (r < 0) {
                free(t);
                return r;
        }
        t->rows_fd = t->procs_fd = -EBADF;
        t->n_rows = n_rows;
        t->sym = sym;
        t->st.rows_max = n_rows;
        *ret = t;
        return 0;
}

int unwind_tables_map(struct unwind_tables *t, int rows_fd, int pages_fd, uint32_t n_pages, int procs_fd) {
        void *rows = map_array(rows_fd, t->n_rows, sizeof(struct bpfstack_row), &t->map_len);
        if (!rows)
                return -errno;
        void *pages = map_array(pages_fd, n_pages, sizeof(struct bpfstack_page), &t->pages_len);
        if (!pages) {
                int r = -errno;
                munmap(rows, t->map_len);
                return r;
        }
        t->rows = rows;
        t->pages = pages;
        t->n_pages = n_pages;
        t->rows_fd = rows_fd;
        t->procs_fd = procs_fd;
        return 0;
}

void unwind_tables_free(struct unwind_tables *t) {
        if (!t)
                return;
        if (t->rows)
                munmap(t->rows, t->map_len);
        if (t->pages)
                munmap(t->pages, t->pages_len);
        unwind_compiler_free(t->compiler); /* queued jobs go with it */
        for (size_t k = 0; k < t->n_img; k++)
                free(t->img[k].rows);
        free(t->img);
        free(t->pids);
        free(t);
}

void unwind_tables_stats(const struct unwind_tables *t, struct unwind_stats *ret) {
        *ret = t->st;
        ret->rows = t->used;
        uint64_t n = 0;
        for (size_t k = 0; k < t->n_img; k++)
                n += t->img[k].resident;
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
        for (size_t k = 0; k < t->n_img; k++) {
                struct image_table *it = &t->img[k];
                it->resident = false;
                if (t->host_rows > HOST_ROWS_FACTOR * (size_t) t->n_rows && it->rows) {
                        /* Too many kept: compiled again when asked. */
                        t->host_rows -= it->n_host;
                        free(it->rows);
                        *it = (struct image_table) { .dev = it->dev, .inode = it->inode, .error = -EAGAIN };
                }
        }
        t->used = 0;
        t->pages_used = 0;
        t->st.resets++;
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


/* Copies it's rows into the array at t->used with their page index: for
 * each page from the first row's, the rows in force from its start to its
 * end. The closing row has no end: pages stop at its start. -ENOSPC: no
 * room left. */
static int place(struct unwind_tables *t, struct image_table *it) {
        size_t out = it->n_host;
        if (out > t->n_rows - t->used)
                return -ENOSPC;
        const struct bpfstack_row *v = it->rows;
        uint32_t base = v[0].pc & ~(BPFSTACK_PAGE - 1);
        uint32_t n_pages = ((v[out - 1].pc - base) >> BPFSTACK_PAGE_SHIFT) + 1;
        if (n_pages > t->n_pages - t->pages_used)
                return -ENOSPC;
        memcpy(&t->rows[t->used], v, out * sizeof(*v));
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
        it->first = t->used;
        it->n = (uint32_t) out;
        it->first_page = t->pages_used;
        it->n_pages = n_pages;
        it->resident = true;
        t->used += (uint32_t) out;
        t->pages_used += n_pages;
        return 0;
}

int unwind_tables_fd(const struct unwind_tables *t) {
        return unwind_compiler_fd(t->compiler);
}

void unwind_tables_poll(struct unwind_tables *t) {
        struct unwind_job *j = unwind_compiler_take(t->compiler);
        while (j) {
                struct unwind_job *next = j->next;
                if (j->from_cache) {
                        t->st.images_cached++;
                        t->st.cache_us += j->compile_us;
                } else if (j->error != -ENODATA) {
                        t->st.compile_us += j->compile_us;
                        if (j->compile_us > t->st.compile_max_us)
                                t->st.compile_max_us = j->compile_us;
                }
                t->st.cache_errors += j->cache_error < 0;
                for (size_t k = 0; k < t->n_img; k++) {
                        struct image_table *it = &t->img[k];
                        if (it->job != j)
                                continue;
                        it->job = NULL;
                        it->error = j->error;
                        if (j->error < 0) {
                                t->st.images_refused++;
                                break;
                        }
                        t->st.images_compiled += !j->from_cache;
                        it->rows = j->rows;
                        it->n_host = j->n;
                        t->host_rows += j->n;
                        j->rows = NULL;
                        break;
                }
                unwind_job_free(j);
                j = next;
        }
}

/* Queues the compile of m's file (data/size: the vDSO's image). */
static int submit(struct unwind_tables *t, struct image_table *it, const struct proc_info *p, const struct pmap *m,
                  const uint8_t *data, size_t size, uint64_t heat) {
        struct unwind_job *j = calloc(1, sizeof(*j));
        if (!j)
                return -ENOMEM;
        *j = (struct unwind_job) { .dev = it->dev, .inode = it->inode, .fd = -EBADF, .data = data, .size = size,
                                   .max_rows = t->n_rows / IMAGE_SHARE, .heat = heat };
        if (!data) {
                j->fd = proc_table_open_file(t->sym->procs, p->pid, m->path);
                if (j->fd < 0) {
                        int r = j->fd;
                        free(j);
                        return r;
                }
        }
        it->job = j;
        it->error = 0;
        unwind_compiler_submit(t->compiler, j);
        return 0;
}

/* The entry of the file (dev, inode), added when new. */
static struct image_table *image_entry(struct unwind_tables *t, uint64_t dev, uint64_t inode) {
        for (size_t k = 0; k < t->n_img; k++)
                if (t->img[k].dev == dev && t->img[k].inode == inode)
                        return &t->img[k];
        if (GREEDY_REALLOC_MIN(t->img, t->cap_img, t->n_img + 1, 32) < 0)
                return NULL;
        t->img[t->n_img] = (struct image_table) { .dev = dev, .inode = inode, .error = -EAGAIN };
        return &t->img[t->n_img++];
}

/* Heats the compile of it's file, or queues it when not compiled yet:
 * 1 while it is being compiled, 0 when its rows (or its refusal) are in,
 * -ENOMEM. */
static int want_compiled(struct unwind_tables *t, struct image_table *it, const struct proc_info *p,
                         const struct pmap *m, const uint8_t *vdso, size_t size, uint64_t heat) {
        if (it->job) {
                unwind_compiler_heat(t->compiler, it->job, heat);
                return 1;
        }
        if (it->rows || it->error != -EAGAIN)
                return 0;
        int r = submit(t, it, p, m, vdso, size, heat);
        if (r == -ENOMEM)
                return r;
        /* Not opened (the process went): left out of this entry, tried
         * again for the next process. */
        return r == 0;
}

/* The file behind m, an executable mapping of p: the vDSO's image
 * (*vdso, *size), or (*dev, *inode). False for none (anonymous memory). */
static bool mapping_file(const struct pmap *m, const uint8_t **vdso, size_t *size, uint64_t *dev, uint64_t *inode) {
        *vdso = NULL;
        *size = 0;
        *dev = *inode = 0;
        if (!(m->prot & 4 /* PROT_EXEC */))
                return false;
        if (strcmp(m->path, "[vdso]") == 0)
                return (*vdso = own_vdso(size)) != NULL;
        if (m->path[0] != '/')
                return false;
        *dev = makedev(m->dev_major, m->dev_minor);
        *inode = m->inode;
        return true;
}

bool unwind_tables_could_cover(const struct unwind_tables *t, const struct pmap *m) {
        const uint8_t *vdso;
        size_t size;
        uint64_t dev, inode;
        if (!mapping_file(m, &vdso, &size, &dev, &inode))
                return false;
        for (size_t k = 0; k < t->n_img; k++)
                if (t->img[k].dev == dev && t->img[k].inode == inode)
                        return t->img[k].rows || t->img[k].job;
        return true;
}

int unwind_tables_prepare(struct unwind_tables *t, const struct proc_info *p, uint64_t heat) {
        for (size_t k = 0; k < p->maps.n; k++) {
                const struct pmap *m = &p->maps.v[k];
                const uint8_t *vdso;
                size_t size;
                uint64_t dev, inode;
                if (!mapping_file(m, &vdso, &size, &dev, &inode))
                        continue;
                struct image_table *it = image_entry(t, dev, inode);
                int r = it ? want_compiled(t, it, p, m, vdso, size, heat) : -ENOMEM;
                if (r < 0)
                        return r;
        }
        return 0;
}

/* Fills t->entry for p: -EINPROGRESS while the table of a file holding
 * one of l's pcs is being compiled, -ENOSPC when the array ran out of
 * room; *partial when other files' tables are still being compiled. */
static int fill_entry(struct unwind_tables *t, const struct proc_info *p, const struct pending_load *l, bool *partial) {
        struct bpfstack_uproc *u = &t->entry;
        memset(u, 0, sizeof(*u));
        bool waiting = false;
        *partial = false;
        for (size_t k = 0; k < p->maps.n; k++) {
                const struct pmap *m = &p->maps.v[k];
                const uint8_t *vdso;
                size_t size;
                uint64_t vaddr = 0, dev, inode;
                if (!mapping_file(m, &vdso, &size, &dev, &inode))
                        continue;
                /* The vDSO is linked at 0 and mapped whole: its first byte
                 * is vaddr 0. */
                if (!vdso) {
                        struct elf_image *img = symbolizer_image(t->sym, p, m);
                        if (!img || !elf_image_offset_to_vaddr(img, m->pgoff, &vaddr))
                                continue;
                }
                struct image_table *it = image_entry(t, dev, inode);
                if (!it)
                        return -ENOMEM;
                bool hot = pending_hot(l, m->start, m->end);
                int c = want_compiled(t, it, p, m, vdso, size, hot ? l->hits : l->hits / COLD_SHARE);
                if (c < 0)
                        return c;
                if (c > 0) {
                        waiting |= hot;
                        *partial |= !hot;
                        continue;
                }
                if (!it->rows)
                        continue; /* refused */
                if (!it->resident) {
                        int r = place(t, it);
                        if (r < 0)
                                return r;
                }
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
        return waiting ? -EINPROGRESS : 0;
}

int unwind_tables_load(struct unwind_tables *t, const struct proc_info *p, const struct pending_load *l) {
        bool partial;
        int r = fill_entry(t, p, l, &partial);
        if (r == -ENOSPC) {
                /* Room for this process at least, after the others go. */
                reset(t);
                r = fill_entry(t, p, l, &partial);
        }
        if (r < 0)
                return r;
        t->entry.flags = partial ? BPFSTACK_UPROC_PARTIAL : 0;
        uint32_t key = (uint32_t) p->pid;
        if (bpf_map_update_elem(t->procs_fd, &key, &t->entry, BPF_ANY) < 0) {
                t->st.procs_failed++;
                return errno == E2BIG ? -ENOSPC : -errno;
        }
        t->st.procs_loaded++;
        t->st.procs_partial += partial;
        r = remember_pid(t, p->pid);
        return r < 0 ? r : partial ? -EINPROGRESS : 0;
}
