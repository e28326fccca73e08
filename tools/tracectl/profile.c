/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* Folds PerfSample packets into call trees. Packets are read with the
 * small protobuf reader (no allocation per packet): a trace of a million
 * samples is mostly PerfSample packets, and unpacking each into generated
 * structs would cost more than the rest of the report. */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/pbr.h"
#include "profile.h"
#include "summary.h"

/* TracePacket fields (protos/perfetto/trace/trace_packet.proto) */
enum {
        PKT_PROCESS_TREE = 2,
        PKT_TIMESTAMP = 8,
        PKT_SEQ_ID = 10,
        PKT_INTERNED_DATA = 12,
        PKT_SEQUENCE_FLAGS = 13,
        PKT_INCREMENTAL_STATE_CLEARED = 41,
        PKT_PREVIOUS_PACKET_DROPPED = 42,
        PKT_FIRST_PACKET_ON_SEQUENCE = 87,
        PKT_DEFAULTS = 59,
        PKT_PERF_SAMPLE = 66,
        SEQ_INCREMENTAL_STATE_CLEARED = 1,
};

/* An interned table of one sequence: iid -> element. */
struct table {
        struct u64map index;
        void *v;
        size_t n, cap, esz;
};

struct seq_string {
        char *s;
};

struct seq_mapping {
        uint64_t build_id;
        uint64_t *path_ids;
        size_t n_path;
        char *path;             /* resolved on first use */
        const char *build_id_s; /* owned by the build_ids table */
        bool resolved;
};

struct seq_frame {
        uint64_t function_name_id, mapping_id, rel_pc;
        uint32_t kind;
        uint32_t sym; /* UINT32_MAX until resolved */
};

struct seq_callstack {
        uint64_t *frame_ids;
        size_t n_frames;
        uint32_t *syms; /* resolved on first use */
        uint64_t hash, check; /* two independent hashes of syms */
        bool resolved;
        /* the leaf this callstack reached last, under which thread node
         * (+1; 0: none) of which tree: most samples repeat it */
        uint32_t cache_thread, cache_leaf, cache_kind;
};

struct profile_seq {
        uint32_t id;
        struct table function_names, mapping_paths, build_ids, mappings, frames, callstacks;
        enum profile_kind kind;
        bool lost;
        /* the thread node of the last sample */
        bool have_last;
        uint32_t last_pid, last_tid, last_kind, last_thread;
};

static void *table_get(struct table *t, uint64_t iid) {
        uint32_t i;
        if (!u64map_get(&t->index, iid, &i))
                return NULL;
        return (uint8_t *) t->v + (size_t) i * t->esz;
}

/* A new zeroed element for iid; NULL if iid is already there (the first
 * definition stays) or on ENOMEM (*ret_r). */
static void *table_add(struct table *t, uint64_t iid, int *ret_r) {
        uint32_t i;
        *ret_r = 0;
        if (u64map_get(&t->index, iid, &i))
                return NULL;
        if (greedy_realloc((void **) &t->v, &t->cap, t->n + 1, t->esz, 16) < 0) {
                *ret_r = -ENOMEM;
                return NULL;
        }
        if (u64map_put(&t->index, iid, (uint32_t) t->n) < 0) {
                *ret_r = -ENOMEM;
                return NULL;
        }
        void *e = (uint8_t *) t->v + t->n * t->esz;
        memset(e, 0, t->esz);
        t->n++;
        return e;
}

static void table_done(struct table *t, void (*free_elem)(void *)) {
        for (size_t i = 0; free_elem && i < t->n; i++)
                free_elem((uint8_t *) t->v + i * t->esz);
        free(t->v);
        u64map_clear(&t->index);
        size_t esz = t->esz;
        *t = (struct table) { .esz = esz };
}

static void free_string(void *e) {
        free(((struct seq_string *) e)->s);
}
static void free_mapping(void *e) {
        free(((struct seq_mapping *) e)->path_ids);
        free(((struct seq_mapping *) e)->path);
}
static void free_callstack(void *e) {
        struct seq_callstack *c = e;
        free(c->frame_ids);
        free(c->syms);
}

static void seq_clear(struct profile_seq *s) {
        table_done(&s->function_names, free_string);
        table_done(&s->mapping_paths, free_string);
        table_done(&s->build_ids, free_string);
        table_done(&s->mappings, free_mapping);
        table_done(&s->frames, NULL);
        table_done(&s->callstacks, free_callstack);
        s->kind = PROFILE_ON_CPU;
        s->have_last = false;
}

static struct profile_seq *seq_get(struct profile *p, uint32_t id) {
        uint32_t i;
        if (p->last_seq && p->last_seq->id == id)
                return p->last_seq;
        if (u64map_get(&p->seq_index, id, &i))
                return (p->last_seq = p->seqs[i]);
        struct profile_seq **v = realloc(p->seqs, (p->n_seqs + 1) * sizeof(*v));
        if (!v)
                return NULL;
        p->seqs = v;
        struct profile_seq *s = calloc(1, sizeof(*s));
        if (!s)
                return NULL;
        *s = (struct profile_seq) {
                .id = id,
                .function_names.esz = sizeof(struct seq_string),
                .mapping_paths.esz = sizeof(struct seq_string),
                .build_ids.esz = sizeof(struct seq_string),
                .mappings.esz = sizeof(struct seq_mapping),
                .frames.esz = sizeof(struct seq_frame),
                .callstacks.esz = sizeof(struct seq_callstack),
        };
        if (u64map_put(&p->seq_index, id, (uint32_t) p->n_seqs) < 0) {
                free(s);
                return NULL;
        }
        p->seqs[p->n_seqs++] = s;
        p->last_seq = s;
        return s;
}

