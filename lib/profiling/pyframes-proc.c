/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "basic/hashmap.h"
#include "profiling/elf-image.h"
#include "profiling/pyframes-elf.h"
#include "profiling/pyframes-proc.h"

/* Code objects kept per process; past it the process's are forgotten. */
#define CODES_MAX 8192u

struct py_proc {
        struct py_proc_info info;
        int pid;
        char *path;
        char mapping[32];
        struct hashmap codes; /* code object address -> struct py_code * (NULL: unreadable) */
        uint64_t read, unreadable;
};

static void codes_clear(struct hashmap *codes) {
        uint64_t key, v;
        for (size_t it = 0; hashmap_next(codes, &it, &key, &v);) {
                struct py_code *c = (struct py_code *) (uintptr_t) v;
                if (c) {
                        py_code_done(c);
                        free(c);
                }
        }
        hashmap_clear(codes);
}

void py_proc_free(struct py_proc *pp) {
        if (!pp)
                return;
        codes_clear(&pp->codes);
        free(pp->path);
        free(pp);
}

const struct py_proc_info *py_proc_info(const struct py_proc *pp) {
        return &pp->info;
}

void py_proc_counts(const struct py_proc *pp, uint64_t *ret_read, uint64_t *ret_unreadable) {
        *ret_read = pp->read;
        *ret_unreadable = pp->unreadable;
}

/* Where symbol name of the file mapped at m is in p's memory: the file's
 * segments keep their distances when mapped, so the mapping m (of
 * whichever segment: the kernel's notes tell of executable mappings
 * only, and _PyRuntime is in the data) gives the load bias. */
static bool symbol_address(struct symbolizer *sym, const struct proc_info *p, const struct pmap *m, const char *name,
                           uint64_t *ret) {
        struct elf_image *img = symbolizer_image(sym, p, m);
        size_t size;
        const uint8_t *data = img ? elf_image_data(img, &size) : NULL;
        uint64_t vaddr, at;
        if (!data || py_elf_symbol(data, size, name, &vaddr) < 0 || !elf_image_offset_to_vaddr(img, m->pgoff, &at))
                return false;
        *ret = vaddr + (m->start - at);
        return true;
}

/* The interpreter's state is in whichever of the process's CPython files
 * exports _PyRuntime: the executable (Debian's python3.11), or
 * libpythonX.Y.so beside an executable that is only a stub (a
 * --enable-shared build, pyenv's) or a program embedding it. */
static void classify(struct symbolizer *sym, const struct proc_info *p, struct py_proc *pp) {
        const struct pmap *named = NULL, *tried = NULL;
        struct py_proc_info *in = &pp->info;
        for (size_t k = 0; k < p->maps.n; k++) {
                const struct pmap *c = &p->maps.v[k];
                unsigned ma, mi;
                if (c->path[0] != '/' || !py_version_of_path(c->path, &ma, &mi))
                        continue;
                if (tried && c->inode == tried->inode && c->dev_major == tried->dev_major &&
                    c->dev_minor == tried->dev_minor)
                        continue; /* another mapping of a file looked at */
                tried = c;
                const struct py_layout *l = py_layout_find(ma, mi);
                if (!named || (!in->layout && l)) {
                        named = c;
                        in->major = ma;
                        in->minor = mi;
                        in->layout = l;
                }
                uint64_t runtime;
                if (l && symbol_address(sym, p, c, "_PyRuntime", &runtime)) {
                        named = c;
                        in->major = ma;
                        in->minor = mi;
                        in->layout = l;
                        in->runtime = runtime;
                        /* Code objects are checked to be of its type. */
                        if (!symbol_address(sym, p, c, "PyCode_Type", &in->code_type))
                                in->code_type = 0;
                        in->kind = PY_KNOWN;
                        break;
                }
        }
        if (!named)
                return;
        if (in->kind != PY_KNOWN)
                in->kind = in->layout ? PY_NO_RUNTIME : PY_UNKNOWN;
        pp->path = strdup(named->path);
        in->path = pp->path ? pp->path : "";
        snprintf(pp->mapping, sizeof(pp->mapping), "[cpython%u.%u]", in->major, in->minor);
}

int py_proc_new(struct symbolizer *sym, const struct proc_info *p, struct py_proc **ret) {
        struct py_proc *pp = calloc(1, sizeof(*pp));
        if (!pp)
                return -ENOMEM;
        pp->pid = p->pid;
        classify(sym, p, pp);
        *ret = pp;
        return 0;
}

int py_read_process(void *userdata, uint64_t addr, void *buf, size_t len) {
        int pid = *(const int *) userdata;
        struct iovec local = {.iov_base = buf, .iov_len = len};
        struct iovec remote = {.iov_base = (void *) (uintptr_t) addr, .iov_len = len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EFAULT;
}

int py_readv_process(void *userdata, const uint64_t *addrs, void *const *bufs, size_t len, size_t n) {
        int pid = *(const int *) userdata;
        struct iovec local[8], remote[8];
        if (n > 8)
                n = 8;
        for (size_t k = 0; k < n; k++) {
                local[k] = (struct iovec){.iov_base = bufs[k], .iov_len = len};
                remote[k] = (struct iovec){.iov_base = (void *) (uintptr_t) addrs[k], .iov_len = len};
        }
        ssize_t got = process_vm_readv(pid, local, n, remote, n, 0);
        if (got < 0)
                return -errno;
        /* The kernel stops at the first part it cannot read. */
        return (int) ((size_t) got / len);
}

/* The code object at addr, read once. */
static const struct py_code *code_of(struct py_proc *pp, uint64_t addr) {
        uint64_t v;
        if (hashmap_get(&pp->codes, addr, &v))
                return (const struct py_code *) (uintptr_t) v;
        if (hashmap_size(&pp->codes) >= CODES_MAX)
                codes_clear(&pp->codes);
        struct py_code *c = calloc(1, sizeof(*c));
        int pid = pp->pid;
        if (c && py_code_read(pp->info.layout, py_read_process, &pid, addr, pp->info.code_type, c) < 0) {
                free(c);
                c = NULL;
                pp->unreadable++;
        } else if (c)
                pp->read++;
        if (hashmap_put(&pp->codes, addr, (uint64_t) (uintptr_t) c) < 0 && c) {
                py_code_done(c);
                free(c);
                return NULL;
        }
        return c;
}

uint64_t py_proc_frame(struct py_proc *pp, struct intern_writer *iw, uint64_t code, uint64_t instr) {
        if (pp->info.kind != PY_KNOWN)
                return 0;
        const struct py_code *c = code_of(pp, code);
        char name[2 * PY_NAME_MAX + 64];
        int line = 0;
        if (c) {
                line = py_code_line(pp->info.layout, c, code, instr);
                if (line < 0)
                        line = c->firstlineno;
                snprintf(name, sizeof(name), "%s (%s:%d)", c->qualname, c->filename, line);
        } else
                snprintf(name, sizeof(name), "[python code 0x%llx]", (unsigned long long) code);
        struct intern_mapping im = {.path = pp->mapping};
        uint64_t fn = intern_function_name(iw, name), map = intern_mapping(iw, &im);
        if (!fn || !map)
                return 0;
        return intern_frame(iw, fn, map, (uint64_t) (line > 0 ? line : 0));
}
