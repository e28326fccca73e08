/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/jit-map.h"
#include "profiling/procmaps.h"

/* Read at once from a file; a perf map line or jitdump record longer than
 * the buffer may grow to (JIT_RECORD_MAX) is given up on. */
#define READ_CHUNK (64u * 1024u)
#define JIT_RECORD_MAX (16u * 1024u * 1024u)
/* How far back a lookup looks for an entry that covers pc but starts
 * before the nearest one (entries of a perf map may overlap). */
#define LOOKBACK 32

struct jit_entry {
        uint64_t start, end;
        uint64_t seq; /* later entries win */
        char *name;
        bool from_dump;
};

struct jit_source {
        int fd; /* -1: not open */
        uint64_t offset;
        uint8_t *buf;
        size_t len, cap;
        int header_done;
        bool dump;
        bool broken; /* cannot parse any more of it */
        bool skipping; /* inside an overlong perf map line */
        uint8_t head[64]; /* the file's first bytes, to tell a rewrite from an append */
        size_t head_len;
        uint8_t tail[64]; /* the bytes read last, ending at offset: the same */
        size_t tail_len;
};

struct jit_symbols {
        struct jit_entry *v;
        size_t n, cap;
        size_t n_sorted; /* v[0..n_sorted) is sorted by start */
        uint64_t seq;
        struct jit_source map, dump;
        uint64_t last_refresh;
        uint64_t dump_inode; /* the jitdump file opened, by inode */
        int nspid;
        unsigned uid;
        bool ids_read;
        bool reading_dump; /* the source add_entry is called for */
};

static uint64_t now_usec(void) {
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (uint64_t) ts.tv_sec * 1000000u + (uint64_t) ts.tv_nsec / 1000u;
}

static void source_close(struct jit_source *s) {
        if (s->fd >= 0)
                close(s->fd);
        free(s->buf);
        *s = (struct jit_source) { .fd = -1, .dump = s->dump };
}

void jit_symbols_free(struct jit_symbols *j) {
        if (!j)
                return;
        for (size_t i = 0; i < j->n; i++)
                free(j->v[i].name);
        free(j->v);
        source_close(&j->map);
        source_close(&j->dump);
        free(j);
}

/* ---- parsers ------------------------------------------------------------ */

static bool parse_hex(const char **p, const char *end, uint64_t *ret) {
        const char *s = *p;
        if (end - s >= 2 && s[0] == '0' && (s[1] == 'x' || s[1] == 'X'))
                s += 2;
        uint64_t v = 0;
        const char *digits = s;
        for (; s < end; s++) {
                int d;
                if (*s >= '0' && *s <= '9')
                        d = *s - '0';
                else if (*s >= 'a' && *s <= 'f')
                        d = *s - 'a' + 10;
                else if (*s >= 'A' && *s <= 'F')
                        d = *s - 'A' + 10;
                else
                        break;
                if (v >> 60)
                        return false; /* more than 64 bits */
                v = v << 4 | (uint64_t) d;
        }
        if (s == digits)
                return false;
        *ret = v;
        *p = s;
        return true;
}

static int perf_map_line(const char *s, const char *end, jit_entry_fn add, void *userdata) {
        uint64_t start, size;
        if (!parse_hex(&s, end, &start) || s == end || *s != ' ')
                return 0; /* not an entry: skipped */
        s++;
        if (!parse_hex(&s, end, &size) || s == end || *s != ' ' || size == 0 || start + size < start)
                return 0;
        s++;
        size_t len = (size_t) (end - s);
        while (len > 0 && (s[len - 1] == '\r' || s[len - 1] == ' '))
                len--;
        if (len == 0)
                return 0;
        struct jit_entry_in e = { .start = start, .size = size, .name = s, .name_len = MIN(len, (size_t) JIT_NAME_MAX) };
        return add(&e, userdata);
}

long jit_parse_perf_map(const char *buf, size_t size, jit_entry_fn add, void *userdata) {
        size_t used = 0;
        while (used < size) {
                const char *line = buf + used;
                const char *nl = memchr(line, '\n', size - used);
                if (!nl)
                        break;
                int r = perf_map_line(line, nl, add, userdata);
                if (r < 0)
                        return r;
                used = (size_t) (nl - buf) + 1;
        }
        return (long) used;
}

