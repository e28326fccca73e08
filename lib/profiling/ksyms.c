/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "profiling/ksyms.h"

/* A symbol past the last one is trusted this far from its start. */
#define LAST_SYMBOL_SPAN (64u * 1024u)
/* Sanity bounds on what the kernel hands us. */
#define MAX_SYMBOLS (4u * 1024u * 1024u)
#define MAX_NAME 256

struct ksym {
        uint64_t addr;
        uint32_t name; /* offset in names */
};

struct ksyms {
        struct ksym *syms;
        size_t n;
        char *names;
        size_t names_len;
};

static int cmp_ksym(const void *a, const void *b) {
        const struct ksym *x = a, *y = b;
        return x->addr < y->addr ? -1 : x->addr > y->addr;
}

static bool is_text(char type) {
        return type == 't' || type == 'T' || type == 'w' || type == 'W';
}

/* The value of the hex digit c, or -1. */
static int hex_digit(char c) {
        if (c >= '0' && c <= '9')
                return c - '0';
        c = (char) (c | 0x20);
        if (c >= 'a' && c <= 'f')
                return c - 'a' + 10;
        return -1;
}

struct ksyms_parse {
        struct ksyms *k;
        size_t syms_cap, names_cap;
        bool any, nonzero, sorted;
};

/* One line "ADDR TYPE NAME[\t[MODULE]]" (without its newline): false when
 * out of memory or past MAX_SYMBOLS. Lines of another form are skipped. */
static bool parse_line(struct ksyms_parse *p, const char *line, size_t len) {
        const char *end = line + len, *c = line;
        uint64_t addr = 0;
        int d, digits = 0;
        while (c < end && (d = hex_digit(*c)) >= 0 && digits < 16) {
                addr = addr << 4 | (uint64_t) d;
                c++, digits++;
        }
        if (digits == 0 || end - c < 3 || c[0] != ' ' || c[2] != ' ')
                return true;
        p->any = true;
        char type = c[1];
        const char *name = c + 3;
        size_t n = 0;
        while (name + n < end && name[n] != ' ' && name[n] != '\t')
                n++;
        if (addr != 0)
                p->nonzero = true;
        if (!is_text(type) || n == 0 || n >= MAX_NAME || addr == 0)
                return true;
        struct ksyms *k = p->k;
        if (k->n == MAX_SYMBOLS)
                return false;
        if (GREEDY_REALLOC_MIN(k->syms, p->syms_cap, k->n + 1, 4096) < 0 ||
            GREEDY_REALLOC_MIN(k->names, p->names_cap, k->names_len + n + 1, 65536) < 0)
                return false;
        if (k->n > 0 && addr < k->syms[k->n - 1].addr)
                p->sorted = false;
        k->syms[k->n++] = (struct ksym) { .addr = addr, .name = (uint32_t) k->names_len };
        memcpy(k->names + k->names_len, name, n);
        k->names[k->names_len + n] = '\0';
        k->names_len += n + 1;
        return true;
}

int ksyms_load(FILE *f, struct ksyms **ret) {
        /* The kernel writes /proc/kallsyms at the pace it is read: read in
         * large pieces, lines parsed where they lie, a line cut by the
         * piece's end moved to the front. */
        enum { CHUNK = 256 * 1024 };
        struct ksyms_parse p = { .sorted = true };
        _cleanup_free_ char *buf = malloc(CHUNK);
        if (!buf || !(p.k = calloc(1, sizeof(*p.k))))
                return -ENOMEM;
        size_t have = 0;
        bool ok = true, eof = false;
        while (ok && !eof) {
                size_t got = fread(buf + have, 1, CHUNK - have, f);
                eof = got < CHUNK - have;
                have += got;
                size_t at = 0;
                for (;;) {
                        const char *nl = memchr(buf + at, '\n', have - at);
                        if (!nl) {
                                /* The last line may lack its newline; one
                                 * longer than the buffer is no symbol's. */
                                if (eof || at == 0) {
                                        if (have > at && !(ok = parse_line(&p, buf + at, have - at)))
                                                break;
                                        at = have;
                                }
                                break;
                        }
                        size_t len = (size_t) (nl - (buf + at));
                        if (!(ok = parse_line(&p, buf + at, len)))
                                break;
                        at += len + 1;
                }
                memmove(buf, buf + at, have - at);
                have -= at;
        }
        struct ksyms *k = p.k;
        if (!ok && k->n != MAX_SYMBOLS) {
                ksyms_free(k);
                return -ENOMEM;
        }
        if (p.any && !p.nonzero) {
                ksyms_free(k);
                return -EPERM;
        }
        if (k->n == 0) {
                ksyms_free(k);
                return -ENODATA;
        }
        /* Give back what the doublings left unused. */
        struct ksym *syms = reallocarray(k->syms, k->n, sizeof(*syms));
        if (syms)
                k->syms = syms;
        char *names = realloc(k->names, k->names_len);
        if (names)
                k->names = names;
        /* The kernel's own symbols come in address order, modules' after
         * them: most tables need no sort. */
        if (!p.sorted)
                qsort(k->syms, k->n, sizeof(*k->syms), cmp_ksym);
        *ret = k;
        return 0;
}

int ksyms_load_proc(struct ksyms **ret) {
        FILE *f = fopen("/proc/kallsyms", "re");
        if (!f)
                return negative_errno();
        int r = ksyms_load(f, ret);
        fclose(f);
        return r;
}

void ksyms_free(struct ksyms *k) {
        if (!k)
                return;
        free(k->syms);
        free(k->names);
        free(k);
}

size_t ksyms_count(const struct ksyms *k) {
        return k ? k->n : 0;
}

const char *ksyms_lookup(const struct ksyms *k, uint64_t addr) {
        if (!k || k->n == 0 || addr < k->syms[0].addr)
                return NULL;
        /* The last symbol whose address is <= addr. */
        size_t lo = 0, hi = k->n;
        while (hi - lo > 1) {
                size_t mid = lo + (hi - lo) / 2;
                if (k->syms[mid].addr <= addr)
                        lo = mid;
                else
                        hi = mid;
        }
        if (lo == k->n - 1 && addr - k->syms[lo].addr >= LAST_SYMBOL_SPAN)
                return NULL;
        return k->names + k->syms[lo].name;
}

void kaddr_reset(struct kaddr_table *t) {
        memset(t->slots, 0, sizeof(t->slots));
        t->n = t->written = 0;
}

uint32_t kaddr_intern(struct kaddr_table *t, uint64_t addr) {
        const size_t mask = ELEMENTSOF(t->slots) - 1;
        size_t i = (size_t) ((addr * 0x9e3779b97f4a7c15ull) >> 40) & mask;
        for (;; i = (i + 1) & mask) {
                uint32_t iid = t->slots[i];
                if (iid == 0)
                        break;
                if (t->addrs[iid - 1] == addr)
                        return iid;
        }
        if (t->n == KADDR_MAX)
                return 0;
        t->addrs[t->n++] = addr;
        t->slots[i] = t->n;
        return t->n;
}

size_t ksyms_memory_bytes(const struct ksyms *k) {
        return k ? sizeof(*k) + k->n * sizeof(struct ksym) + k->names_len : 0;
}