void profile_init(struct profile *p, const struct profile_filter *filter) {
        *p = (struct profile) {};
        if (filter)
                p->filter = *filter;
        else
                p->filter = (struct profile_filter) { .pid = -1, .tid = -1, .cpu = -1 };
        for (size_t k = 0; k < _PROFILE_KIND_MAX; k++)
                (void) profile_tree_child(&p->trees[k], UINT32_MAX, NODE_ROOT, 0);
        p->tree = &p->trees[PROFILE_ON_CPU];
}

void profile_tree_done(struct profile_tree *t) {
        free(t->nodes);
        u64map_clear(&t->children);
        *t = (struct profile_tree) {};
}

void profile_done(struct profile *p) {
        for (size_t i = 0; i < p->n_seqs; i++) {
                seq_clear(p->seqs[i]);
                free(p->seqs[i]);
        }
        free(p->seqs);
        u64map_clear(&p->seq_index);
        for (size_t i = 0; i < p->n_syms; i++) {
                free(p->syms[i].name);
                free(p->syms[i].module);
                free(p->syms[i].path);
                free(p->syms[i].build_id);
        }
        free(p->syms);
        u64map_clear(&p->sym_index);
        for (size_t i = 0; i < p->n_tasks; i++) {
                free(p->tasks[i].name);
                free(p->tasks[i].guess);
        }
        free(p->tasks);
        u64map_clear(&p->task_index);
        for (size_t k = 0; k < _PROFILE_KIND_MAX; k++) {
                profile_tree_done(&p->trees[k]);
                u64map_clear(&p->leaves[k]);
                free(p->leaf_entries[k]);
        }
        free(p->timebase);
        free(p->scratch);
        *p = (struct profile) {};
}

/* --- the call tree ------------------------------------------------------ */

uint32_t profile_tree_child(struct profile_tree *t, uint32_t parent, uint32_t kind, uint32_t value) {
        uint64_t key = ((uint64_t) (parent + 1) << 35) | ((uint64_t) kind << 32) | value;
        uint32_t i;
        if (u64map_get(&t->children, key, &i))
                return i;
        if (GREEDY_REALLOC_MIN(t->nodes, t->cap_nodes, t->n_nodes + 1, 256) < 0)
                return UINT32_MAX;
        i = (uint32_t) t->n_nodes;
        if (u64map_put(&t->children, key, i) < 0)
                return UINT32_MAX;
        t->n_nodes++;
        t->nodes[i] = (struct profile_node) {
                .parent = parent,
                .first_child = UINT32_MAX,
                .next_sibling = UINT32_MAX,
                .kind = kind,
                .value = value,
        };
        if (parent != UINT32_MAX) {
                t->nodes[i].depth = t->nodes[parent].depth + 1;
                t->nodes[i].next_sibling = t->nodes[parent].first_child;
                t->nodes[parent].first_child = i;
        }
        return i;
}

void profile_tree_totals(struct profile_tree *t) {
        /* Children always come after their parent: sum from the end. */
        for (size_t i = 0; i < t->n_nodes; i++)
                for (size_t m = 0; m < 2; m++)
                        t->nodes[i].total[m] = t->nodes[i].self[m];
        for (size_t i = t->n_nodes; i-- > 1;)
                for (size_t m = 0; m < 2; m++)
                        t->nodes[t->nodes[i].parent].total[m] += t->nodes[i].total[m];
}

/* --- names -------------------------------------------------------------- */

static uint64_t sym_key(const char *name, const char *module, bool kernel, uint64_t salt) {
        uint64_t h = fnv1a64(name, strlen(name));
        if (module)
                h ^= fnv1a64(module, strlen(module)) * 31;
        return h + kernel + salt * 0x9e3779b97f4a7c15ULL;
}

static bool streq_null(const char *a, const char *b) {
        return (!a && !b) || (a && b && strcmp(a, b) == 0);
}

uint32_t profile_intern_name(struct profile *p, const char *name, const char *module, bool kernel, bool symbolized,
                             const char *path, const char *build_id) {
        for (uint64_t salt = 0;; salt++) {
                uint32_t i;
                uint64_t key = sym_key(name, module, kernel, salt);
                if (!u64map_get(&p->sym_index, key, &i))
                        break;
                const struct profile_sym *s = &p->syms[i];
                if (strcmp(s->name, name) == 0 && streq_null(s->module, module) && s->kernel == kernel)
                        return i;
        }
        if (GREEDY_REALLOC_MIN(p->syms, p->cap_syms, p->n_syms + 1, 256) < 0)
                return UINT32_MAX;
        struct profile_sym s = {
                .name = strdup(name),
                .module = module ? strdup(module) : NULL,
                .path = path ? strdup(path) : NULL,
                .build_id = build_id ? strdup(build_id) : NULL,
                .kernel = kernel,
                .symbolized = symbolized,
        };
        if (!s.name || (module && !s.module) || (path && !s.path) || (build_id && !s.build_id)) {
                free(s.name);
                free(s.module);
                free(s.path);
                free(s.build_id);
                return UINT32_MAX;
        }
        uint32_t id = (uint32_t) p->n_syms;
        for (uint64_t salt = 0;; salt++) {
                uint32_t i;
                uint64_t key = sym_key(name, module, kernel, salt);
                if (u64map_get(&p->sym_index, key, &i))
                        continue;
                if (u64map_put(&p->sym_index, key, id) < 0) {
                        free(s.name);
                        free(s.module);
                        free(s.path);
                        free(s.build_id);
                        return UINT32_MAX;
                }
                break;
        }
        p->syms[p->n_syms++] = s;
        return id;
}

