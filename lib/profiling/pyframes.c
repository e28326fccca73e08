/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "profiling/pyframes.h"

/* Checked with offsetof() against Debian 12's libpython3.11-dev headers
 * (Py_BUILD_CORE, internal/pycore_{runtime,interp,frame}.h), which match
 * /usr/bin/python3.11 (3.11.2). */
static const struct py_layout py_layouts[] = {
        {
                .major = 3,
                .minor = 11,
                .runtime_interp_head = 40,
                .runtime_tstate_current = 576,
                .interp_next = 0,
                .interp_threads_head = 16,
                .tstate_next = 8,
                .tstate_native_tid = 160,
                .tstate_cframe = 56,
                .cframe_current_frame = 8,
                .cframe_previous = 16,
                .frame_code = 32,
                .frame_previous = 48,
                .frame_prev_instr = 56,
                .frame_is_entry = 68,
                .frame_owner = 69,
                .frame_size = 72,
                .object_type = 8,
                .code_firstlineno = 72,
                .code_filename = 112,
                .code_qualname = 128,
                .code_linetable = 136,
                .code_code = 184,
                .code_stacksize = 68,
                .code_nlocalsplus = 76,
                .frame_specials = 9,
                .str_length = 16,
                .str_state = 32,
                .str_ascii_data = 48,
                .str_compact_data = 72,
                .bytes_size = 16,
                .bytes_data = 32,
        },
};

const struct py_layout *py_layout_find(unsigned major, unsigned minor) {
        for (size_t k = 0; k < sizeof(py_layouts) / sizeof(py_layouts[0]); k++)
                if (py_layouts[k].major == major && py_layouts[k].minor == minor)
                        return &py_layouts[k];
        return NULL;
}

bool py_version_of_path(const char *path, unsigned *ret_major, unsigned *ret_minor) {
        const char *base = strrchr(path, '/');
        base = base ? base + 1 : path;
        if (strncmp(base, "lib", 3) == 0)
                base += 3;
        if (strncmp(base, "python", 6) != 0)
                return false;
        const char *v = base + 6;
        unsigned major, minor;
        int used = 0;
        if (sscanf(v, "%u.%u%n", &major, &minor, &used) != 2 || used <= 0)
                return false;
        const char *rest = v + used;
        /* python3.11, python3.11d, libpython3.11.so.1.0; not python3.11-config */
        if (*rest && strncmp(rest, ".so", 3) != 0 && strcmp(rest, "d") != 0 && strcmp(rest, " (deleted)") != 0)
                return false;
        *ret_major = major;
        *ret_minor = minor;
        return true;
}

/* --- line tables (CPython 3.11: Objects/locations.md's format) ------------ */

struct lt_reader {
        const uint8_t *p, *end;
};

static int lt_varint(struct lt_reader *r, uint32_t *ret) {
        uint32_t v = 0;
        for (unsigned shift = 0; shift < 32; shift += 6) {
                if (r->p >= r->end || (*r->p & 0x80))
                        return -EBADMSG;
                uint8_t b = *r->p++;
                v |= (uint32_t) (b & 63) << shift;
                if (!(b & 64)) {
                        *ret = v;
                        return 0;
                }
        }
        return -EBADMSG;
}

static int lt_svarint(struct lt_reader *r, int32_t *ret) {
        uint32_t u;
        int e = lt_varint(r, &u);
        if (e < 0)
                return e;
        *ret = (u & 1) ? -(int32_t) (u >> 1) : (int32_t) (u >> 1);
        return 0;
}

static int lt_skip(struct lt_reader *r, size_t n) {
        if ((size_t) (r->end - r->p) < n)
                return -EBADMSG;
        for (size_t k = 0; k < n; k++)
                if (r->p[k] & 0x80)
                        return -EBADMSG;
        r->p += n;
        return 0;
}

