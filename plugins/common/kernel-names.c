/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Kernel addresses named by the profilers' BPF program as they are met (a
 * stack's new ones in one run) and kept (see kernel-names.h). */

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

#include "basic/hashmap.h"
#include "basic/macro.h"
#include "common/kernel-names.h"
#include "kernelnames.h"
#include "kernelnames.skel.h"
#include "profiling/ksyms.h"

/* Addresses kept at most: past that the table starts again (a session
 * that keeps meeting new kernel addresses pays a run per address). */
#define CACHE_MAX (1u << 16)

struct kernel_names {
        struct kernelnames *skel;
        int prog;
        struct hashmap names;   /* address -> its name (char *), 0 for none */
        struct ksyms *kallsyms; /* read at the first address the program does not name */
        bool kallsyms_tried;
        struct kernel_names_stats st;
};

static int quiet(enum libbpf_print_level level, const char *fmt, va_list ap) {
        (void) level, (void) fmt, (void) ap;
        return 0;
}

int kernel_names_new(struct kernel_names **ret) {
        _cleanup_free_ struct kernel_names *k = calloc(1, sizeof(*k));
        if (!k)
                return -ENOMEM;
        libbpf_print_fn_t old = libbpf_set_print(quiet);
        k->skel = kernelnames__open_and_load();
        int r = k->skel ? 0 : negative_errno();
        (void) libbpf_set_print(old);
        if (r < 0 || !k->skel->bss) {
                /* No mmap'able global data: nothing to hand addresses over in. */
                kernelnames__destroy(k->skel);
                return r < 0 ? r : -EOPNOTSUPP;
        }
        k->prog = bpf_program__fd(k->skel->progs.ksym_names);
        *ret = TAKE_PTR(k);
        return 0;
}

static void names_clear(struct hashmap *names) {
        size_t iter = 0;
        uint64_t v;
        while (hashmap_next(names, &iter, NULL, &v))
                free((char *) (uintptr_t) v);
        hashmap_clear(names);
}

void kernel_names_free(struct kernel_names *k) {
        if (!k)
                return;
        names_clear(&k->names);
        ksyms_free(k->kallsyms);
        kernelnames__destroy(k->skel);
        free(k);
}

static char *name_of(const char *printed, int len) {
        if (len <= 1 || len > KERNEL_NAMES_NAME_MAX || !strncmp(printed, "0x", 2))
                return NULL;
        /* "function [module]": the function. */
        size_t n = strcspn(printed, " ");
        return n ? strndup(printed, n) : NULL;
}

static char *from_kallsyms(struct kernel_names *k, uint64_t addr) {
        if (!k->kallsyms_tried) {
                k->kallsyms_tried = true;
                (void) ksyms_load_proc(&k->kallsyms);
        }
        const char *fn = k->kallsyms ? ksyms_lookup(k->kallsyms, addr) : NULL;
        return fn ? strdup(fn) : NULL;
}

/* Names addrs[0..n) (n at most KERNEL_NAMES_BATCH, none kept yet, no two
 * alike) in one run and keeps them. */
static void name_batch(struct kernel_names *k, const uint64_t *addrs, size_t n) {
        struct kernelnames__bss *bss = k->skel->bss;
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
                if (hashmap_size(&k->names) >= CACHE_MAX)
                        names_clear(&k->names);
                if (hashmap_put_ptr(&k->names, addrs[j], name) < 0)
                        free(name);
        }
}

void kernel_names_prefetch(struct kernel_names *k, const uint64_t *addrs, size_t n) {
        uint64_t batch[KERNEL_NAMES_BATCH];
        size_t m = 0;
        for (size_t i = 0; i < n; i++) {
                uint64_t a = addrs[i];
                if (!a || hashmap_get(&k->names, a, NULL))
                        continue;
                bool dup = false;
                for (size_t j = 0; j < m && !dup; j++)
                        dup = batch[j] == a;
                if (dup)
                        continue;
                batch[m++] = a;
                if (m == KERNEL_NAMES_BATCH) {
                        name_batch(k, batch, m);
                        m = 0;
                }
        }
        if (m)
                name_batch(k, batch, m);
}

const char *kernel_names_lookup(void *userdata, uint64_t addr) {
        struct kernel_names *k = userdata;
        if (!addr)
                return NULL;
        uint64_t v;
        if (!hashmap_get(&k->names, addr, &v)) {
                name_batch(k, &addr, 1);
                if (!hashmap_get(&k->names, addr, &v))
                        return NULL;
        }
        return (const char *) (uintptr_t) v;
}

void kernel_names_stats(const struct kernel_names *k, struct kernel_names_stats *ret) {
        *ret = k->st;
        ret->cached = hashmap_size(&k->names);
}
