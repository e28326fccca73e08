/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "basic/pbr.h"
#include "basic/varint.h"
#include "pprof-check.h"

#define GROW(v, n)                                                                                                     \
        ({                                                                                                             \
                void *_g = realloc((v), ((n) + 1) * sizeof(*(v)));                                                     \
                if (_g)                                                                                                \
                        (v) = _g;                                                                                      \
                _g ? &(v)[(n)++] : NULL;                                                                               \
        })

static int read_gz(const char *path, uint8_t **ret, size_t *ret_len) {
        gzFile f = gzopen(path, "rb");
        if (!f)
                return -errno ?: -ENOMEM;
        uint8_t *buf = NULL;
        size_t len = 0, cap = 0;
        for (;;) {
                if (cap - len < 65536) {
                        cap = cap ? cap * 2 : 1 << 20;
                        uint8_t *b = realloc(buf, cap);
                        if (!b) {
                                free(buf);
                                gzclose(f);
                                return -ENOMEM;
                        }
                        buf = b;
                }
                int k = gzread(f, buf + len, (unsigned) (cap - len));
                if (k < 0) {
                        free(buf);
                        gzclose(f);
                        return -EBADMSG;
                }
                if (k == 0)
                        break;
                len += (size_t) k;
        }
        gzclose(f);
        *ret = buf;
        *ret_len = len;
        return 0;
}

/* A repeated integer field, packed or not. */
static int repeated(const struct pbr_field *f, uint64_t **v, size_t *n) {
        if (f->wire_type == 0) {
                uint64_t *e = GROW(*v, *n);
                if (!e)
                        return -ENOMEM;
                *e = f->varint;
                return 0;
        }
        if (f->wire_type != 2)
                return -EBADMSG;
        for (size_t pos = 0; pos < f->len;) {
                uint64_t x;
                size_t k = varint_read(f->data + pos, f->len - pos, &x);
                if (k == 0)
                        return -EBADMSG;
                pos += k;
                uint64_t *e = GROW(*v, *n);
                if (!e)
                        return -ENOMEM;
                *e = x;
        }
        return 0;
}

static int sample(struct pp_profile *p, const uint8_t *d, size_t n) {
        struct pp_sample *s = GROW(p->samples, p->n_samples);
        if (!s)
                return -ENOMEM;
        *s = (struct pp_sample){};
        size_t pos = 0;
        struct pbr_field f, g;
        int r = 0;
        while (r >= 0 && pbr_next(d, n, &pos, &f) > 0) {
                if (f.number == 1)
                        r = repeated(&f, &s->location_ids, &s->n_locations);
                else if (f.number == 2)
                        r = repeated(&f, (uint64_t **) &s->values, &s->n_values);
                else if (f.number == 3 && f.wire_type == 2) {
                        struct pp_label *l = GROW(s->labels, s->n_labels);
                        if (!l)
                                return -ENOMEM;
                        *l = (struct pp_label){};
                        size_t q = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                if (g.number == 1)
                                        l->key = (int64_t) g.varint;
                                else if (g.number == 2)
                                        l->str = (int64_t) g.varint;
                                else if (g.number == 3)
                                        l->num = (int64_t) g.varint;
                }
        }
        return r;
}

static int location(struct pp_profile *p, const uint8_t *d, size_t n) {
        struct pp_location *l = GROW(p->locations, p->n_locations);
        if (!l)
                return -ENOMEM;
        *l = (struct pp_location){};
        size_t pos = 0;
        struct pbr_field f, g;
        while (pbr_next(d, n, &pos, &f) > 0) {
                if (f.number == 1)
                        l->id = f.varint;
                else if (f.number == 2)
                        l->mapping_id = f.varint;
                else if (f.number == 3)
                        l->address = f.varint;
                else if (f.number == 4 && f.wire_type == 2) {
                        struct pp_line *e = GROW(l->lines, l->n_lines);
                        if (!e)
                                return -ENOMEM;
                        *e = (struct pp_line){};
                        size_t q = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                if (g.number == 1)
                                        e->function_id = g.varint;
                                else if (g.number == 2)
                                        e->line = (int64_t) g.varint;
                }
        }
        return 0;
}

