/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "basic/macro.h"
#include "cpus.h"

int cpus_online(uint32_t *cpus, size_t max, size_t *ret_n) {
        FILE *f = fopen("/sys/devices/system/cpu/online", "re");
        char buf[1024], *save = NULL;
        size_t n = 0;
        if (!f)
                return negative_errno();
        if (!fgets(buf, sizeof(buf), f)) {
                fclose(f);
                return -EIO;
        }
        fclose(f);
        /* "0-3,5,7-8" */
        for (char *tok = strtok_r(buf, ",\n", &save); tok; tok = strtok_r(NULL, ",\n", &save)) {
                unsigned a, b;
                int k = sscanf(tok, "%u-%u", &a, &b);
                if (k == 1)
                        b = a;
                else if (k != 2)
                        continue;
                for (unsigned c = a; c <= b && n < max; c++)
                        cpus[n++] = c;
        }
        *ret_n = n;
        return 0;
}

bool cpus_contain(const uint32_t *cpus, size_t n, uint32_t cpu) {
        for (size_t i = 0; i < n; i++)
                if (cpus[i] == cpu)
                        return true;
        return false;
}
