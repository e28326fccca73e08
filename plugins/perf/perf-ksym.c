/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Kernel addresses named by linux.perf's BPF program as the worker meets
 * them (a sample's new ones in one run) and kept (see perf-ksym.h). */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/macro.h"
#include "perf-ksym.h"
#include "perfksym.h"
#include "perfksym.skel.h"
#include "profiling/ksyms.h"

/* Addresses kept at most: past that the table starts again (a session
 * that keeps meeting new kernel addresses pays a run per address). */
#define CACHE_MAX (1u << 16)
#define CACHE_MIN 1024u

struct slot {
        uint64_t addr; /* 0: free */
        char *name;    /* NULL: unnamed */
};

struct perf_ksym {
        struct perfksym *skel;
        int prog;
        struct slot *slots;
        size_t cap, used;
        struct ksyms *kallsyms; /* read at the first address the program does not name */
        bool kallsyms_tried;
        struct perf_ksym_stats st;
};

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        (void) level, (void) fmt, (void) ap;
        return 0;
}

int perf_ksym_new(struct perf_ksym **ret) {
        _cleanup_free_ struct perf_ksym *k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        k->slots = calloc(CACHE_MIN, sizeof(*k->slots));
        if (!k->slots)
                return -ENOMEM;
        k->cap = CACHE_MIN;
        libbpf_print_fn_t old = libbpf_set_print(quiet);
        k->skel = perfksym__open_and_load();
        int r = k->skel ? 0 : negative_errno();
        (void) libbpf_set_print(old);
        if (r < 0 || !k->skel->bss) {
                /* No mmap'able global data: nothing to hand addresses over in. */
                perfksym__destroy(k->skel);
                free(k->slots);
                return r < 0 ? r : -EOPNOTSUPP;
        }
        k->prog = bpf_program__fd(k->skel->progs.ksym_names);
        *ret = TAKE_PTR(k);
        return 0;
}

static void slots_free(struct slot *slots, size_t cap) {
        for (size_t i = 0; i < cap; i++)
                free(slots[i].name);
        free(slots);
}

void perf_ksym_free(struct perf_ksym *k) {
        if (!k)
                return;
        slots_free(k->slots, k->cap);
        ksyms_free(k->kallsyms);
        perfksym__destroy(k->skel);
        free(k);
}

static size_t slot_of(const struct perf_ksym *k, uint64_t addr) {
        size_t mask = k->cap - 1;
        size_t i = (size_t) ((addr * 0x9e3779b97f4a7c15ull) >> 32) & mask;
        while (k->slots[i].addr && k->slots[i].addr != addr)
                i = (i + 1) & mask;
        return i;
}

/* Room for one more address: the table doubles, or, at its bound, starts
 * again. */
static int make_room(struct perf_ksym *k) {
        if ((k->used + 1) * 4 <= k->cap * 3)
                return 0;
        if (k->cap >= CACHE_MAX) {
                for (size_t i = 0; i < k->cap; i++) {
                        free(k->slots[i].name);
                        k->slots[i] = (struct slot) {};
                }
                k->used = 0;
                return 0;
        }
        struct slot *old = k->slots;
        size_t old_cap = k->cap;
        struct slot *slots = calloc(old_cap * 2, sizeof(*slots));
        if (!slots)
                return -ENOMEM;
        k->slots = slots;
        k->cap = old_cap * 2;
        for (size_t i = 0; i < old_cap; i++)
                if (old[i].addr)
                        k->slots[slot_of(k, old[i].addr)] = old[i];
        free(old);
        return 0;
}

/* The function's name out of what %ps printed, or NULL when it printed
 * none (the address in hex) or cut it short. */
static char *name_of(const char *printed, int len) {
        if (len <= 1 || len > PERF_KSYM_NAME_MAX || !strncmp(printed, "0x", 2))
                return NULL;
        /* "function [module]": the function. */
        size_t n = strcspn(printed, " ");
        return n ? strndup(printed, n) : NULL;
}

static char *from_kallsyms(struct perf_ksym *k, uint64_t addr) {
        if (!k->kallsyms_tried) {
                k->kallsyms_tried = true;
                (void) ksyms_load_proc(&k->kallsyms);
        }
        const char *fn = k->kallsyms ? ksyms_lookup(k->kallsyms, addr) : NULL;
        return fn ? strdup(fn) : NULL;
}

/* Names addrs[0..n) (n at most PERF_KSYM_BATCH, none kept yet, no two
 * alike) in one run and keeps them. */
static void name_batch(struct perf_ksym *k, const uint64_t *addrs, size_t n) {
        struct perfksym__bss *bss = k->skel->bss;
        bool ran = false;
        for (size_t j = 0; j < n; j++) {
                bss->ksym_addr[j] = addrs[j];
                bss->ksym_len[j] = -EINVAL;
        }
        bss->ksym_n = (uint32_t) n;
        LIBBPF_OPTS(bpf_test_run_opts, opts);
        if (bpf_prog_test_run_opts(k->prog, &opts) == 0) {
                k->st.runs++;
                ran = true;
        }
        for (size_t j = 0; j < n; j++) {
                char *name = ran ? name_of(bss->ksym_name[j], bss->ksym_len[j]) : NULL;
                if (name)
                        k->st.named++;
                else if ((name = from_kallsyms(k, addrs[j])))
                        k->st.kallsyms++;
                else
                        k->st.unnamed++;
                if (make_room(k) < 0) {
                        free(name);
                        continue;
                }
                k->slots[slot_of(k, addrs[j])] = (struct slot) { .addr = addrs[j], .name = name };
                k->used++;
        }
}

void perf_ksym_prefetch(struct perf_ksym *k, const uint64_t *addrs, size_t n) {
        uint64_t batch[PERF_KSYM_BATCH];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t a = addrs[i];
                if (!a || k->slots[slot_of(k, a)].addr)
                        continue;
                bool dup = false;
                for (size_t j = 0; j < m && !dup; j++)
                        dup = batch[j] == a;
                if (dup)
                        continue;
                batch[m++] = a;
                if (m == PERF_KSYM_BATCH) {
                        name_batch(k, batch, m);
                        m = 0;
                }
        }
        if (m)
                name_batch(k, batch, m);
}

const char *perf_ksym_lookup(void *userdata, uint64_t addr) {
        struct perf_ksym *k = userdata;
        if (!addr)
                return NULL;
        size_t i = slot_of(k, addr);
        if (!k->slots[i].addr) {
                name_batch(k, &addr, 1);
                i = slot_of(k, addr);
        }
        return k->slots[i].addr ? k->slots[i].name : NULL;
}

void perf_ksym_stats(const struct perf_ksym *k, struct perf_ksym_stats *ret) {
        *ret = k->st;
        ret->cached = k->used;
}
