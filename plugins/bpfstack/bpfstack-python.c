/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* linux.bpf_stack's CPython frames, user space side: a process is looked
 * at once (per exec) when first sampled, or at the start when it runs
 * already; when it maps a CPython interpreter of a known version
 * (pythonX.Y, libpythonX.Y.so), the address of its _PyRuntime and the
 * version's offsets go into the BPF map py_procs, and its samples come
 * with the thread's Python frames. Those are named here: each code object
 * read once per process (process_vm_readv: ptrace read access, which the
 * plugin has with CAP_SYS_PTRACE) and each frame interned as function
 * "QUALNAME (FILE:LINE)" on the mapping "[cpythonX.Y]", rel_pc the line;
 * the frames take the place of the evaluation function's native frames
 * (lib/profiling/pyframes.h's merge). */

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include "bpfstack-session.h"
#include "profiling/pyframes-elf.h"
#include "profiling/pyframes.h"

/* Code objects kept per process; past it the process's are forgotten. */
#define CODES_MAX 8192u

enum py_kind {
        PY_NOT = 0,     /* no interpreter mapped (or not found) */
        PY_UNKNOWN = 1, /* a CPython whose layout we do not have */
        PY_KNOWN = 2,   /* in py_procs */
};

/* A process's state, as its proc_info's userdata. */
struct py_proc {
        uint32_t magic;
        uint32_t generation; /* the proc_info generation it was made for */
        enum py_kind kind;
        const struct py_layout *l;
        char mapping[32];
        struct hashmap codes; /* code object address -> struct py_code * (NULL: unreadable) */
};

#define PY_PROC_MAGIC 0x70797072u

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

void bpfstack_py_proc_free(void *userdata) {
        struct py_proc *pp = userdata;
        if (!pp || pp->magic != PY_PROC_MAGIC)
                return;
        codes_clear(&pp->codes);
        free(pp);
}

static int read_mem(void *userdata, uint64_t addr, void *buf, size_t len) {
        int pid = *(const int *) userdata;
        struct iovec local = {.iov_base = buf, .iov_len = len};
        struct iovec remote = {.iov_base = (void *) (uintptr_t) addr, .iov_len = len};
        ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);
        if (n < 0)
                return -errno;
        return (size_t) n == len ? 0 : -EFAULT;
}

/* Where the image of mapping m holding symbol vaddr is in p's memory. */
static bool runtime_address(struct bpfstack_session *s, struct proc_info *p, const struct pmap *m, uint64_t *ret) {
        struct elf_image *img = symbolizer_image(&s->sym, p, m);
        size_t size;
        const uint8_t *data = img ? elf_image_data(img, &size) : NULL;
        uint64_t vaddr, off;
        if (!data || py_elf_symbol(data, size, "_PyRuntime", &vaddr) < 0 ||
            !elf_image_vaddr_to_offset(img, vaddr, &off))
                return false;
        /* The mapping of the same file holding that offset (the data
         * segment, mapped apart from the code). */
        for (size_t k = 0; k < p->maps.n; k++) {
                const struct pmap *o = &p->maps.v[k];
                if (o->inode == m->inode && o->dev_major == m->dev_major && o->dev_minor == m->dev_minor &&
                    !strcmp(o->path, m->path) && off >= o->pgoff && off - o->pgoff < o->end - o->start) {
                        *ret = o->start + (off - o->pgoff);
                        return true;
                }
        }
        return false;
}

/* Looks at process p: its kind, and its py_procs entry when known. The
 * interpreter's state is in whichever of its CPython files exports
 * _PyRuntime: the executable (Debian's python3.11), or libpythonX.Y.so
 * beside an executable that is only a stub (a --enable-shared build,
 * pyenv's) or a program embedding it. */
