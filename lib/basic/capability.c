/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <linux/capability.h>
#include <stdio.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/capability.h"
#include "basic/macro.h"

const char *capability_name(unsigned cap) {
        static const char *const names[] = {
                "CAP_CHOWN",           "CAP_DAC_OVERRIDE",   "CAP_DAC_READ_SEARCH", "CAP_FOWNER",
                "CAP_FSETID",          "CAP_KILL",           "CAP_SETGID",          "CAP_SETUID",
                "CAP_SETPCAP",         "CAP_LINUX_IMMUTABLE", "CAP_NET_BIND_SERVICE", "CAP_NET_BROADCAST",
                "CAP_NET_ADMIN",       "CAP_NET_RAW",        "CAP_IPC_LOCK",        "CAP_IPC_OWNER",
                "CAP_SYS_MODULE",      "CAP_SYS_RAWIO",      "CAP_SYS_CHROOT",      "CAP_SYS_PTRACE",
                "CAP_SYS_PACCT",       "CAP_SYS_ADMIN",      "CAP_SYS_BOOT",        "CAP_SYS_NICE",
                "CAP_SYS_RESOURCE",    "CAP_SYS_TIME",       "CAP_SYS_TTY_CONFIG",  "CAP_MKNOD",
                "CAP_LEASE",           "CAP_AUDIT_WRITE",    "CAP_AUDIT_CONTROL",   "CAP_SETFCAP",
                "CAP_MAC_OVERRIDE",    "CAP_MAC_ADMIN",      "CAP_SYSLOG",          "CAP_WAKE_ALARM",
                "CAP_BLOCK_SUSPEND",   "CAP_AUDIT_READ",     "CAP_PERFMON",         "CAP_BPF",
                "CAP_CHECKPOINT_RESTORE",
        };
        return cap < ELEMENTSOF(names) ? names[cap] : NULL;
}

char *capability_mask_names(uint64_t mask, char *buf, size_t size) {
        size_t len = 0;
        if (size == 0)
                return buf;
        buf[0] = '\0';
        for (unsigned cap = 0; cap < 64 && len < size; cap++) {
                if (!(mask & ((uint64_t) 1 << cap)))
                        continue;
                const char *n = capability_name(cap);
                int k = n ? snprintf(buf + len, size - len, "%s%s", len ? " " : "", n)
                          : snprintf(buf + len, size - len, "%s%u", len ? " " : "", cap);
                if (k < 0)
                        break;
                len += (size_t) k;
        }
        if (!buf[0])
                snprintf(buf, size, "none");
        return buf;
}

int capability_keep(uint64_t keep, uint64_t *ret_kept) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2];
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        uint64_t permitted = (uint64_t) data[0].permitted | ((uint64_t) data[1].permitted << 32);
        uint64_t mask = keep & permitted;
        data[0].effective = data[0].permitted = data[0].inheritable = (uint32_t) mask;
        data[1].effective = data[1].permitted = data[1].inheritable = (uint32_t) (mask >> 32);
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;
        if (ret_kept)
                *ret_kept = mask;
        return 0;
}

uint64_t capability_for_kernel(uint64_t mask) {
        const uint64_t perfmon = (uint64_t) 1 << 38, sys_admin = (uint64_t) 1 << 21;
        if (!(mask & perfmon))
                return mask;
        FILE *f = fopen("/proc/sys/kernel/cap_last_cap", "re");
        int last = 63;
        if (f) {
                if (fscanf(f, "%d", &last) != 1)
                        last = 63;
                fclose(f);
        }
        return last < 38 ? mask | sys_admin : mask;
}