static struct profile_task *task_get(struct profile *p, bool process, int32_t id, bool create) {
        uint64_t key = ((uint64_t) process << 32) | (uint32_t) id;
        uint32_t i;
        if (u64map_get(&p->task_index, key, &i))
                return &p->tasks[i];
        if (!create)
                return NULL;
        if (GREEDY_REALLOC_MIN(p->tasks, p->cap_tasks, p->n_tasks + 1, 64) < 0)
                return NULL;
        if (u64map_put(&p->task_index, key, (uint32_t) p->n_tasks) < 0)
                return NULL;
        struct profile_task *t = &p->tasks[p->n_tasks++];
        *t = (struct profile_task) { .id = id };
        return t;
}

static void set_str(char **dst, const uint8_t *s, size_t n) {
        char *c = strndup((const char *) s, n);
        if (!c)
                return;
        free(*dst);
        *dst = c;
}

const char *profile_process_name(const struct profile *p, int32_t pid) {
        const struct profile_task *t = task_get((struct profile *) p, true, pid, false);
        if (t && t->name)
                return t->name;
        const struct profile_task *th = task_get((struct profile *) p, false, pid, false);
        if (th && th->name)
                return th->name;
        if (t && t->guess)
                return t->guess;
        return pid == 0 ? "[idle]" : "[unknown]";
}

const char *profile_thread_name(const struct profile *p, int32_t tid) {
        const struct profile_task *t = task_get((struct profile *) p, false, tid, false);
        if (t && t->name)
                return t->name;
        t = task_get((struct profile *) p, true, tid, false);
        if (t && (t->name || t->guess))
                return t->name ? t->name : t->guess;
        return tid == 0 ? "[idle]" : "[unknown]";
}

const char *profile_node_label(const struct profile *p, const struct profile_node *n, char *buf, size_t size) {
        const char *s;
        switch (n->kind) {
        case NODE_ROOT:
                s = "all";
                break;
        case NODE_PROCESS:
                s = profile_process_name(p, (int32_t) n->value);
                break;
        case NODE_THREAD:
                s = profile_thread_name(p, (int32_t) n->value);
                break;
        default:
                s = n->value < p->n_syms ? p->syms[n->value].name : "[unknown]";
        }
        size_t i = 0;
        for (; s[i] && i + 1 < size; i++)
                buf[i] = s[i] == ';' ? ':' : (s[i] == '\n' || s[i] == '\r') ? ' ' : s[i];
        buf[i] = 0;
        return buf;
}

static void process_tree(struct profile *p, const uint8_t *d, size_t n) {
        size_t pos = 0;
        struct pbr_field f, g;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.wire_type != 2 || (f.number != 1 && f.number != 2))
                        continue;
                int32_t id = -1, tgid = -1, ppid = -1;
                bool is_comm = false;
                const uint8_t *name = NULL;
                size_t name_len = 0;
                size_t q = 0;
                while (pbr_next(f.data, f.len, &q, &g) > 0) {
                        if (g.number == 1 && g.wire_type == 0)
                                id = (int32_t) g.varint;
                        else if (f.number == 2 && g.number == 3 && g.wire_type == 0)
                                tgid = (int32_t) g.varint;
                        else if (f.number == 1 && g.number == 2 && g.wire_type == 0)
                                ppid = (int32_t) g.varint;
                        else if (f.number == 1 && (g.number == 8 || g.number == 9) && g.wire_type == 0)
                                is_comm |= g.varint != 0; /* is_kthread, cmdline_is_comm */
                        else if (g.wire_type == 2 && ((f.number == 2 && g.number == 2) || (f.number == 1 && g.number == 3))) {
                                if (f.number == 1 && name)
                                        continue; /* argv[0] only */
                                name = g.data;
                                name_len = g.len;
                        }
                }
                if (id < 0)
                        continue;
                struct profile_task *t = task_get(p, f.number == 1, id, true);
                if (!t)
                        continue;
                if (tgid >= 0)
                        t->tgid = tgid;
                if (name && name_len) {
                        if (f.number == 1) {
                                char raw[256], shown[256];
                                snprintf(raw, sizeof(raw), "%.*s", (int) name_len, (const char *) name);
                                summary_cmdline_name(raw, is_comm, ppid, shown, sizeof(shown));
                                set_str(&t->name, (const uint8_t *) shown, strlen(shown));
                        } else
                                set_str(&t->name, name, name_len);
                }
        }
}

/* --- interned data ------------------------------------------------------ */