int pp_read(const char *path, struct pp_profile *ret) {
        uint8_t *buf = NULL;
        size_t len = 0;
        *ret = (struct pp_profile){};
        int r = read_gz(path, &buf, &len);
        if (r < 0)
                return r;
        struct pp_profile *p = ret;
        size_t pos = 0;
        struct pbr_field f, g;
        int k;
        while (r >= 0 && (k = pbr_next(buf, len, &pos, &f)) > 0) {
                size_t q = 0;
                switch (f.number) {
                case 1: {
                        int64_t(*t)[2] = GROW(p->sample_types, p->n_sample_types);
                        if (!t) {
                                r = -ENOMEM;
                                break;
                        }
                        (*t)[0] = (*t)[1] = 0;
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                if (g.number == 1 || g.number == 2)
                                        (*t)[g.number - 1] = (int64_t) g.varint;
                        break;
                }
                case 2:
                        r = sample(p, f.data, f.len);
                        break;
                case 3: {
                        struct pp_mapping *m = GROW(p->mappings, p->n_mappings);
                        if (!m) {
                                r = -ENOMEM;
                                break;
                        }
                        *m = (struct pp_mapping){};
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                switch (g.number) {
                                case 1:
                                        m->id = g.varint;
                                        break;
                                case 2:
                                        m->start = g.varint;
                                        break;
                                case 3:
                                        m->limit = g.varint;
                                        break;
                                case 4:
                                        m->offset = g.varint;
                                        break;
                                case 5:
                                        m->filename = (int64_t) g.varint;
                                        break;
                                case 6:
                                        m->build_id = (int64_t) g.varint;
                                        break;
                                case 7:
                                        m->has_functions = g.varint;
                                        break;
                                case 8:
                                        m->has_filenames = g.varint;
                                        break;
                                case 9:
                                        m->has_line_numbers = g.varint;
                                        break;
                                case 10:
                                        m->has_inline_frames = g.varint;
                                        break;
                                }
                        break;
                }
                case 4:
                        r = location(p, f.data, f.len);
                        break;
                case 5: {
                        struct pp_function *fn = GROW(p->functions, p->n_functions);
                        if (!fn) {
                                r = -ENOMEM;
                                break;
                        }
                        *fn = (struct pp_function){};
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                switch (g.number) {
                                case 1:
                                        fn->id = g.varint;
                                        break;
                                case 2:
                                        fn->name = (int64_t) g.varint;
                                        break;
                                case 3:
                                        fn->system_name = (int64_t) g.varint;
                                        break;
                                case 4:
                                        fn->filename = (int64_t) g.varint;
                                        break;
                                }
                        break;
                }
                case 6: {
                        char **s = GROW(p->strings, p->n_strings);
                        if (!s || !(*s = strndup((const char *) f.data, f.len)))
                                r = -ENOMEM;
                        break;
                }
                case 9:
                        p->time_nanos = (int64_t) f.varint;
                        break;
                case 10:
                        p->duration_nanos = (int64_t) f.varint;
                        break;
                case 11:
                        while (pbr_next(f.data, f.len, &q, &g) > 0)
                                if (g.number == 1 || g.number == 2)
                                        p->period_type[g.number - 1] = (int64_t) g.varint;
                        break;
                case 12:
                        p->period = (int64_t) f.varint;
                        break;
                case 13:
                        r = repeated(&f, (uint64_t **) &p->comments, &p->n_comments);
                        break;
                case 14:
                        p->default_sample_type = (int64_t) f.varint;
                        break;
                }
        }
        free(buf);
        if (r >= 0 && k < 0)
                r = -EBADMSG;
        if (r < 0)
                pp_free(p);
        return r;
}

void pp_free(struct pp_profile *p) {
        for (size_t i = 0; i < p->n_samples; i++) {
                free(p->samples[i].location_ids);
                free(p->samples[i].values);
                free(p->samples[i].labels);
        }
        for (size_t i = 0; i < p->n_locations; i++)
                free(p->locations[i].lines);
        for (size_t i = 0; i < p->n_strings; i++)
                free(p->strings[i]);
        free(p->sample_types);
        free(p->samples);
        free(p->mappings);
        free(p->locations);
        free(p->functions);
        free(p->strings);
        free(p->comments);
        *p = (struct pp_profile){};
}

const char *pp_string(const struct pp_profile *p, int64_t i) {
        return i >= 0 && (size_t) i < p->n_strings ? p->strings[i] : NULL;
}

const struct pp_location *pp_location(const struct pp_profile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_locations; i++)
                if (p->locations[i].id == id)
                        return &p->locations[i];
        return NULL;
}

const struct pp_function *pp_function(const struct pp_profile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_functions; i++)
                if (p->functions[i].id == id)
                        return &p->functions[i];
        return NULL;
}

const struct pp_mapping *pp_mapping(const struct pp_profile *p, uint64_t id) {
        for (size_t i = 0; i < p->n_mappings; i++)
                if (p->mappings[i].id == id)
                        return &p->mappings[i];
        return NULL;
}

int pp_sample_type(const struct pp_profile *p, const char *type) {
        for (size_t i = 0; i < p->n_sample_types; i++) {
                const char *t = pp_string(p, p->sample_types[i][0]);
                if (t && strcmp(t, type) == 0)
                        return (int) i;
        }
        return -1;
}

static const struct pp_label *label(const struct pp_profile *p, const struct pp_sample *s, const char *key) {
        for (size_t i = 0; i < s->n_labels; i++) {
                const char *k = pp_string(p, s->labels[i].key);
                if (k && strcmp(k, key) == 0)
                        return &s->labels[i];
        }
        return NULL;
}

const char *pp_label_str(const struct pp_profile *p, const struct pp_sample *s, const char *key) {
        const struct pp_label *l = label(p, s, key);
        return l && l->str ? pp_string(p, l->str) : NULL;
}

