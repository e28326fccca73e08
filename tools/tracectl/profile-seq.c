/* SPDX-License-Identifier: LGPL-2.1-or-later */

/* What a packet sequence interned (function names, build ids, mapping
 * paths, mappings, frames, callstacks), kept by iid per sequence and
 * resolved on first use into the profile's distinct frames. */

#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/hash.h"
#include "basic/macro.h"
#include "basic/varint.h"
#include "debuginfo.h"
#include "demangle.h"
#include "profile-internal.h"

struct seq_string {
        char *s;
};

struct seq_mapping {
        uint64_t build_id;
        uint64_t *path_ids;
        size_t n_path;
        uint64_t start, end, exact_offset, load_bias;
        uint32_t map; /* the profile's, resolved on first use */
        bool resolved;
};

struct seq_frame {
        uint64_t function_name_id, mapping_id, rel_pc;
        uint32_t kind;
        uint32_t sym;     /* UINT32_MAX until resolved */
        uint32_t *inl;    /* the functions inlined there, outermost first */
        uint32_t n_inl;
};

static void *table_get(struct seq_table *t, uint64_t iid) {
        uint64_t i;
        if (!hashmap_get(&t->index, iid, &i))
                return NULL;
        return (uint8_t *) t->v + (size_t) i * t->esz;
}

/* A new zeroed element for iid; NULL if iid is already there (the first
 * definition stays) or on ENOMEM (*ret_r). */
static void *table_add(struct seq_table *t, uint64_t iid, int *ret_r) {
        *ret_r = 0;
        if (hashmap_get(&t->index, iid, NULL))
                return NULL;
        if (greedy_realloc((void **) &t->v, &t->cap, t->n + 1, t->esz, 16) < 0) {
                *ret_r = -ENOMEM;
                return NULL;
        }
        if (hashmap_put(&t->index, iid, t->n) < 0) {
                *ret_r = -ENOMEM;
                return NULL;
        }
        void *e = (uint8_t *) t->v + t->n * t->esz;
        memset(e, 0, t->esz);
        t->n++;
        return e;
}

static void table_done(struct seq_table *t, void (*free_elem)(void *)) {
        for (size_t i = 0; free_elem && i < t->n; i++)
                free_elem((uint8_t *) t->v + i * t->esz);
        free(t->v);
        hashmap_clear(&t->index);
        size_t esz = t->esz;
        *t = (struct seq_table) { .esz = esz };
}

static void free_string(void *e) {
        free(((struct seq_string *) e)->s);
}
static void free_mapping(void *e) {
        free(((struct seq_mapping *) e)->path_ids);
}
static void free_frame(void *e) {
        free(((struct seq_frame *) e)->inl);
}
static void free_callstack(void *e) {
        struct seq_callstack *c = e;
        free(c->frame_ids);
        free(c->syms);
}

void profile_seq_clear(struct profile_seq *s) {
        table_done(&s->function_names, free_string);
        table_done(&s->mapping_paths, free_string);
        table_done(&s->build_ids, free_string);
        table_done(&s->mappings, free_mapping);
        table_done(&s->frames, free_frame);
        table_done(&s->callstacks, free_callstack);
        s->kind = PROFILE_ON_CPU;
        s->sample_ns = 0;
        s->bpf = false;
        s->have_last = false;
}

struct profile_seq *profile_seq_get(struct profile *p, uint32_t id) {
        uint64_t i;
        if (p->last_seq && p->last_seq->id == id)
                return p->last_seq;
        if (hashmap_get(&p->seq_index, id, &i))
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
        if (hashmap_put(&p->seq_index, id, p->n_seqs) < 0) {
                free(s);
                return NULL;
        }
        p->seqs[p->n_seqs++] = s;
        p->last_seq = s;
        return s;
}

void profile_seqs_done(struct profile *p) {
        for (size_t i = 0; i < p->n_seqs; i++) {
                profile_seq_clear(p->seqs[i]);
                free(p->seqs[i]);
        }
        free(p->seqs);
        hashmap_clear(&p->seq_index);
}

struct seq_callstack *profile_seq_callstack(struct profile_seq *s, uint64_t iid) {
        return table_get(&s->callstacks, iid);
}

/* --- interned data ------------------------------------------------------ */

static int add_string(struct seq_table *t, const uint8_t *d, size_t n, bool hex) {
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
                size_t k = varint_read(f->data + pos, f->len - pos, &x);
                if (k == 0)
                        break; /* cut short or malformed: what came before stays */
                pos += k;
                uint64_t *w = realloc(*v, (*n + 1) * sizeof(uint64_t));
                if (!w)
                        return -ENOMEM;
                *v = w;
                w[(*n)++] = x;
        }
        return 0;
}