static int add_string(struct table *t, const uint8_t *d, size_t n, bool hex) {
        size_t pos = 0;
        struct pbr_field f;
        uint64_t iid = 0;
        const uint8_t *s = NULL;
        size_t len = 0;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number == 1 && f.wire_type == 0)
                        iid = f.varint;
                else if (f.number == 2 && f.wire_type == 2) {
                        s = f.data;
                        len = f.len;
                }
        }
        int r;
        struct seq_string *e = table_add(t, iid, &r);
        if (!e)
                return r;
        bool printable = true;
        for (size_t i = 0; i < len; i++)
                if (!isxdigit(s[i]))
                        printable = false;
        if (hex && !printable) {
                /* Build ids are raw bytes in upstream traces. */
                e->s = malloc(len * 2 + 1);
                if (!e->s)
                        return -ENOMEM;
                for (size_t i = 0; i < len; i++)
                        sprintf(e->s + 2 * i, "%02x", s[i]);
                e->s[len * 2] = 0;
        } else {
                e->s = strndup(s ? (const char *) s : "", len);
                if (!e->s)
                        return -ENOMEM;
        }
        return 0;
}

static int add_repeated(uint64_t **v, size_t *n, const struct pbr_field *f) {
        if (f->wire_type == 0) {
                uint64_t *w = realloc(*v, (*n + 1) * sizeof(uint64_t));
                if (!w)
                        return -ENOMEM;
                *v = w;
                w[(*n)++] = f->varint;
                return 0;
        }
        if (f->wire_type != 2)
                return 0;
        /* packed */
        size_t pos = 0;
        while (pos < f->len) {
                uint64_t x = 0;
                unsigned shift = 0;
                while (pos < f->len && shift < 64) {
                        uint8_t b = f->data[pos++];
                        x |= (uint64_t) (b & 0x7f) << shift;
                        shift += 7;
                        if (!(b & 0x80))
                                break;
                }
                uint64_t *w = realloc(*v, (*n + 1) * sizeof(uint64_t));
                if (!w)
                        return -ENOMEM;
                *v = w;
                w[(*n)++] = x;
        }
        return 0;
}

static int interned_data(struct profile_seq *s, const uint8_t *d, size_t n) {
        size_t pos = 0;
        struct pbr_field f, g;
        int r = 0;
        while (pbr_next(d, n, &pos, &f) > 0 && r >= 0) {
                if (f.wire_type != 2)
                        continue;
                size_t q = 0;
                switch (f.number) {
                case 5: /* function_names */
                        r = add_string(&s->function_names, f.data, f.len, false);
                        break;
                case 16: /* build_ids */
                        r = add_string(&s->build_ids, f.data, f.len, true);
                        break;
                case 17: /* mapping_paths */
                        r = add_string(&s->mapping_paths, f.data, f.len, false);
                        break;
                case 19: { /* mappings */
                        struct seq_mapping m = {};
                        uint64_t iid = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0 && r >= 0) {
                                if (g.number == 1 && g.wire_type == 0)
                                        iid = g.varint;
                                else if (g.number == 2 && g.wire_type == 0)
                                        m.build_id = g.varint;
                                else if (g.number == 7)
                                        r = add_repeated(&m.path_ids, &m.n_path, &g);
                        }
                        struct seq_mapping *e = r >= 0 ? table_add(&s->mappings, iid, &r) : NULL;
                        if (e) {
                                *e = m;
                                m.path_ids = NULL;
                        }
                        free(m.path_ids);
                        break;
                }
                case 6: { /* frames */
                        struct seq_frame fr = { .sym = UINT32_MAX };
                        uint64_t iid = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0) {
                                if (g.wire_type != 0)
                                        continue;
                                if (g.number == 1)
                                        iid = g.varint;
                                else if (g.number == 2)
                                        fr.function_name_id = g.varint;
                                else if (g.number == 3)
                                        fr.mapping_id = g.varint;
                                else if (g.number == 4)
                                        fr.rel_pc = g.varint;
                                else if (g.number == 7)
                                        fr.kind = (uint32_t) g.varint;
                        }
                        struct seq_frame *e = table_add(&s->frames, iid, &r);
                        if (e)
                                *e = fr;
                        break;
                }
                case 7: { /* callstacks */
                        struct seq_callstack c = {};
                        uint64_t iid = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0 && r >= 0) {
                                if (g.number == 1 && g.wire_type == 0)
                                        iid = g.varint;
                                else if (g.number == 2)
                                        r = add_repeated(&c.frame_ids, &c.n_frames, &g);
                        }
                        struct seq_callstack *e = r >= 0 ? table_add(&s->callstacks, iid, &r) : NULL;
                        if (e) {
                                *e = c;
                                c.frame_ids = NULL;
                        }
                        free(c.frame_ids);
                        break;
                }
                default:
                        break;
                }
        }
        return r;
}

static bool contains_ci(const char *hay, size_t n, const char *needle) {
        size_t k = strlen(needle);
        for (size_t i = 0; i + k <= n; i++)
                if (strncasecmp(hay + i, needle, k) == 0)
                        return true;
        return false;
}

/* TracePacketDefaults.perf_sample_defaults.timebase: which kind of samples
 * the sequence carries. Off-CPU sequences (bpfstack) name their timebase
 * "off-cpu" (or sample on sched_switch); each sample's timebase_count is
 * then the time the thread was blocked, in nanoseconds. */