static void classify(struct bpfstack_session *s, struct proc_info *p, struct py_proc *pp) {
        unsigned major = 0, minor = 0;
        const struct pmap *m = NULL, *tried = NULL;
        uint64_t runtime = 0;
        bool found = false;
        pp->kind = PY_NOT;
        pp->l = NULL;
        for (size_t k = 0; k < p->maps.n && !found; k++) {
                const struct pmap *c = &p->maps.v[k];
                unsigned ma, mi;
                if (c->path[0] != '/' || !py_version_of_path(c->path, &ma, &mi))
                        continue;
                if (tried && c->inode == tried->inode && c->dev_major == tried->dev_major &&
                    c->dev_minor == tried->dev_minor)
                        continue; /* another mapping of a file looked at */
                tried = c;
                if (!m || !pp->l) {
                        m = c;
                        major = ma;
                        minor = mi;
                        pp->l = py_layout_find(ma, mi);
                }
                const struct py_layout *l = py_layout_find(ma, mi);
                if (l && runtime_address(s, p, c, &runtime)) {
                        m = c;
                        major = ma;
                        minor = mi;
                        pp->l = l;
                        found = true;
                }
        }
        if (!m)
                return;
        snprintf(pp->mapping, sizeof(pp->mapping), "[cpython%u.%u]", major, minor);
        if (!pp->l) {
                pp->kind = PY_UNKNOWN;
                s->py_unknown++;
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: pid %d runs CPython %u.%u (%s), whose layout is not "
                           "known: its stacks stay native",
                           (unsigned long long) s->inst.id, p->pid, major, minor, m->path);
                return;
        }
        if (!found) {
                s->py_unknown++;
                plugin_log(s->pl, TRACED_LOG_INFO,
                           "linux.bpf_stack instance %llu: pid %d maps %s but no _PyRuntime was found in its "
                           "CPython files: its stacks stay native",
                           (unsigned long long) s->inst.id, p->pid, m->path);
                pp->kind = PY_UNKNOWN;
                return;
        }
        const struct py_layout *l = pp->l;
        struct bpfstack_pyproc v = {
                .runtime = runtime,
                .runtime_interp_head = l->runtime_interp_head,
                .runtime_tstate_current = l->runtime_tstate_current,
                .interp_next = l->interp_next,
                .interp_threads_head = l->interp_threads_head,
                .tstate_next = l->tstate_next,
                .tstate_native_tid = l->tstate_native_tid,
                .tstate_cframe = l->tstate_cframe,
                .cframe_current_frame = l->cframe_current_frame,
                .frame_code = l->frame_code,
                .frame_previous = l->frame_previous,
                .frame_prev_instr = l->frame_prev_instr,
                .frame_is_entry = l->frame_is_entry,
                .frame_size = l->frame_size,
        };
        uint32_t key = (uint32_t) p->pid;
        int r = bpf_map__update_elem(s->skel->maps.py_procs, &key, sizeof(key), &v, sizeof(v), BPF_ANY);
        if (r < 0) {
                s->py_map_full++;
                return;
        }
        pp->kind = PY_KNOWN;
        s->py_procs++;
}

static struct py_proc *py_state(struct bpfstack_session *s, struct proc_info *p) {
        struct py_proc *pp = p->userdata;
        if (pp && pp->generation == p->generation)
                return pp;
        if (!pp) {
                pp = calloc(1, sizeof(*pp));
                if (!pp)
                        return NULL;
                pp->magic = PY_PROC_MAGIC;
                p->userdata = pp;
        } else
                codes_clear(&pp->codes);
        pp->generation = p->generation;
        classify(s, p, pp);
        return pp;
}

void bpfstack_py_seen(struct bpfstack_session *s, uint32_t pid) {
        if (!s->cfg.python_frames || !s->skel)
                return;
        struct proc_info *p = proc_table_get(s->procs, (int) pid);
        if (!p || p->maps_unreadable || !p->maps.n)
                return;
        (void) py_state(s, p);
}

void bpfstack_py_scan(struct bpfstack_session *s) {
        if (!s->cfg.python_frames)
                return;
        DIR *d = opendir("/proc");
        if (!d)
                return;
        struct dirent *de;
        while ((de = readdir(d))) {
                char *end;
                long pid = strtol(de->d_name, &end, 10);
                if (*end || pid <= 0 || pid > INT_MAX)
                        continue;
                char path[64], exe[PATH_MAX];
                snprintf(path, sizeof(path), "/proc/%ld/exe", pid);
                ssize_t n = readlink(path, exe, sizeof(exe) - 1);
                unsigned major, minor;
                if (n <= 0)
                        continue;
                exe[n] = 0;
                if (py_version_of_path(exe, &major, &minor))
                        bpfstack_py_seen(s, (uint32_t) pid);
        }
        closedir(d);
}

