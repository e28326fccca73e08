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

int ksyms_load(FILE *f, struct ksyms **ret) {
        struct ksyms *k = calloc(1, sizeof(*k));
        size_t syms_cap = 0, names_cap = 0;
        bool nonzero = false, any = false;
        char line[512];

        if (!k)
                return -ENOMEM;
        while (fgets(line, sizeof(line), f)) {
                char *end, type, *name;
                uint64_t addr = strtoull(line, &end, 16);
                if (end == line || *end != ' ' || !end[1] || end[2] != ' ')
                        continue;
                any = true;
                type = end[1];
                name = end + 3;
                size_t len = strcspn(name, " \t\n");
                if (addr != 0)
                        nonzero = true;
                if (!is_text(type) || len == 0 || len >= MAX_NAME || addr == 0)
                        continue;
                if (k->n == MAX_SYMBOLS)
                        break;
                if (GREEDY_REALLOC_MIN(k->syms, syms_cap, k->n + 1, 4096) < 0)
                        goto oom;
                if (GREEDY_REALLOC_MIN(k->names, names_cap, k->names_len + len + 1, 65536) < 0)
                        goto oom;
                k->syms[k->n++] = (struct ksym) { .addr = addr, .name = (uint32_t) k->names_len };
                memcpy(k->names + k->names_len, name, len);
                k->names[k->names_len + len] = '\0';
                k->names_len += len + 1;
        }
        if (any && !nonzero) {
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
        qsort(k->syms, k->n, sizeof(*k->syms), cmp_ksym);
        *ret = k;
        return 0;
oom:
        ksyms_free(k);
        return -ENOMEM;
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