static void defaults(struct profile *p, struct profile_seq *s, const uint8_t *d, size_t n) {
        struct pbr_field psd, tb, f, g;
        if (!pbr_get(d, n, 12, true, &psd) || psd.wire_type != 2 || !pbr_get(psd.data, psd.len, 1, true, &tb) ||
            tb.wire_type != 2)
                return;
        char desc[160] = "";
        size_t pos = 0;
        bool off = false;
        uint64_t freq = 0, period = 0, counter = 0;
        char name[64] = "", tp[64] = "";
        while (pbr_next(tb.data, tb.len, &pos, &f) > 0) {
                if (f.number == 2 && f.wire_type == 0)
                        freq = f.varint;
                else if (f.number == 1 && f.wire_type == 0)
                        period = f.varint;
                else if (f.number == 4 && f.wire_type == 0)
                        counter = f.varint;
                else if (f.number == 10 && f.wire_type == 2) {
                        snprintf(name, sizeof(name), "%.*s", (int) f.len, (const char *) f.data);
                        if (contains_ci((const char *) f.data, f.len, "off-cpu") ||
                            contains_ci((const char *) f.data, f.len, "offcpu") ||
                            contains_ci((const char *) f.data, f.len, "off_cpu") ||
                            contains_ci((const char *) f.data, f.len, "off cpu"))
                                off = true;
                } else if (f.number == 3 && f.wire_type == 2 && pbr_get(f.data, f.len, 1, true, &g) && g.wire_type == 2) {
                        snprintf(tp, sizeof(tp), "%.*s", (int) g.len, (const char *) g.data);
                        if (strcmp(tp, "sched:sched_switch") == 0 || strcmp(tp, "sched/sched_switch") == 0)
                                off = true;
                }
        }
        s->kind = off ? PROFILE_OFF_CPU : PROFILE_ON_CPU;
        static const char *const counters[] = {
                [1] = "cpu-clock", [2] = "page-faults", [3] = "task-clock", [4] = "context-switches",
                [10] = "cycles", [11] = "instructions", [13] = "cache-misses", [15] = "branch-misses",
        };
        const char *what = name[0] ? name : tp[0] ? tp : (counter < ELEMENTSOF(counters) && counters[counter]) ? counters[counter] : "event";
        if (freq)
                snprintf(desc, sizeof(desc), "%s at %llu Hz", what, (unsigned long long) freq);
        else if (period)
                snprintf(desc, sizeof(desc), "%s every %llu events", what, (unsigned long long) period);
        else
                snprintf(desc, sizeof(desc), "%s", what);
        if (!p->timebase)
                p->timebase = strdup(desc);
}

/* --- samples ------------------------------------------------------------ */

static const char *basename_of(const char *path) {
        const char *s = strrchr(path, '/');
        return s && s[1] ? s + 1 : path;
}

static uint32_t resolve_frame(struct profile *p, struct profile_seq *s, uint64_t frame_iid) {
        struct seq_frame *fr = table_get(&s->frames, frame_iid);
        if (!fr) {
                p->missing_interned++;
                return profile_intern_name(p, "[missing frame]", NULL, false, false, NULL, NULL);
        }
        if (fr->sym != UINT32_MAX)
                return fr->sym;
        const char *path = "", *build_id = NULL;
        struct seq_mapping *m = table_get(&s->mappings, fr->mapping_id);
        if (m && !m->resolved) {
                char buf[1024] = "";
                size_t len = 0;
                for (size_t i = 0; i < m->n_path; i++) {
                        struct seq_string *c = table_get(&s->mapping_paths, m->path_ids[i]);
                        if (!c || !c->s[0])
                                continue;
                        bool bracket = len == 0 && c->s[0] == '[';
                        int k = snprintf(buf + len, sizeof(buf) - len, "%s%s", bracket ? "" : "/", c->s);
                        if (k < 0 || (size_t) k >= sizeof(buf) - len)
                                break;
                        len += (size_t) k;
                }
                m->path = strdup(buf);
                if (!m->path)
                        return UINT32_MAX;
                struct seq_string *b = m->build_id ? table_get(&s->build_ids, m->build_id) : NULL;
                m->build_id_s = b && b->s[0] ? b->s : NULL;
                m->resolved = true;
        }
        if (m) {
                path = m->path;
                build_id = m->build_id_s;
        }
        /* Kernel frames: upstream traced_perf puts them in a mapping named
         * "kernel", perf tools in "[kernel.kallsyms]" and modules. */
        bool kernel = fr->kind == 2 || strncmp(path, "[kernel", 7) == 0 || strcmp(path, "/kernel") == 0 ||
                      strstr(path, ".ko") != NULL;
        struct seq_string *fn = fr->function_name_id ? table_get(&s->function_names, fr->function_name_id) : NULL;
        const char *module = path[0] ? basename_of(path) : NULL;
        uint32_t sym;
        if (fn && fn->s[0])
                sym = profile_intern_name(p, fn->s, module, kernel, true, path[0] ? path : NULL, build_id);
        else {
                /* Not symbolized: module+offset, with the build id that
                 * finds the file (debuginfod, a symbol store). */
                char label[1400];
                if (build_id)
                        snprintf(label, sizeof(label), "%s+0x%llx [buildid %s]", module ? module : "[unknown]",
                                 (unsigned long long) fr->rel_pc, build_id);
                else
                        snprintf(label, sizeof(label), "%s+0x%llx", module ? module : "[unknown]",
                                 (unsigned long long) fr->rel_pc);
                sym = profile_intern_name(p, label, module, kernel, false, path[0] ? path : NULL, build_id);
        }
        fr->sym = sym;
        return sym;
}