/* The code object at addr of process p, read once. */
static const struct py_code *code_of(struct bpfstack_session *s, struct proc_info *p, struct py_proc *pp,
                                     uint64_t addr) {
        uint64_t v;
        if (hashmap_get(&pp->codes, addr, &v))
                return (const struct py_code *) (uintptr_t) v;
        if (hashmap_size(&pp->codes) >= CODES_MAX)
                codes_clear(&pp->codes);
        struct py_code *c = calloc(1, sizeof(*c));
        int pid = p->pid;
        if (c && py_code_read(pp->l, read_mem, &pid, addr, c) < 0) {
                free(c);
                c = NULL;
                s->py_code_unreadable++;
        } else if (c)
                s->py_codes_read++;
        if (hashmap_put(&pp->codes, addr, (uint64_t) (uintptr_t) c) < 0 && c) {
                py_code_done(c);
                free(c);
                return NULL;
        }
        return c;
}

/* The interned frame of one Python frame (0: out of memory). */
static uint64_t py_frame(struct bpfstack_session *s, struct intern_writer *iw, struct proc_info *p, struct py_proc *pp,
                         const struct bpfstack_pyframe *f) {
        uint64_t addr = f->code & ~BPFSTACK_PY_ENTRY;
        const struct py_code *c = code_of(s, p, pp, addr);
        char name[2 * PY_NAME_MAX + 64];
        int line = 0;
        if (c) {
                line = py_code_line(pp->l, c, addr, f->instr);
                if (line < 0)
                        line = c->firstlineno;
                snprintf(name, sizeof(name), "%s (%s:%d)", c->qualname, c->filename, line);
        } else
                snprintf(name, sizeof(name), "[python code 0x%llx]", (unsigned long long) addr);
        struct intern_mapping im = {.path = pp->mapping};
        uint64_t fn = intern_function_name(iw, name), map = intern_mapping(iw, &im);
        if (!fn || !map)
                return 0;
        return intern_frame(iw, fn, map, (uint64_t) (line > 0 ? line : 0));
}

size_t bpfstack_py_user_frames(struct bpfstack_session *s, struct intern_writer *iw, struct proc_info *p,
                               const uint64_t *user, size_t n_user, const struct bpfstack_pyframe *py, size_t n_py,
                               uint64_t *out) {
        struct py_proc *pp =
                p && p->userdata && p->generation == ((struct py_proc *) p->userdata)->generation ? p->userdata : NULL;
        bool use_py = pp && pp->kind == PY_KNOWN && n_py > 0;
        bool is_eval[BPFSTACK_MAX_DEPTH], is_entry[BPFSTACK_MAX_PYFRAMES];
        uint64_t native[BPFSTACK_MAX_DEPTH];
        if (n_user > BPFSTACK_MAX_DEPTH)
                n_user = BPFSTACK_MAX_DEPTH;
        if (n_py > BPFSTACK_MAX_PYFRAMES)
                n_py = BPFSTACK_MAX_PYFRAMES;
        for (size_t k = 0; k < n_user; k++) {
                /* Return addresses but the innermost: the call is the byte before. */
                uint64_t pc = k > 0 ? user[k] - 1 : user[k];
                native[k] = symbolizer_user_frame(&s->sym, iw, p, pc);
                is_eval[k] = false;
                if (use_py) {
                        struct symbolized r;
                        symbolizer_resolve(&s->sym, p, pc, &r);
                        is_eval[k] = r.function && strcmp(r.function, PY_EVAL_FUNCTION) == 0;
                }
        }
        size_t n = 0;
        if (!use_py) {
                for (size_t k = n_user; k-- > 0;)
                        if (native[k])
                                out[n++] = native[k];
                return n;
        }
        for (size_t j = 0; j < n_py; j++)
                is_entry[j] = py[j].code & BPFSTACK_PY_ENTRY;
        struct py_merged m[BPFSTACK_MAX_DEPTH + BPFSTACK_MAX_PYFRAMES];
        size_t nm = py_merge(is_eval, n_user, is_entry, n_py, m, sizeof(m) / sizeof(m[0]));
        s->py_samples++;
        for (size_t k = nm; k-- > 0;) {
                uint64_t f = m[k].python ? py_frame(s, iw, p, pp, &py[m[k].index]) : native[m[k].index];
                if (f)
                        out[n++] = f;
        }
        return n;
}
