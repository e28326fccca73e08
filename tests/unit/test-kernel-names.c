/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* The profilers' kernel frames named on demand (kernel-names.c) against
 * /proc/kallsyms read whole: the same function for each address, the
 * module's name left out, nothing for an address no symbol holds, and
 * each address named by one run of the BPF program at most. Needs root
 * (CAP_BPF, CAP_SYSLOG for real addresses) and a kernel that runs
 * BPF_PROG_TYPE_SYSCALL programs. */

#include <criterion/criterion.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/kernel-names.h"

struct ksym {
        unsigned long long addr;
        char name[512];
};

/* The text symbols of /proc/kallsyms, in its order (by address for the
 * kernel's own). */
static struct ksym *read_kallsyms(size_t *ret_n) {
        FILE *f = fopen("/proc/kallsyms", "re");
        cr_assert(f, "/proc/kallsyms: %s", strerror(errno));
        size_t n = 0, cap = 0;
        struct ksym *v = NULL;
        char line[1024], type;
        struct ksym k;
        while (fgets(line, sizeof(line), f)) {
                if (sscanf(line, "%llx %c %511s", &k.addr, &type, k.name) != 3 || (type != 't' && type != 'T'))
                        continue;
                if (n == cap) {
                        cap = cap ? cap * 2 : 4096;
                        v = realloc(v, cap * sizeof(*v));
                        cr_assert(v);
                }
                v[n++] = k;
        }
        fclose(f);
        *ret_n = n;
        return v;
}

/* Each test's program and /proc/kallsyms, read once. */
static struct kernel_names *k;
static struct ksym *v;
static size_t n;

static void load_or_skip(void) {
        int r = kernel_names_new(&k);
        if (r < 0)
                cr_skip_test("the kernel-name BPF program does not load here (%s): it needs CAP_BPF and "
                             "BPF_PROG_TYPE_SYSCALL (Linux 5.14)",
                             strerror(-r));
        v = read_kallsyms(&n);
        cr_assert_gt(n, 1000);
        cr_assert_neq(v[0].addr, 0, "kallsyms reads as zeros: run as root");
}

static void unload(void) {
        free(v);
        kernel_names_free(k);
        v = NULL;
        k = NULL;
}

/* Every name given at addr: aliases share an address, and either is the
 * function's. */
static bool named_at(size_t i, const char *name) {
        size_t lo = i;
        while (lo > 0 && v[lo - 1].addr == v[i].addr)
                lo--;
        for (size_t j = lo; j < n && v[j].addr == v[i].addr; j++)
                if (!strcmp(v[j].name, name))
                        return true;
        return false;
}

TestSuite(kernel_names, .init = load_or_skip, .fini = unload);

Test(kernel_names, names_what_kallsyms_names) {
        /* Spread over the kernel's own symbols (sorted by address), each at
         * its start and a few bytes into it. */
        size_t checked = 0, core = 0;
        while (core + 1 < n && v[core + 1].addr >= v[core].addr)
                core++;
        for (size_t i = 1; i < core; i += core / 400) {
                if (v[i + 1].addr <= v[i].addr + 4 || v[i].addr == v[i - 1].addr)
                        continue;
                const char *at = kernel_names_lookup(k, v[i].addr);
                cr_assert(at && named_at(i, at), "%llx: %s, kallsyms says %s", v[i].addr, at ? at : "(none)",
                          v[i].name);
                const char *in = kernel_names_lookup(k, v[i].addr + 3);
                cr_assert(in && named_at(i, in), "%llx+3: %s, kallsyms says %s", v[i].addr,
                          in ? in : "(none)", v[i].name);
                checked++;
        }
        cr_assert_gt(checked, 200);
        struct kernel_names_stats st;
        kernel_names_stats(k, &st);
        cr_assert_eq(st.named, 2 * checked);
        cr_assert_eq(st.kallsyms + st.unnamed, 0, "%llu from kallsyms, %llu unnamed",
                     (unsigned long long) st.kallsyms, (unsigned long long) st.unnamed);
}

Test(kernel_names, each_address_named_once_a_batch_a_run) {
        uint64_t addrs[40];
        for (size_t i = 0; i < 40; i++)
                addrs[i] = v[(i + 1) * (n / 50)].addr + 1;
        addrs[39] = addrs[0]; /* twice in one sample */
        kernel_names_prefetch(k, addrs, 40);
        struct kernel_names_stats st;
        kernel_names_stats(k, &st);
        /* 39 new addresses: a full batch of 32 and one of 7. */
        cr_assert_eq(st.runs, 2);
        cr_assert_eq(st.cached, 39);
        for (size_t i = 0; i < 40; i++)
                cr_assert_not_null(kernel_names_lookup(k, addrs[i]));
        kernel_names_prefetch(k, addrs, 40);
        kernel_names_stats(k, &st);
        cr_assert_eq(st.runs, 2, "kept names looked up again: %llu runs", (unsigned long long) st.runs);
}

Test(kernel_names, module_names_left_out_and_no_symbol_no_name) {
        /* An address below every kernel symbol: the program prints it in
         * hex, kallsyms names nothing there either. */
        cr_assert_null(kernel_names_lookup(k, 0x1000));
        struct kernel_names_stats st;
        kernel_names_stats(k, &st);
        cr_assert_eq(st.unnamed, 1);
        /* A module's function, when one is loaded: its name alone. */
        FILE *f = fopen("/proc/kallsyms", "re");
        char line[1024], name[512], mod[128], type;
        unsigned long long addr;
        bool found = false;
        while (!found && fgets(line, sizeof(line), f))
                found = sscanf(line, "%llx %c %511s [%127[^]]]", &addr, &type, name, mod) == 4 &&
                        (type == 't' || type == 'T') && strncmp(mod, "__builtin", 9) && strncmp(mod, "bpf", 3);
        fclose(f);
        if (found) {
                const char *got = kernel_names_lookup(k, addr);
                cr_assert(got && !strchr(got, ' ') && !strchr(got, '['), "%s [%s]: %s", name, mod,
                          got ? got : "(none)");
        } else
                cr_log_info("no module loaded: the module case is not checked");
}