static int resolve_callstack(struct profile *p, struct profile_seq *s, struct seq_callstack *c) {
        if (c->resolved)
                return 0;
        c->syms = malloc((c->n_frames ? c->n_frames : 1) * sizeof(uint32_t));
        if (!c->syms)
                return -ENOMEM;
        for (size_t i = 0; i < c->n_frames; i++) {
                c->syms[i] = resolve_frame(p, s, c->frame_ids[i]);
                if (c->syms[i] == UINT32_MAX)
                        return -ENOMEM;
        }
        c->hash = fnv1a64(c->syms, c->n_frames * sizeof(uint32_t));
        c->check = c->n_frames;
        for (size_t i = 0; i < c->n_frames; i++)
                c->check = (c->check ^ c->syms[i]) * 0xff51afd7ed558ccdULL + (c->check >> 29);
        c->resolved = true;
        return 0;
}

/* Names a process that has none from its outermost user frame,
 * preferring an executable to a library. */
static int guess_name(struct profile *p, int32_t pid, const uint32_t *syms, size_t nf) {
        struct profile_task *proc = task_get(p, true, pid, true);
        if (!proc)
                return -ENOMEM;
        if (proc->name || proc->guess)
                return 0;
        const char *lib = NULL, *exe = NULL;
        for (size_t i = 0; i < nf && !exe; i++) {
                const struct profile_sym *sy = &p->syms[syms[i]];
                if (sy->kernel || !sy->module || sy->module[0] == '[')
                        continue;
                if (strstr(sy->module, ".so"))
                        lib = lib ? lib : sy->module;
                else
                        exe = sy->module;
        }
        if (exe || lib) {
                proc->guess = strdup(exe ? exe : lib);
                if (!proc->guess)
                        return -ENOMEM;
        }
        return 0;
}

static bool frame_wanted(const struct profile *p, uint32_t sym) {
        bool k = p->syms[sym].kernel;
        return !((p->filter.kernel_only && !k) || (p->filter.user_only && k));
}

/* (thread, stack) -> leaf, keyed by one 64-bit hash of both and checked
 * with the thread and a second, independent 64-bit hash of the stack. */
static bool leaf_lookup(struct profile *p, enum profile_kind kind, uint64_t key, uint32_t thread, uint64_t check,
                        uint32_t *ret) {
        uint32_t i;
        if (!u64map_get(&p->leaves[kind], key, &i))
                return false;
        const struct profile_leaf *e = &p->leaf_entries[kind][i];
        if (e->thread != thread || e->check != check)
                return false;
        *ret = e->leaf;
        return true;
}

static int leaf_add(struct profile *p, enum profile_kind kind, uint64_t key, uint32_t thread, uint64_t check, uint32_t leaf) {
        uint32_t i;
        if (u64map_get(&p->leaves[kind], key, &i))
                return 0; /* a collision: that key stays with its first stack */
        if (GREEDY_REALLOC_MIN(p->leaf_entries[kind], p->cap_leaf_entries[kind], p->n_leaf_entries[kind] + 1, 1024) < 0)
                return -ENOMEM;
        i = (uint32_t) p->n_leaf_entries[kind]++;
        p->leaf_entries[kind][i] = (struct profile_leaf) { .thread = thread, .leaf = leaf, .check = check };
        return u64map_put(&p->leaves[kind], key, i);
}

