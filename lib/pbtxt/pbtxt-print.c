/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <string.h>

#include "pbtxt/pbtxt-internal.h"
#include "pbtxt/pbtxt.h"

static void print_escaped(FILE *f, const uint8_t *s, size_t n) {
        fputc('"', f);
        for (size_t i = 0; i < n; i++) {
                uint8_t c = s[i];
                switch (c) {
                case '\n': fputs("\\n", f); break;
                case '\t': fputs("\\t", f); break;
                case '\r': fputs("\\r", f); break;
                case '"': fputs("\\\"", f); break;
                case '\\': fputs("\\\\", f); break;
                default:
                        if (c < 0x20 || c >= 0x7f)
                                fprintf(f, "\\%03o", c);
                        else
                                fputc(c, f);
                }
        }
        fputc('"', f);
}

struct out {
        FILE *f;
        bool one_line;
        bool first;
};

static void sep(struct out *o, unsigned indent) {
        if (o->one_line) {
                if (!o->first)
                        fputc(' ', o->f);
        } else
                fprintf(o->f, "%*s", (int) indent, "");
        o->first = false;
}

static void end_field(struct out *o) {
        if (!o->one_line)
                fputc('\n', o->f);
}

static void print_message(struct out *o, const ProtobufCMessage *m, unsigned indent);

static void print_double(FILE *f, double d) {
        if (isnan(d))
                fputs("nan", f);
        else if (isinf(d))
                fputs(d < 0 ? "-inf" : "inf", f);
        else
                fprintf(f, "%.17g", d);
}

static void print_value(struct out *o, const ProtobufCFieldDescriptor *fd, const void *v, unsigned indent) {
        FILE *f = o->f;
        switch (fd->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                fprintf(f, "%" PRId32, *(const int32_t *) v);
                break;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                fprintf(f, "%" PRIu32, *(const uint32_t *) v);
                break;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                fprintf(f, "%" PRId64, *(const int64_t *) v);
                break;
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                fprintf(f, "%" PRIu64, *(const uint64_t *) v);
                break;
        case PROTOBUF_C_TYPE_FLOAT:
                print_double(f, *(const float *) v);
                break;
        case PROTOBUF_C_TYPE_DOUBLE:
                print_double(f, *(const double *) v);
                break;
        case PROTOBUF_C_TYPE_BOOL:
                fputs(*(const protobuf_c_boolean *) v ? "true" : "false", f);
                break;
        case PROTOBUF_C_TYPE_ENUM: {
                const ProtobufCEnumValue *ev = protobuf_c_enum_descriptor_get_value(fd->descriptor, *(const int *) v);
                if (ev)
                        fputs(ev->name, f);
                else
                        fprintf(f, "%d", *(const int *) v);
                break;
        }
        case PROTOBUF_C_TYPE_STRING: {
                const char *s = *(const char *const *) v;
                print_escaped(f, (const uint8_t *) (s ? s : ""), s ? strlen(s) : 0);
                break;
        }
        case PROTOBUF_C_TYPE_BYTES: {
                const ProtobufCBinaryData *b = v;
                print_escaped(f, b->data, b->len);
                break;
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessage *sub = *(const ProtobufCMessage *const *) v;
                fputc('{', f);
                if (!o->one_line)
                        fputc('\n', f);
                else
                        fputc(' ', f);
                if (sub) {
                        struct out inner = { .f = f, .one_line = o->one_line, .first = true };
                        print_message(&inner, sub, indent + 2);
                }
                if (o->one_line)
                        fputs(" }", f);
                else
                        fprintf(f, "%*s}", (int) indent, "");
                break;
        }
        }
}

static void print_field(struct out *o, const ProtobufCFieldDescriptor *fd, const void *v, unsigned indent) {
        sep(o, indent);
        fputs(fd->name, o->f);
        fputs(fd->type == PROTOBUF_C_TYPE_MESSAGE ? " " : ": ", o->f);
        print_value(o, fd, v, indent);
        end_field(o);
}

static void print_message(struct out *o, const ProtobufCMessage *m, unsigned indent) {
        const ProtobufCMessageDescriptor *d = m->descriptor;
        const uint8_t *base = (const uint8_t *) m;

        for (unsigned i = 0; i < d->n_fields; i++) {
                const ProtobufCFieldDescriptor *fd = &d->fields[i];
                const void *v = base + fd->offset;
                if (fd->label == PROTOBUF_C_LABEL_REPEATED) {
                        size_t n = *(const size_t *) (base + fd->quantifier_offset);
                        const uint8_t *arr = *(const uint8_t *const *) v;
                        for (size_t k = 0; k < n; k++)
                                print_field(o, fd, arr + k * pbtxt_type_size(fd->type), indent);
                        continue;
                }
                bool set;
                if (fd->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                        set = *(const uint32_t *) (base + fd->quantifier_offset) == fd->id;
                else if (fd->type == PROTOBUF_C_TYPE_MESSAGE || fd->type == PROTOBUF_C_TYPE_STRING)
                        set = *(const void *const *) v != NULL &&
                              (fd->type == PROTOBUF_C_TYPE_MESSAGE || *(const void *const *) v != fd->default_value);
                else if (fd->label == PROTOBUF_C_LABEL_REQUIRED)
                        set = true;
                else
                        set = fd->quantifier_offset && *(const protobuf_c_boolean *) (base + fd->quantifier_offset);
                if (set)
                        print_field(o, fd, v, indent);
        }
        for (size_t i = 0; i < m->n_unknown_fields; i++) {
                sep(o, indent);
                fprintf(o->f, "# unknown field %u (%zu bytes)", m->unknown_fields[i].tag, m->unknown_fields[i].len);
                end_field(o);
        }
}

void pbtxt_print(FILE *f, const ProtobufCMessage *msg, unsigned indent) {
        struct out o = { .f = f, .one_line = false, .first = true };
        print_message(&o, msg, indent);
}

void pbtxt_print_line(FILE *f, const ProtobufCMessage *msg) {
        struct out o = { .f = f, .one_line = true, .first = true };
        print_message(&o, msg, 0);
}