int py_line_of(const uint8_t *table, size_t size, int firstlineno, uint32_t unit) {
        struct lt_reader r = {.p = table, .end = table + size};
        int64_t line = firstlineno;
        uint64_t at = 0;
        while (r.p < r.end) {
                uint8_t first = *r.p++;
                if (!(first & 0x80))
                        return -EBADMSG;
                unsigned code = (first >> 3) & 15, len = (first & 7) + 1u;
                int32_t delta = 0;
                bool none = false;
                int e = 0;
                uint32_t skip;
                if (code == 15)
                        none = true;
                else if (code == 14) {
                        e = lt_svarint(&r, &delta);
                        for (int k = 0; k < 3 && e == 0; k++)
                                e = lt_varint(&r, &skip);
                } else if (code == 13)
                        e = lt_svarint(&r, &delta);
                else if (code >= 10) {
                        delta = (int32_t) code - 10;
                        e = lt_skip(&r, 2);
                } else
                        e = lt_skip(&r, 1);
                if (e < 0)
                        return e;
                line += delta;
                if (line < -((int64_t) 1 << 30) || line > ((int64_t) 1 << 30))
                        return -EBADMSG;
                if (unit < at + len)
                        return none || line < 0 ? -1 : (int) line;
                at += len;
        }
        return -1;
}

/* --- code objects -------------------------------------------------------- */

static int read_u64(py_read_fn read, void *u, uint64_t addr, uint64_t *ret) {
        return read(u, addr, ret, sizeof(*ret));
}

/* Appends code point cp as UTF-8 to buf[*n] (size: room, kept for NUL). */
static void put_utf8(char *buf, size_t size, size_t *n, uint32_t cp) {
        char t[4];
        size_t k;
        if (cp < 0x80) {
                t[0] = (char) cp;
                k = 1;
        } else if (cp < 0x800) {
                t[0] = (char) (0xc0 | cp >> 6);
                t[1] = (char) (0x80 | (cp & 63));
                k = 2;
        } else if (cp < 0x10000) {
                t[0] = (char) (0xe0 | cp >> 12);
                t[1] = (char) (0x80 | ((cp >> 6) & 63));
                t[2] = (char) (0x80 | (cp & 63));
                k = 3;
        } else if (cp < 0x110000) {
                t[0] = (char) (0xf0 | cp >> 18);
                t[1] = (char) (0x80 | ((cp >> 12) & 63));
                t[2] = (char) (0x80 | ((cp >> 6) & 63));
                t[3] = (char) (0x80 | (cp & 63));
                k = 4;
        } else {
                t[0] = '?';
                k = 1;
        }
        if (*n + k >= size)
                return;
        memcpy(buf + *n, t, k);
        *n += k;
}

int py_str_read(const struct py_layout *l, py_read_fn read, void *u, uint64_t addr, char *buf, size_t size) {
        if (size == 0)
                return -EINVAL;
        buf[0] = '\0';
        uint64_t length;
        uint32_t state;
        int r;
        if (!addr)
                return -EBADMSG;
        if ((r = read_u64(read, u, addr + l->str_length, &length)) < 0 ||
            (r = read(u, addr + l->str_state, &state, sizeof(state))) < 0)
                return r;
        bool ascii = state & 0x40, compact = state & 0x20;
        unsigned kind = (state >> 2) & 7;
        if (!compact || (kind != 1 && kind != 2 && kind != 4) || (ascii && kind != 1) || length > (1u << 20))
                return -EBADMSG;
        size_t want = length < PY_NAME_MAX ? (size_t) length : PY_NAME_MAX;
        uint8_t raw[PY_NAME_MAX * 4];
        if (want > 0 && (r = read(u, addr + (ascii ? l->str_ascii_data : l->str_compact_data), raw, want * kind)) < 0)
                return r;
        size_t n = 0;
        for (size_t k = 0; k < want; k++) {
                uint32_t cp;
                if (kind == 1)
                        cp = raw[k];
                else if (kind == 2)
                        cp = (uint32_t) raw[2 * k] | (uint32_t) raw[2 * k + 1] << 8;
                else
                        cp = (uint32_t) raw[4 * k] | (uint32_t) raw[4 * k + 1] << 8 | (uint32_t) raw[4 * k + 2] << 16 |
                             (uint32_t) raw[4 * k + 3] << 24;
                if (ascii && cp >= 0x80)
                        return -EBADMSG;
                if (cp == 0)
                        cp = '?';
                put_utf8(buf, size, &n, cp);
        }
        buf[n] = '\0';
        return 0;
}