static int perf_sample(struct profile *p, struct profile_seq *s, bool have_ts, uint64_t ts, const uint8_t *d, size_t n) {
        size_t pos = 0;
        struct pbr_field f;
        bool have_stack = false, have_skip = false, have_pid = false, have_count = false, have_event = false;
        uint64_t cpu = UINT64_MAX, pid = 0, tid = 0, stack = 0, skip = 0, count = 0, lost = 0;
        bool unwind_error = false;
        while (pbr_next(d, n, &pos, &f) > 0) {
                switch (f.number) {
                case 1:
                        cpu = f.varint;
                        break;
                case 2:
                        pid = f.varint;
                        have_pid = true;
                        break;
                case 3:
                        tid = f.varint;
                        break;
                case 4:
                        stack = f.varint;
                        have_stack = true;
                        break;
                case 6:
                        count = f.varint;
                        have_count = true;
                        break;
                case 16:
                        unwind_error = f.varint > 1; /* 0 unknown, 1 none */
                        break;
                case 17:
                        lost = f.varint;
                        break;
                case 18:
                        skip = f.varint;
                        have_skip = true;
                        break;
                case 19:
                        have_event = true;
                        break;
                default:
                        break;
                }
        }
        p->kernel_records_lost += lost;
        if (have_event || (!have_stack && !have_skip && !have_pid))
                return 0; /* a note, not a sample */
        p->samples++;
        if (have_ts) {
                if (!p->have_first_ts) {
                        p->first_ts = ts;
                        p->have_first_ts = true;
                }
                if (ts > p->last_ts)
                        p->last_ts = ts;
        }
        if (have_skip) {
                p->skipped[skip < ELEMENTSOF(p->skipped) ? skip : 0]++;
                p->samples_no_stack++;
                return 0;
        }
        if (!have_stack) {
                p->samples_no_stack++;
                return 0;
        }
        enum profile_kind kind = s->kind;
        p->samples_kind[kind]++;
        const struct profile_filter *flt = &p->filter;
        uint64_t rel = have_ts && ts > p->first_ts ? ts - p->first_ts : 0;
        if ((flt->pid >= 0 && (uint64_t) flt->pid != pid) || (flt->tid >= 0 && (uint64_t) flt->tid != tid) ||
            (flt->cpu >= 0 && (uint64_t) flt->cpu != cpu) || (flt->have_since && rel < flt->since_ns) ||
            (flt->have_until && rel > flt->until_ns)) {
                p->samples_filtered++;
                return 0;
        }
        struct seq_callstack *c = table_get(&s->callstacks, stack);
        uint32_t missing;
        if (!c) {
                p->missing_interned++;
                missing = profile_intern_name(p, "[missing callstack]", NULL, false, false, NULL, NULL);
                if (missing == UINT32_MAX)
                        return -ENOMEM;
        } else if (resolve_callstack(p, s, c) < 0)
                return -ENOMEM;
        size_t nf = c ? c->n_frames : 1;
        const uint32_t *syms = c ? c->syms : &missing;
        if (unwind_error)
                p->unwind_errors++;

        struct profile_tree *t = &p->trees[kind];
        uint32_t thread;
        if (s->have_last && s->last_pid == pid && s->last_tid == tid && s->last_kind == kind)
                thread = s->last_thread;
        else {
                size_t before = t->n_nodes;
                thread = profile_tree_child(t, 0, NODE_PROCESS, (uint32_t) pid);
                if (thread == UINT32_MAX)
                        return -ENOMEM;
                if (t->n_nodes > before && guess_name(p, (int32_t) pid, syms, nf) < 0)
                        return -ENOMEM;
                thread = profile_tree_child(t, thread, NODE_THREAD, (uint32_t) tid);
                if (thread == UINT32_MAX)
                        return -ENOMEM;
                s->have_last = true;
                s->last_pid = (uint32_t) pid;
                s->last_tid = (uint32_t) tid;
                s->last_kind = kind;
                s->last_thread = thread;
        }
        /* The leaf: the callstack's last one for this thread; else from
         * (thread, stack content) -> leaf, which outlives the clearing of
         * a sequence's interned state; else walked down from the thread. */
        uint32_t node;
        uint64_t leaf_key = c ? (c->hash ^ ((uint64_t) thread * 0x9e3779b97f4a7c15ULL)) : 0;
        if (c && c->cache_thread == thread + 1 && c->cache_kind == kind)
                node = c->cache_leaf;
        else if (c && leaf_lookup(p, kind, leaf_key, thread, c->check, &node)) {
                c->cache_thread = thread + 1;
                c->cache_leaf = node;
                c->cache_kind = kind;
        } else {
                node = thread;
                for (size_t i = 0; i < nf && node != UINT32_MAX; i++) {
                        if (!frame_wanted(p, syms[i]))
                                continue;
                        node = profile_tree_child(t, node, NODE_FRAME, syms[i]);
                }
                if (node == UINT32_MAX)
                        return -ENOMEM;
                if (c) {
                        c->cache_thread = thread + 1;
                        c->cache_leaf = node;
                        c->cache_kind = kind;
                        if (leaf_add(p, kind, leaf_key, thread, c->check, node) < 0)
                                return -ENOMEM;
                }
        }
        if (node == thread && (flt->kernel_only || flt->user_only)) {
                /* --kernel or --user left nothing of this stack */
                p->samples_filtered++;
                return 0;
        }
        t->nodes[node].self[0] += 1;
        /* Off-CPU samples weigh their blocked time; a sample without one
         * weighs nothing in time but still counts as a sample. */
        t->nodes[node].self[1] += kind == PROFILE_OFF_CPU ? (have_count ? count : 0) : 1;
        p->samples_used++;
        return 0;
}

int profile_add_packet(struct profile *p, const uint8_t *data, size_t len) {
        size_t pos = 0;
        struct pbr_field f;
        uint32_t seq_id = 0;
        uint64_t flags = 0, ts = 0;
        bool cleared = false, have_ts = false, dropped = false, first = false;
        const uint8_t *sample = NULL, *interned = NULL, *defs = NULL, *ptree = NULL;
        size_t sample_len = 0, interned_len = 0, defs_len = 0, ptree_len = 0;
        int r;

        p->packets++;
        while ((r = pbr_next(data, len, &pos, &f)) > 0) {
                switch (f.number) {
                case PKT_TIMESTAMP:
                        ts = f.varint;
                        have_ts = true;
                        break;
                case PKT_SEQ_ID:
                        seq_id = (uint32_t) f.varint;
                        break;
                case PKT_SEQUENCE_FLAGS:
                        flags = f.varint;
                        break;
                case PKT_INCREMENTAL_STATE_CLEARED:
                        cleared = f.varint != 0;
                        break;
                case PKT_PREVIOUS_PACKET_DROPPED:
                        dropped = f.varint != 0;
                        break;
                case PKT_FIRST_PACKET_ON_SEQUENCE:
                        first = f.varint != 0; /* nothing came before it to lose */
                        break;
                case PKT_INTERNED_DATA:
                        interned = f.data;
                        interned_len = f.len;
                        break;
                case PKT_DEFAULTS:
                        defs = f.data;
                        defs_len = f.len;
                        break;
                case PKT_PERF_SAMPLE:
                        sample = f.data;
                        sample_len = f.len;
                        break;
                case PKT_PROCESS_TREE:
                        ptree = f.data;
                        ptree_len = f.len;
                        break;
                default:
                        break;
                }
        }
        if (r < 0)
                return -EBADMSG;
        if (ptree)
                process_tree(p, ptree, ptree_len);
        if (!sample && !interned && !defs && !(flags & SEQ_INCREMENTAL_STATE_CLEARED) && !cleared)
                return 0;
        struct profile_seq *s = seq_get(p, seq_id);
        if (!s)
                return -ENOMEM;
        if ((flags & SEQ_INCREMENTAL_STATE_CLEARED) || cleared)
                seq_clear(s);
        if (dropped && !first && !s->lost) {
                s->lost = true;
                p->sequences_with_loss++;
        }
        if (defs)
                defaults(p, s, defs, defs_len);
        if (interned && (r = interned_data(s, interned, interned_len)) < 0)
                return r;
        if (sample)
                return perf_sample(p, s, have_ts, ts, sample, sample_len);
        return 0;
}

