/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "cpuinfo.h"
#include "files.h"

#define MAX_FREQS 256

struct cpu_block {
        long index; /* -1: no "processor" line yet */
        char model[256];
        bool has_arm[5];
        uint32_t arm[5]; /* implementer, architecture, variant, part, revision */
};

/* Arm identifier keys, in ArmCpuIdentifier's field order, and their base. */
static const struct {
        const char *key;
        int base;
} arm_keys[5] = {
        { "CPU implementer", 16 }, { "CPU architecture", 10 }, { "CPU variant", 16 },
        { "CPU part", 16 },        { "CPU revision", 10 },
};

static int cmp_u32(const void *a, const void *b) {
        uint32_t x = *(const uint32_t *) a, y = *(const uint32_t *) b;
        return x < y ? -1 : x > y;
}

/* Frequencies of cpu file name under root appended to f. */
static void read_freqs(const char *root, long cpu, const char *name, uint32_t *f, size_t *n) {
        char path[128], buf[4096];
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/cpufreq/%s", cpu, name);
        int fd = file_open(root, path);
        if (fd < 0)
                return;
        ssize_t len = read(fd, buf, sizeof(buf) - 1);
        safe_close(fd);
        if (len <= 0)
                return;
        buf[len] = '\0';
        char *p = buf, *end;
        while (*n < MAX_FREQS) {
                unsigned long v = strtoul(p, &end, 10);
                if (end == p)
                        break;
                f[(*n)++] = (uint32_t) v;
                p = end;
        }
}

static void write_cpu(const struct cpu_block *b, const char *processor, const char *root, CpuInfo *out) {
        CpuInfo_Cpu cpu;
        uint32_t f[MAX_FREQS];
        size_t n = 0;
        char path[128], line[32];
        CpuInfo_begin_cpus(out, &cpu);
        CpuInfo_Cpu_set_processor(&cpu, b->model[0] ? b->model : processor);
        read_freqs(root, b->index, "scaling_available_frequencies", f, &n);
        read_freqs(root, b->index, "scaling_boost_frequencies", f, &n);
        qsort(f, n, sizeof(f[0]), cmp_u32);
        for (size_t i = 0; i < n; i++)
                if (i == 0 || f[i] != f[i - 1])
                        CpuInfo_Cpu_add_frequencies(&cpu, f[i]);
        snprintf(path, sizeof(path), "/sys/devices/system/cpu/cpu%ld/cpu_capacity", b->index);
        if (file_read_line(root, path, line, sizeof(line)) == 0 && line[0] >= '0' && line[0] <= '9')
                CpuInfo_Cpu_set_capacity(&cpu, (uint32_t) strtoul(line, NULL, 10));
        bool all = true;
        for (unsigned i = 0; i < 5; i++)
                all = all && b->has_arm[i];
        if (all) {
                /* implementer, architecture, variant, part, revision */
                CpuInfo_ArmCpuIdentifier arm;
                CpuInfo_Cpu_begin_arm_identifier(&cpu, &arm);
                CpuInfo_ArmCpuIdentifier_set_implementer(&arm, b->arm[0]);
                CpuInfo_ArmCpuIdentifier_set_architecture(&arm, b->arm[1]);
                CpuInfo_ArmCpuIdentifier_set_variant(&arm, b->arm[2]);
                CpuInfo_ArmCpuIdentifier_set_part(&arm, b->arm[3]);
                CpuInfo_ArmCpuIdentifier_set_revision(&arm, b->arm[4]);
                CpuInfo_Cpu_end_arm_identifier(&cpu, &arm);
        }
        CpuInfo_end_cpus(out, &cpu);
}

/* "key<tabs/spaces>: value" into its trimmed key and value. */
static bool split_line(char *line, char **ret_key, char **ret_value) {
        char *colon = strchr(line, ':');
        if (!colon)
                return false;
        char *k_end = colon;
        while (k_end > line && (k_end[-1] == ' ' || k_end[-1] == '\t'))
                k_end--;
        *k_end = '\0';
        char *v = colon + 1;
        while (*v == ' ' || *v == '\t')
                v++;
        *ret_key = line;
        *ret_value = v;
        return true;
}

int cpuinfo_write(const char *text, size_t len, const char *root, CpuInfo *out) {
        struct cpu_block *blocks = NULL;
        size_t n = 0, cap = 0;
        char processor[256] = "unknown";
        const char *p = text, *end = text + len;
        struct cpu_block cur = { .index = -1 };
        for (;;) {
                const char *nl = p < end ? memchr(p, '\n', (size_t) (end - p)) : NULL;
                const char *e = nl ? nl : end;
                bool blank = e == p;
                if ((blank || p >= end) && cur.index >= 0) {
                        if (GREEDY_REALLOC(blocks, cap, n + 1) < 0) {
                                free(blocks);
                                return -ENOMEM;
                        }
                        blocks[n++] = cur;
                        cur = (struct cpu_block) { .index = -1 };
                }
                if (p >= end)
                        break;
                char line[512], *k, *v;
                size_t l = MIN((size_t) (e - p), sizeof(line) - 1);
                memcpy(line, p, l);
                line[l] = '\0';
                p = nl ? nl + 1 : end;
                if (!split_line(line, &k, &v))
                        continue;
                if (strcmp(k, "processor") == 0)
                        cur.index = strtol(v, NULL, 10);
                else if (strcmp(k, "Processor") == 0)
                        snprintf(processor, sizeof(processor), "%.255s", v);
                else if (strcmp(k, "model name") == 0)
                        snprintf(cur.model, sizeof(cur.model), "%.255s", v);
                else
                        for (unsigned i = 0; i < 5; i++)
                                if (strcmp(k, arm_keys[i].key) == 0) {
                                        cur.arm[i] = (uint32_t) strtoul(v, NULL, arm_keys[i].base);
                                        cur.has_arm[i] = true;
                                }
        }
        /* "Processor" may come after the blocks (older Arm kernels): the
         * names are written once all is read. */
        for (size_t i = 0; i < n; i++)
                write_cpu(&blocks[i], processor, root, out);
        free(blocks);
        return out->msg.stream->error < 0 ? out->msg.stream->error : (int) n;
}