void py_code_done(struct py_code *c) {
        free(c->qualname);
        free(c->filename);
        free(c->linetable);
        *c = (struct py_code){};
}

int py_code_read(const struct py_layout *l, py_read_fn read, void *u, uint64_t addr, uint64_t code_type,
                 struct py_code *ret) {
        struct py_code c = {};
        char name[PY_NAME_MAX * 2], file[PY_NAME_MAX * 2];
        uint64_t qualname, filename, linetable, lt_size;
        int32_t first;
        int r;
        if (code_type) {
                uint64_t type;
                if ((r = read_u64(read, u, addr + l->object_type, &type)) < 0)
                        return r;
                if (type != code_type)
                        return -EBADMSG;
        }
        if ((r = read_u64(read, u, addr + l->code_qualname, &qualname)) < 0 ||
            (r = read_u64(read, u, addr + l->code_filename, &filename)) < 0 ||
            (r = read_u64(read, u, addr + l->code_linetable, &linetable)) < 0 ||
            (r = read(u, addr + l->code_firstlineno, &first, sizeof(first))) < 0)
                return r;
        if ((r = py_str_read(l, read, u, qualname, name, sizeof(name))) < 0 ||
            (r = py_str_read(l, read, u, filename, file, sizeof(file))) < 0)
                return r;
        if (!linetable)
                return -EBADMSG;
        if ((r = read_u64(read, u, linetable + l->bytes_size, &lt_size)) < 0)
                return r;
        if (lt_size > PY_LINETABLE_MAX || first < 0)
                return -EBADMSG;
        c.firstlineno = first;
        c.qualname = strdup(name);
        c.filename = strdup(file);
        c.linetable = malloc(lt_size ? lt_size : 1);
        if (!c.qualname || !c.filename || !c.linetable) {
                py_code_done(&c);
                return -ENOMEM;
        }
        c.linetable_len = (size_t) lt_size;
        if (lt_size > 0 && (r = read(u, linetable + l->bytes_data, c.linetable, (size_t) lt_size)) < 0) {
                py_code_done(&c);
                return r;
        }
        *ret = c;
        return 0;
}

int py_code_line(const struct py_layout *l, const struct py_code *c, uint64_t code_addr, uint64_t prev_instr) {
        uint64_t first = code_addr + l->code_code;
        if (prev_instr < first)
                return c->firstlineno; /* not started: prev_instr is one unit before the first */
        uint64_t unit = (prev_instr - first) / 2;
        if (unit > UINT32_MAX)
                return -1;
        int line = py_line_of(c->linetable, c->linetable_len, c->firstlineno, (uint32_t) unit);
        return line;
}

/* --- the merge ----------------------------------------------------------- */

size_t py_merge(const bool *is_eval, size_t n_native, const bool *is_entry, size_t n_py, struct py_merged *out,
                size_t cap) {
        size_t n = 0, j = 0;
        for (size_t k = 0; k < n_native && n < cap; k++) {
                if (!is_eval[k] || j >= n_py) {
                        out[n++] = (struct py_merged){.python = false, .index = (uint32_t) k};
                        continue;
                }
                /* This evaluation call's frames: up to its entry frame. */
                for (; j < n_py && n < cap; j++) {
                        out[n++] = (struct py_merged){.python = true, .index = (uint32_t) j};
                        if (is_entry[j]) {
                                j++;
                                break;
                        }
                }
        }
        for (; j < n_py && n < cap; j++)
                out[n++] = (struct py_merged){.python = true, .index = (uint32_t) j};
        return n;
}
