/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include "unwind-pending.h"

static void note_pc(struct pending_load *p, uint64_t pc) {
        if (!pc)
                return;
        for (size_t k = 0; k < p->n_pcs; k++)
                if (p->pcs[k] == pc)
                        return;
        if (p->n_pcs < PENDING_PCS) {
                p->pcs[p->n_pcs++] = pc;
                return;
        }
        p->pcs[p->next_pc] = pc; /* the oldest goes */
        p->next_pc = (uint8_t) ((p->next_pc + 1) % PENDING_PCS);
}

bool pending_add(struct pending_loads *l, int pid, uint32_t weight, uint64_t pc) {
        size_t coldest = SIZE_MAX; /* of those not waiting for compiles */
        for (size_t k = 0; k < l->n; k++) {
                struct pending_load *p = &l->v[k];
                if (p->pid == pid) {
                        p->hits += weight;
                        note_pc(p, pc);
                        return false;
                }
                if (!p->waiting && (coldest == SIZE_MAX || p->hits < l->v[coldest].hits))
                        coldest = k;
        }
        struct pending_load *p;
        if (l->n < PENDING_LOADS)
                p = &l->v[l->n++];
        else if (coldest != SIZE_MAX && l->v[coldest].hits < weight)
                p = &l->v[coldest];
        else
                return true;
        *p = (struct pending_load){.pid = pid, .hits = weight};
        note_pc(p, pc);
        return true;
}

void pending_sort(struct pending_loads *l) {
        for (size_t k = 1; k < l->n; k++) {
                struct pending_load p = l->v[k];
                size_t j = k;
                for (; j > 0 && l->v[j - 1].hits < p.hits; j--)
                        l->v[j] = l->v[j - 1];
                l->v[j] = p;
        }
}

bool pending_hot(const struct pending_load *p, uint64_t start, uint64_t end) {
        if (p->n_pcs == 0)
                return true;
        for (size_t k = 0; k < p->n_pcs; k++)
                if (p->pcs[k] >= start && p->pcs[k] < end)
                        return true;
        return false;
}