bool pp_label_num(const struct pp_profile *p, const struct pp_sample *s, const char *key, int64_t *ret_num) {
        const struct pp_label *l = label(p, s, key);
        if (!l || l->str)
                return false;
        *ret_num = l->num;
        return true;
}

/* Ids of one kind: all non-zero, none twice (sorted copy). */
static int cmp_u64(const void *a, const void *b) {
        uint64_t x = *(const uint64_t *) a, y = *(const uint64_t *) b;
        return x < y ? -1 : x > y;
}

static const char *ids_unique(uint64_t *ids, size_t n, const char *what) {
        static char msg[128];
        qsort(ids, n, sizeof(*ids), cmp_u64);
        for (size_t i = 0; i < n; i++) {
                if (ids[i] == 0) {
                        snprintf(msg, sizeof(msg), "a %s has id 0", what);
                        return msg;
                }
                if (i && ids[i] == ids[i - 1]) {
                        snprintf(msg, sizeof(msg), "two %ss have id %llu", what, (unsigned long long) ids[i]);
                        return msg;
                }
        }
        return NULL;
}

const char *pp_check(const struct pp_profile *p) {
        static char msg[256];
        if (p->n_strings == 0 || p->strings[0][0])
                return "string_table[0] is not \"\"";
#define STR_OK(i) ((i) >= 0 && (size_t) (i) < p->n_strings)
        for (size_t i = 0; i < p->n_sample_types; i++)
                if (!STR_OK(p->sample_types[i][0]) || !STR_OK(p->sample_types[i][1]))
                        return "a sample type's string index is outside the table";
        if (!STR_OK(p->default_sample_type) || !STR_OK(p->period_type[0]) || !STR_OK(p->period_type[1]))
                return "default_sample_type or period_type outside the table";
        for (size_t i = 0; i < p->n_comments; i++)
                if (!STR_OK(p->comments[i]))
                        return "a comment outside the table";
        size_t n = p->n_mappings > p->n_locations ? p->n_mappings : p->n_locations;
        if (p->n_functions > n)
                n = p->n_functions;
        uint64_t *ids = calloc(n + 1, sizeof(uint64_t));
        if (!ids)
                return "out of memory";
        const char *bad = NULL;
        for (size_t i = 0; i < p->n_mappings; i++)
                ids[i] = p->mappings[i].id;
        if (!bad)
                bad = ids_unique(ids, p->n_mappings, "mapping");
        for (size_t i = 0; !bad && i < p->n_locations; i++)
                ids[i] = p->locations[i].id;
        if (!bad)
                bad = ids_unique(ids, p->n_locations, "location");
        for (size_t i = 0; !bad && i < p->n_functions; i++)
                ids[i] = p->functions[i].id;
        if (!bad)
                bad = ids_unique(ids, p->n_functions, "function");
        free(ids);
        if (bad)
                return bad;
        for (size_t i = 0; i < p->n_mappings; i++)
                if (!STR_OK(p->mappings[i].filename) || !STR_OK(p->mappings[i].build_id))
                        return "a mapping's file name or build ID outside the table";
        for (size_t i = 0; i < p->n_functions; i++) {
                const struct pp_function *f = &p->functions[i];
                if (!STR_OK(f->name) || !STR_OK(f->system_name) || !STR_OK(f->filename))
                        return "a function's strings outside the table";
        }
        for (size_t i = 0; i < p->n_locations; i++) {
                const struct pp_location *l = &p->locations[i];
                if (l->mapping_id && !pp_mapping(p, l->mapping_id)) {
                        snprintf(msg, sizeof(msg), "location %llu: no mapping %llu", (unsigned long long) l->id,
                                 (unsigned long long) l->mapping_id);
                        return msg;
                }
                for (size_t k = 0; k < l->n_lines; k++)
                        if (!pp_function(p, l->lines[k].function_id)) {
                                snprintf(msg, sizeof(msg), "location %llu: no function %llu",
                                         (unsigned long long) l->id, (unsigned long long) l->lines[k].function_id);
                                return msg;
                        }
        }
        for (size_t i = 0; i < p->n_samples; i++) {
                const struct pp_sample *s = &p->samples[i];
                if (s->n_values != p->n_sample_types) {
                        snprintf(msg, sizeof(msg), "sample %zu has %zu values for %zu sample types", i, s->n_values,
                                 p->n_sample_types);
                        return msg;
                }
                for (size_t k = 0; k < s->n_locations; k++)
                        if (!pp_location(p, s->location_ids[k])) {
                                snprintf(msg, sizeof(msg), "sample %zu: no location %llu", i,
                                         (unsigned long long) s->location_ids[k]);
                                return msg;
                        }
                for (size_t k = 0; k < s->n_labels; k++)
                        if (s->labels[k].key == 0 || !STR_OK(s->labels[k].key) || !STR_OK(s->labels[k].str))
                                return "a label without a key, or outside the table";
        }
        return NULL;
#undef STR_OK
}