/* --- after the last packet ---------------------------------------------- */

static void zero_subtree(struct profile_tree *t, uint32_t n) {
        t->nodes[n].self[0] = t->nodes[n].self[1] = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                zero_subtree(t, c);
}

void profile_finish(struct profile *p) {
        if (p->filter.kind_explicit)
                p->kind = p->filter.kind;
        else
                p->kind = p->samples_kind[PROFILE_ON_CPU] == 0 && p->samples_kind[PROFILE_OFF_CPU] > 0 ? PROFILE_OFF_CPU
                                                                                                    : PROFILE_ON_CPU;
        p->tree = &p->trees[p->kind];
        p->metric = p->kind == PROFILE_OFF_CPU ? 1 : 0;
        struct profile_tree *t = p->tree;
        if (p->filter.comm) {
                for (uint32_t pr = t->nodes[0].first_child; pr != UINT32_MAX; pr = t->nodes[pr].next_sibling) {
                        if (strcmp(profile_process_name(p, (int32_t) t->nodes[pr].value), p->filter.comm) == 0)
                                continue;
                        for (uint32_t th = t->nodes[pr].first_child; th != UINT32_MAX; th = t->nodes[th].next_sibling)
                                if (strcmp(profile_thread_name(p, (int32_t) t->nodes[th].value), p->filter.comm) != 0)
                                        zero_subtree(t, th);
                }
        }
        profile_tree_totals(t);
}

const char *profile_unit(const struct profile *p) {
        return p->metric == 1 ? "ms" : "samples";
}

double profile_value(const struct profile *p, uint64_t w) {
        return p->metric == 1 ? (double) w / 1e6 : (double) w;
}

static int merge(struct profile *p, const struct profile_tree *src, uint32_t n, struct profile_tree *dst, uint32_t at) {
        const struct profile_node *s = &src->nodes[n];
        uint32_t d = at;
        if (s->kind == NODE_PROCESS) {
                uint32_t comm = profile_intern_name(p, profile_process_name(p, (int32_t) s->value), NULL, false, true,
                                                    NULL, NULL);
                if (comm == UINT32_MAX)
                        return -ENOMEM;
                d = profile_tree_child(dst, at, NODE_COMM, comm);
        } else if (s->kind == NODE_FRAME)
                d = profile_tree_child(dst, at, NODE_FRAME, s->value);
        if (d == UINT32_MAX)
                return -ENOMEM;
        dst->nodes[d].self[0] += s->self[0];
        dst->nodes[d].self[1] += s->self[1];
        for (uint32_t c = s->first_child; c != UINT32_MAX; c = src->nodes[c].next_sibling) {
                if (src->nodes[c].total[0] == 0 && src->nodes[c].total[1] == 0)
                        continue;
                int r = merge(p, src, c, dst, d);
                if (r < 0)
                        return r;
        }
        return 0;
}

int profile_merged_tree(struct profile *p, struct profile_tree *ret) {
        *ret = (struct profile_tree) {};
        if (profile_tree_child(ret, UINT32_MAX, NODE_ROOT, 0) == UINT32_MAX)
                return -ENOMEM;
        int r = merge(p, p->tree, 0, ret, 0);
        if (r < 0) {
                profile_tree_done(ret);
                return r;
        }
        profile_tree_totals(ret);
        return 0;
}

static const struct profile *sort_p;
static const struct profile_tree *sort_t;

static int by_label(const void *a, const void *b) {
        const struct profile_node *x = &sort_t->nodes[*(const uint32_t *) a], *y = &sort_t->nodes[*(const uint32_t *) b];
        char bx[256], by[256];
        int c = strcmp(profile_node_label(sort_p, x, bx, sizeof(bx)), profile_node_label(sort_p, y, by, sizeof(by)));
        if (c != 0)
                return c;
        return x->value < y->value ? -1 : x->value > y->value;
}

size_t profile_children_sorted(const struct profile *p, const struct profile_tree *t, uint32_t n, uint32_t **ret) {
        size_t k = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                k++;
        *ret = NULL;
        if (k == 0)
                return 0;
        uint32_t *v = malloc(k * sizeof(uint32_t));
        if (!v)
                return 0;
        k = 0;
        for (uint32_t c = t->nodes[n].first_child; c != UINT32_MAX; c = t->nodes[c].next_sibling)
                v[k++] = c;
        sort_p = p;
        sort_t = t;
        qsort(v, k, sizeof(uint32_t), by_label);
        *ret = v;
        return k;
}
