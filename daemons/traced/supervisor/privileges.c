/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <grp.h>
#include <linux/capability.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "basic/capability.h"
#include "basic/macro.h"
#include "supervisor/privileges.h"

int privileges_lookup_user(const char *name, uid_t *ret_uid, gid_t *ret_gid) {
        if (!name || !name[0])
                return -EINVAL;
        char *end;
        errno = 0;
        unsigned long n = strtoul(name, &end, 10);
        if (*end == '\0' && errno == 0 && n < (unsigned long) (uid_t) -1) {
                *ret_uid = (uid_t) n;
                struct passwd *pw = getpwuid((uid_t) n);
                *ret_gid = pw ? pw->pw_gid : (gid_t) n;
                return 0;
        }
        errno = 0;
        struct passwd *pw = getpwnam(name);
        if (!pw)
                return errno > 0 ? -errno : -ESRCH;
        *ret_uid = pw->pw_uid;
        *ret_gid = pw->pw_gid;
        return 0;
}

static int caps_get(uint64_t *ret_effective, uint64_t *ret_permitted) {
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = {};
        if (syscall(SYS_capget, &hdr, data) < 0)
                return -errno;
        *ret_effective = (uint64_t) data[0].effective | ((uint64_t) data[1].effective << 32);
        *ret_permitted = (uint64_t) data[0].permitted | ((uint64_t) data[1].permitted << 32);
        return 0;
}

int privileges_drop(uid_t uid, gid_t gid) {
        /* The bounding set first: emptying it needs CAP_SETPCAP, which the
         * switch of user takes away. Without it (not started as root) the
         * set stays as it is, which no_new_privs makes harmless. */
        for (unsigned cap = 0; cap < 64; cap++)
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL && errno != EPERM)
                        return -errno;

        if (geteuid() == 0 && uid != 0) {
                if (setgroups(0, NULL) < 0)
                        return -errno;
                if (setresgid(gid, gid, gid) < 0)
                        return -errno;
                if (setresuid(uid, uid, uid) < 0)
                        return -errno;
        }

        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct none[2] = {};
        if (syscall(SYS_capset, &hdr, none) < 0)
                return -errno;
        if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;

        uint64_t eff = ~0ull, perm = ~0ull;
        int r = caps_get(&eff, &perm);
        if (r < 0)
                return r;
        if (eff != 0 || perm != 0)
                return -EPERM;
        if (uid != 0 && (getuid() == 0 || geteuid() == 0))
                return -EPERM;
        return 0;
}

int privileges_enter_host(uid_t uid, gid_t gid, uint64_t keep) {
        uint64_t mask = 0;
        int r;

        /* Bounding set first, while CAP_SETPCAP is still held. */
        for (unsigned cap = 0; cap < 64; cap++) {
                if (keep & ((uint64_t) 1 << cap))
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EINVAL)
                        return -errno;
        }
        if (prctl(PR_SET_KEEPCAPS, 1, 0, 0, 0) < 0)
                return -errno;
        if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0)
                return -errno;
        /* Ambient capabilities must be permitted and inheritable. */
        r = capability_keep(keep, &mask);
        if (r < 0)
                return r;
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0)
                return -errno;
        for (unsigned cap = 0; cap < 64; cap++)
                if ((mask & ((uint64_t) 1 << cap)) && prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_RAISE, cap, 0, 0) < 0)
                        return -errno;
        if (prctl(PR_SET_KEEPCAPS, 0, 0, 0, 0) < 0 || prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0)
                return -errno;
        if (getuid() != uid || geteuid() != uid || getegid() != gid)
                return -EPERM;
        return 0;
}

int privileges_limit(uint64_t keep, uint64_t *ret_kept) {
        for (unsigned cap = 0; cap < 64; cap++) {
                if (keep & ((uint64_t) 1 << cap))
                        continue;
                if (prctl(PR_CAPBSET_READ, cap, 0, 0, 0) != 1)
                        continue;
                if (prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) < 0 && errno != EPERM)
                        return -errno;
        }
        if (prctl(PR_CAP_AMBIENT, PR_CAP_AMBIENT_CLEAR_ALL, 0, 0, 0) < 0 && errno != EINVAL)
                return -errno;

        uint64_t eff, perm;
        int r = caps_get(&eff, &perm);
        if (r < 0)
                return r;
        uint64_t mask = perm & keep;
        struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
        struct __user_cap_data_struct data[2] = {
                { .effective = (uint32_t) mask, .permitted = (uint32_t) mask },
                { .effective = (uint32_t) (mask >> 32), .permitted = (uint32_t) (mask >> 32) },
        };
        if (syscall(SYS_capset, &hdr, data) < 0)
                return -errno;

        r = caps_get(&eff, &perm);
        if (r < 0)
                return r;
        if ((eff | perm) & ~keep)
                return -EPERM;
        /* Holding anything (started as root), the bounding set must have
         * shrunk too; without CAP_SETPCAP it cannot, and nothing is held. */
        for (unsigned cap = 0; cap < 64 && perm != 0; cap++)
                if (!(keep & ((uint64_t) 1 << cap)) && prctl(PR_CAPBSET_READ, cap, 0, 0, 0) == 1)
                        return -EPERM;
        if (ret_kept)
                *ret_kept = eff;
        return 0;
}