int profile_seq_interned_data(struct profile_seq *s, const uint8_t *d, size_t n) {
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
                                else if (g.number == 4 && g.wire_type == 0)
                                        m.start = g.varint;
                                else if (g.number == 5 && g.wire_type == 0)
                                        m.end = g.varint;
                                else if (g.number == 6 && g.wire_type == 0)
                                        m.load_bias = g.varint;
                                else if (g.number == 8 && g.wire_type == 0)
                                        m.exact_offset = g.varint;
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
void profile_seq_defaults(struct profile *p, struct profile_seq *s, const uint8_t *d, size_t n) {
        struct pbr_field psd, tb, f, g;
        if (!pbr_get(d, n, 12, true, &psd) || psd.wire_type != 2 || !pbr_get(psd.data, psd.len, 1, true, &tb) ||
            tb.wire_type != 2)
                return;
        char desc[160] = "";
        size_t pos = 0;
        bool off = false;
        uint64_t freq = 0, period = 0, counter = 0;
        char name[64] = "", tp[64] = "";
        bool raw = false;
        while (pbr_next(tb.data, tb.len, &pos, &f) > 0) {
                if (f.number == 2 && f.wire_type == 0)
                        freq = f.varint;
                else if (f.number == 1 && f.wire_type == 0)
                        period = f.varint;
                else if (f.number == 4 && f.wire_type == 0)
                        counter = f.varint;
                else if (f.number == 10 && f.wire_type == 2) {
                        snprintf(name, sizeof(name), "%.*s", (int) f.len, (const char *) f.data);
                        s->bpf = stack_walks_bpf_timebase((const char *) f.data, f.len);
                        if (contains_ci((const char *) f.data, f.len, "off-cpu") ||
                            contains_ci((const char *) f.data, f.len, "offcpu") ||
                            contains_ci((const char *) f.data, f.len, "off_cpu") ||
                            contains_ci((const char *) f.data, f.len, "off cpu"))
                                off = true;
                } else if (f.number == 5 && f.wire_type == 2)
                        raw = true;
                else if (f.number == 3 && f.wire_type == 2 && pbr_get(f.data, f.len, 1, true, &g) && g.wire_type == 2) {
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
        /* The CPU time an on-CPU sample stands for: the period of a clock
         * (cpu-clock by default), or a frequency's. */
        bool clock = !tp[0] && !raw && (counter == 0 || counter == 1 || counter == 3);
        s->sample_ns = off ? 0 : freq ? 1000000000 / freq : clock ? period : 0;
        if (!off && !p->sample_ns && !p->sample_period) {
                p->sample_ns = s->sample_ns;
                p->sample_period = s->sample_ns ? 0 : period;
                free(p->sample_event);
                p->sample_event = strdup(tp[0] ? tp : (counter < ELEMENTSOF(counters) && counters[counter]) ? counters[counter] : "event");
        }
}

/* --- resolving ---------------------------------------------------------- */

/* The profile's mapping for a sequence's: UINT32_MAX on ENOMEM. */
static uint32_t resolve_mapping(struct profile *p, struct profile_seq *s, struct seq_mapping *m) {
        if (m->resolved)
                return m->map;
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
        struct seq_string *b = m->build_id ? table_get(&s->build_ids, m->build_id) : NULL;
        /* Kernel frames: upstream traced_perf puts them in a mapping named
         * "kernel", perf tools in "[kernel.kallsyms]" and modules. */
        struct profile_map pm = {
                .path = buf[0] ? buf : NULL,
                .build_id = b && b->s[0] ? b->s : NULL,
                .start = m->start,
                .end = m->end,
                .exact_offset = m->exact_offset,
                .load_bias = m->load_bias,
                .kernel = strncmp(buf, "[kernel", 7) == 0 || strcmp(buf, "/kernel") == 0 || strstr(buf, ".ko") != NULL,
        };
        m->map = profile_intern_map(p, &pm);
        m->resolved = m->map != UINT32_MAX;
        return m->map;
}

/* The functions the binary's DWARF says are inlined at the frame's
 * address (all but the outermost, which is the frame's own). */
static int inline_frames(struct profile *p, struct seq_frame *fr, uint32_t map) {
        const struct profile_map *pm = &p->maps[map];
        const struct debuginfo_line *l;
        size_t n = debuginfo_lines(p->debuginfo, pm->path, pm->build_id, fr->rel_pc, &l);
        if (n < 2)
                return 0;
        fr->inl = malloc((n - 1) * sizeof(uint32_t));
        if (!fr->inl)
                return -ENOMEM;
        for (size_t i = n - 1; i-- > 0;) {
                const char *name = l[i].function ? l[i].function : l[i].linkage_name ? l[i].linkage_name : "??";
                uint32_t sym = profile_intern_frame(p, name, map, fr->rel_pc, false, true);
                if (sym == UINT32_MAX)
                        return -ENOMEM;
                fr->inl[fr->n_inl++] = sym;
        }
        return 0;
}

static const struct seq_frame *frame_of(struct profile_seq *s, uint64_t iid) {
        return table_get(&s->frames, iid);
}

static uint32_t resolve_frame(struct profile *p, struct profile_seq *s, uint64_t frame_iid) {
        struct seq_frame *fr = table_get(&s->frames, frame_iid);
        if (!fr) {
                p->missing_interned++;
                return profile_intern_name(p, "[missing frame]", NULL, false, false, NULL, NULL);
        }
        if (fr->sym != UINT32_MAX)
                return fr->sym;
        uint32_t map = UINT32_MAX;
        struct seq_mapping *m = table_get(&s->mappings, fr->mapping_id);
        if (m && (map = resolve_mapping(p, s, m)) == UINT32_MAX)
                return UINT32_MAX;
        const struct profile_map *pm = m ? &p->maps[map] : NULL;
        bool kernel = fr->kind == 2 || (pm && pm->kernel);
        struct seq_string *fn = fr->function_name_id ? table_get(&s->function_names, fr->function_name_id) : NULL;
        const char *name = fn && fn->s[0] ? fn->s : NULL;
        if (!name && pm && !kernel && p->debuginfo) {
                /* Not named on the machine: the file's symbols, here or
                 * from debuginfod. */
                name = debuginfo_function(p->debuginfo, pm->path, pm->build_id, fr->rel_pc);
                p->frames_named += name != NULL;
        }
        uint32_t sym;
        if (name) {
                /* The trace keeps the names as the symbol tables have them;
                 * the report shows them demangled. */
                char *shown = p->mangled_names ? NULL : demangle(name);
                sym = profile_intern_frame(p, shown ? shown : name, map, fr->rel_pc, kernel, true);
                free(shown);
        } else {
                /* Not symbolized: module+offset, with the build id that
                 * finds the file (debuginfod, a symbol store). */
                const char *path = pm && pm->path ? pm->path : NULL;
                const char *module = path ? (strrchr(path, '/') ? strrchr(path, '/') + 1 : path) : "[unknown]";
                char label[1400];
                if (pm && pm->build_id)
                        snprintf(label, sizeof(label), "%s+0x%llx [buildid %s]", module,
                                 (unsigned long long) fr->rel_pc, pm->build_id);
                else
                        snprintf(label, sizeof(label), "%s+0x%llx", module, (unsigned long long) fr->rel_pc);
                sym = profile_intern_frame(p, label, map, fr->rel_pc, kernel, false);
        }
        fr->sym = sym;
        if (name && sym != UINT32_MAX && p->inline_frames && !p->filter.addresses && p->debuginfo && pm && !kernel &&
            inline_frames(p, fr, map) < 0)
                return UINT32_MAX;
        return sym;
}

int profile_seq_resolve_callstack(struct profile *p, struct profile_seq *s, struct seq_callstack *c) {
        if (c->resolved)
                return 0;
        size_t cap = c->n_frames ? c->n_frames : 1;
        c->syms = malloc(cap * sizeof(uint32_t));
        if (!c->syms)
                return -ENOMEM;
        c->n_syms = 0;
        for (size_t i = 0; i < c->n_frames; i++) {
                uint32_t sym = resolve_frame(p, s, c->frame_ids[i]);
                if (sym == UINT32_MAX)
                        return -ENOMEM;
                const struct seq_frame *fr = frame_of(s, c->frame_ids[i]);
                size_t extra = fr ? fr->n_inl : 0;
                if (c->n_syms + 1 + extra > cap) {
                        cap = (c->n_syms + 1 + extra) * 2;
                        uint32_t *v = realloc(c->syms, cap * sizeof(uint32_t));
                        if (!v)
                                return -ENOMEM;
                        c->syms = v;
                }
                c->syms[c->n_syms++] = sym;
                for (size_t k = 0; k < extra; k++)
                        c->syms[c->n_syms++] = fr->inl[k];
        }
        c->hash = fnv1a64(c->syms, c->n_syms * sizeof(uint32_t));
        c->check = c->n_syms;
        for (size_t i = 0; i < c->n_syms; i++)
                c->check = (c->check ^ c->syms[i]) * 0xff51afd7ed558ccdULL + (c->check >> 29);
        c->resolved = true;
        return 0;
}

int profile_seq_stack(struct profile *p, struct profile_seq *s, uint64_t iid, struct seq_callstack **ret_c,
                      uint32_t *missing, const uint32_t **ret_syms, size_t *ret_n) {
        struct seq_callstack *c = profile_seq_callstack(s, iid);
        *ret_c = c;
        if (!c) {
                p->missing_interned++;
                *missing = profile_intern_name(p, "[missing callstack]", NULL, false, false, NULL, NULL);
                if (*missing == UINT32_MAX)
                        return -ENOMEM;
                *ret_syms = missing;
                *ret_n = 1;
                return 0;
        }
        if (profile_seq_resolve_callstack(p, s, c) < 0)
                return -ENOMEM;
        *ret_syms = c->syms;
        *ret_n = c->n_syms;
        return 0;
}