static uint32_t get32(const uint8_t *p) {
        uint32_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

static uint64_t get64(const uint8_t *p) {
        uint64_t v;
        memcpy(&v, p, sizeof(v));
        return v;
}

/* The sizes of the jitdump file header, a record header and the fixed
 * parts of the records read. */
#define JD_HEADER 40u
#define JD_RECORD 16u
#define JD_LOAD 40u
#define JD_MOVE 48u

long jit_parse_jitdump(const uint8_t *buf, size_t size, int *header_done, jit_entry_fn add, void *userdata) {
        size_t used = 0;
        if (!*header_done) {
                if (size < JD_HEADER)
                        return 0;
                if (get32(buf) != JITDUMP_MAGIC || get32(buf + 4) != JITDUMP_VERSION)
                        return -EPROTO;
                uint32_t hsize = get32(buf + 8);
                if (hsize < JD_HEADER || hsize > JIT_RECORD_MAX)
                        return -EPROTO;
                if (size < hsize)
                        return 0;
                used = hsize;
                *header_done = 1;
        }
        while (size - used >= JD_RECORD) {
                const uint8_t *r = buf + used;
                uint32_t id = get32(r), total = get32(r + 4);
                if (total < JD_RECORD || total > JIT_RECORD_MAX)
                        return -EPROTO;
                if (size - used < total)
                        break;
                const uint8_t *body = r + JD_RECORD;
                size_t body_size = total - JD_RECORD;
                int k = 0;
                if (id == JITDUMP_CODE_LOAD && body_size > JD_LOAD) {
                        const char *name = (const char *) body + JD_LOAD;
                        const char *nul = memchr(name, '\0', body_size - JD_LOAD);
                        if (!nul)
                                return -EPROTO;
                        struct jit_entry_in e = { .start = get64(body + 16), .size = get64(body + 24), .name = name,
                                                  .name_len = MIN((size_t) (nul - name), (size_t) JIT_NAME_MAX) };
                        if (e.size > 0 && e.name_len > 0 && e.start + e.size > e.start)
                                k = add(&e, userdata);
                } else if (id == JITDUMP_CODE_MOVE && body_size >= JD_MOVE) {
                        struct jit_entry_in e = { .moved_from = get64(body + 16), .start = get64(body + 24),
                                                  .size = get64(body + 32) };
                        if (e.size > 0 && e.start + e.size > e.start)
                                k = add(&e, userdata);
                }
                if (k < 0)
                        return k;
                used += total;
        }
        return (long) used;
}

/* ---- the entries ---------------------------------------------------------- */

static int cmp_entry(const void *a, const void *b) {
        const struct jit_entry *x = a, *y = b;
        if (x->start != y->start)
                return x->start < y->start ? -1 : 1;
        return x->seq < y->seq ? -1 : x->seq > y->seq;
}

static const struct jit_entry *find(const struct jit_symbols *j, uint64_t pc) {
        /* The last entry starting at or before pc, then a few before it. */
        size_t lo = 0, hi = j->n_sorted;
        while (lo < hi) {
                size_t mid = lo + (hi - lo) / 2;
                if (j->v[mid].start <= pc)
                        lo = mid + 1;
                else
                        hi = mid;
        }
        const struct jit_entry *best = NULL;
        for (size_t i = lo, k = 0; i-- > 0 && k < LOOKBACK; k++) {
                const struct jit_entry *e = &j->v[i];
                if (pc < e->end && (!best || e->seq > best->seq))
                        best = e;
        }
        return best;
}

static int add_entry(const struct jit_entry_in *in, void *userdata) {
        struct jit_symbols *j = userdata;
        if (j->n >= JIT_MAX_ENTRIES)
                return 0;
        char *name;
        if (in->name)
                name = strndup(in->name, in->name_len);
        else {
                /* A move: the name of the code where it was. Entries added
                 * in this same read are not sorted yet, so look there too. */
                const struct jit_entry *from = find(j, in->moved_from);
                for (size_t i = j->n_sorted; i < j->n; i++)
                        if (j->v[i].start <= in->moved_from && in->moved_from < j->v[i].end &&
                            (!from || j->v[i].seq > from->seq))
                                from = &j->v[i];
                if (!from)
                        return 0;
                name = strdup(from->name);
        }
        if (!name || GREEDY_REALLOC_MIN(j->v, j->cap, j->n + 1, 64) < 0) {
                free(name);
                return -ENOMEM;
        }
        j->v[j->n++] = (struct jit_entry) { .start = in->start, .end = in->start + in->size, .seq = ++j->seq,
                                            .name = name, .from_dump = j->reading_dump };
        return 0;
}

/* ---- the files ------------------------------------------------------------ */

/* Reads the process's pid in its own namespace and its real uid. */
static void read_ids(const char *proc_dir, struct proc_info *p, struct jit_symbols *j) {
        char path[256], line[512];
        j->nspid = p->pid;
        j->uid = 0;
        snprintf(path, sizeof(path), "%s/%d/status", proc_dir, p->pid);
        FILE *f = fopen(path, "re");
        if (!f)
                return;
        while (fgets(line, sizeof(line), f)) {
                if (!strncmp(line, "Uid:", 4))
                        j->uid = (unsigned) strtoul(line + 4, NULL, 10);
                else if (!strncmp(line, "NSpid:", 6)) {
                        char *last = strrchr(line, '\t');
                        if (last)
                                j->nspid = (int) strtol(last + 1, NULL, 10);
                }
        }
        fclose(f);
        j->ids_read = true;
}

/* Opens path of process p, through its root; in our own namespace too
 * only when the name does not depend on it (same_ns). The file must be a
 * regular one owned by the process's user or root (a perf map in /tmp is
 * anyone's to create). */
static int open_for(const char *proc_dir, const struct proc_info *p, const struct jit_symbols *j, const char *path,
                    bool same_ns, uint64_t *ret_inode) {
        char buf[4096];
        int fd = -1;
        if (snprintf(buf, sizeof(buf), "%s/%d/root%s", proc_dir, p->pid, path) < (int) sizeof(buf))
                fd = open(buf, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0 && same_ns)
                fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
        if (fd < 0)
                return negative_errno();
        struct stat st;
        if (fstat(fd, &st) < 0 || !S_ISREG(st.st_mode) || (st.st_uid != j->uid && st.st_uid != 0)) {
                close(fd);
                return -EPERM;
        }
        if (ret_inode)
                *ret_inode = st.st_ino;
        return fd;
}

static const char *jitdump_path(const struct proc_info *p) {
        for (size_t i = 0; i < p->maps.n; i++) {
                const char *path = p->maps.v[i].path;
                const char *base = strrchr(path, '/');
                if (!base)
                        continue;
                base++;
                size_t len = strlen(base);
                if (len > 9 && !strncmp(base, "jit-", 4) && !strcmp(base + len - 5, ".dump"))
                        return path;
        }
        return NULL;
}

/* Whether the file was written anew since the last read rather than
 * appended to (JDK's Compiler.perfmap writes the whole map each time, in
 * the code cache's order, so a method compiled since may land anywhere in
 * it): shorter than what was read, its first bytes or the last ones read
 * changed, or the last byte read no longer ending a line. */
static bool rewritten(struct jit_source *s) {
        struct stat st;
        if (s->offset == 0 || fstat(s->fd, &st) < 0)
                return false;
        if ((uint64_t) st.st_size < s->offset)
                return true;
        uint8_t head[sizeof(s->head)], tail[sizeof(s->tail)], last;
        if (pread(s->fd, head, s->head_len, 0) != (ssize_t) s->head_len || memcmp(head, s->head, s->head_len) != 0)
                return true;
        if (pread(s->fd, tail, s->tail_len, (off_t) (s->offset - s->tail_len)) != (ssize_t) s->tail_len ||
            memcmp(tail, s->tail, s->tail_len) != 0)
                return true;
        return !s->dump && s->len == 0 && !s->skipping &&
               (pread(s->fd, &last, 1, (off_t) s->offset - 1) != 1 || last != '\n');
}

/* Forgets what the source gave: its entries, and where it was. */
static void source_restart(struct jit_symbols *j, struct jit_source *s) {
        size_t kept = 0;
        for (size_t i = 0; i < j->n; i++) {
                if (j->v[i].from_dump == s->dump)
                        free(j->v[i].name);
                else
                        j->v[kept++] = j->v[i];
        }
        j->n = kept;
        /* What the other source read just now is not sorted yet. */
        qsort(j->v, j->n, sizeof(*j->v), cmp_entry);
        j->n_sorted = j->n;
        s->offset = 0;
        s->len = 0;
        s->head_len = 0;
        s->tail_len = 0;
        s->header_done = 0;
        s->skipping = false;
        s->broken = false;
}

/* Reads what was added to s since the last read. */
static void source_read(struct jit_symbols *j, struct jit_source *s) {
        if (s->fd < 0)
                return;
        if (rewritten(s))
                source_restart(j, s);
        if (s->broken)
                return;
        j->reading_dump = s->dump;
        for (;;) {
                if (s->len >= JIT_RECORD_MAX) {
                        /* One entry longer than any runtime writes. */
                        if (s->dump) {
                                s->broken = true;
                                return;
                        }
                        s->len = 0;
                        s->skipping = true;
                }
                if (GREEDY_REALLOC_MIN(s->buf, s->cap, s->len + READ_CHUNK, READ_CHUNK) < 0)
                        return;
                ssize_t n = pread(s->fd, s->buf + s->len, s->cap - s->len, (off_t) s->offset);
                if (n <= 0)
                        return;
                if (s->offset == 0) {
                        s->head_len = MIN((size_t) n, sizeof(s->head));
                        memcpy(s->head, s->buf + s->len, s->head_len);
                }
                s->offset += (uint64_t) n;
                /* The last bytes read, for rewritten(). */
                const uint8_t *got = s->buf + s->len;
                if ((size_t) n >= sizeof(s->tail)) {
                        memcpy(s->tail, got + n - sizeof(s->tail), sizeof(s->tail));
                        s->tail_len = sizeof(s->tail);
                } else {
                        size_t keep = MIN(s->tail_len, sizeof(s->tail) - (size_t) n);
                        memmove(s->tail, s->tail + s->tail_len - keep, keep);
                        memcpy(s->tail + keep, got, (size_t) n);
                        s->tail_len = keep + (size_t) n;
                }
                s->len += (size_t) n;
                size_t start = 0;
                if (s->skipping) {
                        uint8_t *nl = memchr(s->buf, '\n', s->len);
                        if (!nl) {
                                s->len = 0;
                                continue;
                        }
                        start = (size_t) (nl - s->buf) + 1;
                        s->skipping = false;
                }
                long used = s->dump ? jit_parse_jitdump(s->buf + start, s->len - start, &s->header_done, add_entry, j)
                                    : jit_parse_perf_map((const char *) s->buf + start, s->len - start, add_entry, j);
                if (used < 0) {
                        s->broken = used != -ENOMEM;
                        return;
                }
                size_t consumed = start + (size_t) used;
                memmove(s->buf, s->buf + consumed, s->len - consumed);
                s->len -= consumed;
        }
}

static void refresh(struct proc_table *t, struct proc_info *p, struct jit_symbols *j) {
        const char *proc_dir = proc_table_proc_dir(t);
        if (!j->ids_read)
                read_ids(proc_dir, p, j);
        if (j->map.fd < 0) {
                char path[64];
                snprintf(path, sizeof(path), JIT_PERF_MAP_DIR "/perf-%d.map", j->nspid);
                j->map.fd = open_for(proc_dir, p, j, path, j->nspid == p->pid, NULL);
        }
        const char *dump = jitdump_path(p);
        if (dump) {
                uint64_t inode = 0;
                int fd = j->dump.fd < 0 ? open_for(proc_dir, p, j, dump, true, &inode) : -1;
                if (fd >= 0 && inode != j->dump_inode) {
                        j->dump.fd = fd;
                        j->dump_inode = inode;
                } else if (fd >= 0)
                        close(fd);
        }
        size_t before = j->n;
        uint64_t seq = j->seq;
        source_read(j, &j->map);
        source_read(j, &j->dump);
        if (j->n != before || j->seq != seq) {
                qsort(j->v, j->n, sizeof(*j->v), cmp_entry);
                j->n_sorted = j->n;
                p->maps_version++;
        }
}

const char *jit_symbols_lookup(struct proc_table *t, struct proc_info *p, uint64_t pc) {
        if (!p)
                return NULL;
        struct jit_symbols *j = p->jit;
        if (!j) {
                j = calloc(1, sizeof(*j));
                if (!j)
                        return NULL;
                j->map.fd = j->dump.fd = -1;
                j->dump.dump = true;
                p->jit = j;
        }
        const struct jit_entry *e = find(j, pc);
        if (e)
                return e->name;
        uint64_t now = now_usec();
        if (j->last_refresh && now - j->last_refresh < JIT_REFRESH_USEC)
                return NULL;
        j->last_refresh = now;
        refresh(t, p, j);
        e = find(j, pc);
        return e ? e->name : NULL;
}
