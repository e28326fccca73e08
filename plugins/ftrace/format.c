/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "format.h"

static void parse_field_decl(const char *decl, struct format_field *f) {
        /* e.g. "char prev_comm[16]", "__data_loc char[] name", "char buf[]",
         * "unsigned long ip". The name is the last identifier before any
         * '[' of the declarator. */
        char tmp[256];
        snprintf(tmp, sizeof(tmp), "%s", decl);
        f->is_data_loc = strstr(tmp, "__data_loc") != NULL || strstr(tmp, "__rel_loc") != NULL;
        char *br = strrchr(tmp, '[');
        bool array = br != NULL;
        if (br && !f->is_data_loc)
                *br = '\0';
        /* trim */
        size_t n = strlen(tmp);
        while (n && (tmp[n - 1] == ' ' || tmp[n - 1] == '\t'))
                tmp[--n] = '\0';
        char *name = strrchr(tmp, ' ');
        name = name ? name + 1 : tmp;
        if (f->is_data_loc && strchr(name, '['))
                *strchr(name, '[') = '\0';
        while (*name == '*')
                name++;
        snprintf(f->name, sizeof(f->name), "%s", name);
        f->is_string = array && !f->is_data_loc && strstr(decl, "char") != NULL;
}

/* An integer of a kernel's ino_t (i_ino of the page cache events is an
 * unsigned long) or dev_t, not a cgroup's inode. */
static void note_inode_field(struct event_format *e, const char *decl, const struct format_field *f, size_t i) {
        if ((f->size != 4 && f->size != 8) || strstr(f->name, "cgroup") || i > INT8_MAX)
                return;
        if (e->ino_field < 0 && (strncmp(decl, "ino_t ", 6) == 0 || strcmp(f->name, "i_ino") == 0))
                e->ino_field = (int8_t) i;
        else if (e->dev_field < 0 && strncmp(decl, "dev_t ", 6) == 0)
                e->dev_field = (int8_t) i;
}

int format_parse(const char *text, const char *group, struct event_format *ret) {
        memset(ret, 0, sizeof(*ret));
        snprintf(ret->group, sizeof(ret->group), "%s", group ? group : "");
        ret->common_pid_offset = ret->common_flags_offset = -1;
        ret->ino_field = ret->dev_field = -1;
        bool have_id = false, have_name = false;

        const char *line = text;
        while (line && *line) {
                const char *nl = strchr(line, '\n');
                size_t len = nl ? (size_t) (nl - line) : strlen(line);
                char buf[512];
                snprintf(buf, sizeof(buf), "%.*s", (int) (len < sizeof(buf) ? len : sizeof(buf) - 1), line);
                unsigned id;
                if (sscanf(buf, "name: %63s", ret->name) == 1)
                        have_name = true;
                else if (sscanf(buf, "ID: %u", &id) == 1 && id <= UINT16_MAX) {
                        ret->id = (uint16_t) id;
                        have_id = true;
                } else if (strstr(buf, "field:") && ret->n_fields < FORMAT_MAX_FIELDS) {
                        char decl[256];
                        unsigned off, size;
                        int sgn = 0;
                        const char *fs = strstr(buf, "field:") + 6;
                        const char *semi = strchr(fs, ';');
                        const char *o = strstr(buf, "offset:"), *s = strstr(buf, "size:"), *g = strstr(buf, "signed:");
                        if (semi && o && s && sscanf(o, "offset:%u;", &off) == 1 && sscanf(s, "size:%u;", &size) == 1 &&
                            off <= UINT16_MAX && size <= UINT16_MAX) {
                                if (g)
                                        sscanf(g, "signed:%d;", &sgn);
                                snprintf(decl, sizeof(decl), "%.*s", (int) (semi - fs), fs);
                                struct format_field *f = &ret->fields[ret->n_fields];
                                memset(f, 0, sizeof(*f));
                                parse_field_decl(decl, f);
                                f->offset = (uint16_t) off;
                                f->size = (uint16_t) size;
                                f->is_signed = sgn != 0;
                                f->is_dyn_tail = f->is_string && size == 0;
                                const char *d = decl + strspn(decl, " \t");
                                f->is_kaddr = (size == 4 || size == 8) &&
                                              (strncmp(d, "void *", 6) == 0 || strncmp(d, "void*", 5) == 0);
                                if (strcmp(f->name, "common_pid") == 0)
                                        ret->common_pid_offset = (int16_t) off;
                                else if (strcmp(f->name, "common_flags") == 0)
                                        ret->common_flags_offset = (int16_t) off;
                                if (strncmp(f->name, "common_", 7) != 0)
                                        note_inode_field(ret, d, f, ret->n_fields++);
                        }
                }
                line = nl ? nl + 1 : NULL;
        }
        return have_id && have_name ? 0 : -EINVAL;
}

const struct format_field *format_field(const struct event_format *f, const char *name) {
        for (size_t i = 0; i < f->n_fields; i++)
                if (strcmp(f->fields[i].name, name) == 0)
                        return &f->fields[i];
        return NULL;
}

int64_t format_read_int(const struct format_field *f, const uint8_t *rec, size_t len) {
        if (!f || (size_t) f->offset + f->size > len)
                return 0;
        const uint8_t *p = rec + f->offset;
        switch (f->size) {
        case 1:
                return f->is_signed ? (int64_t) (int8_t) p[0] : (int64_t) p[0];
        case 2: {
                uint16_t v;
                memcpy(&v, p, 2);
                return f->is_signed ? (int64_t) (int16_t) v : (int64_t) v;
        }
        case 4: {
                uint32_t v;
                memcpy(&v, p, 4);
                return f->is_signed ? (int64_t) (int32_t) v : (int64_t) v;
        }
        case 8: {
                uint64_t v;
                memcpy(&v, p, 8);
                return (int64_t) v;
        }
        default:
                return 0;
        }
}

void format_read_str(const struct format_field *f, const uint8_t *rec, size_t len, char *buf, size_t size) {
        size_t off, n;
        buf[0] = '\0';
        if (!f || size == 0)
                return;
        if (f->is_data_loc) {
                uint32_t loc;
                if ((size_t) f->offset + 4 > len)
                        return;
                memcpy(&loc, rec + f->offset, 4);
                off = loc & 0xffff;
                n = loc >> 16;
        } else if (f->is_dyn_tail) {
                off = f->offset;
                n = len > off ? len - off : 0;
        } else {
                off = f->offset;
                n = f->size;
        }
        if (off > len)
                return;
        if (n > len - off)
                n = len - off;
        size_t k = 0;
        while (k < n && k + 1 < size && rec[off + k] != '\0') {
                buf[k] = (char) rec[off + k];
                k++;
        }
        buf[k] = '\0';
}

/* A task name field (char[16]) into comm: two word loads where the
 * field is the usual fixed array. */
void format_read_comm(const struct format_field *ff, const uint8_t *rec, size_t len, char comm[16]) {
#ifdef FORMAT_COMM_WORDS
        if (ff && !ff->is_data_loc && !ff->is_dyn_tail && ff->size == 16 && (size_t) ff->offset + 16 <= len) {
                struct comm16 c = format_comm16(rec + ff->offset);
                memcpy(comm, c.w, 16);
                return;
        }
#endif
        memset(comm, 0, 16);
        format_read_str(ff, rec, len, comm, 16);
}
