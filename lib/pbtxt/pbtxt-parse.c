/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "basic/alloc.h"
#include "basic/macro.h"
#include "pbtxt/pbtxt-internal.h"
#include "pbtxt/pbtxt.h"

enum tok_type {
        TOK_EOF,
        TOK_IDENT,
        TOK_NUMBER,
        TOK_STRING,
        TOK_PUNCT,
};

struct token {
        enum tok_type type;
        const char *start;
        size_t len;
        unsigned line, col;
        char punct;
};

struct parser {
        const char *text;
        size_t len, pos;
        unsigned line, col;
        const char *filename;
        struct token tok; /* current (peeked) token */
        char *error;
        int depth;
        struct pbtxt_positions *positions; /* NULL: not asked for */
        struct token field_tok;      /* the name of the field being parsed */
};

/* Notes that field of m (0: m itself) was written at t. */
static int note_position(struct parser *p, const ProtobufCMessage *m, uint32_t field, const struct token *t) {
        struct pbtxt_positions *pos = p->positions;
        if (!pos)
                return 0;
        if (GREEDY_REALLOC(pos->v, pos->cap, pos->n + 1) < 0)
                return -ENOMEM;
        pos->v[pos->n++] = (struct pbtxt_position) { .msg = m, .field = field, .line = t->line, .col = t->col };
        return 0;
}

_printf_(3, 4) static int fail_at(struct parser *p, const struct token *t, const char *fmt, ...) {
        char msg[512];
        va_list ap;
        if (p->error)
                return -EINVAL;
        va_start(ap, fmt);
        vsnprintf(msg, sizeof(msg), fmt, ap);
        va_end(ap);
        size_t n = strlen(msg) + strlen(p->filename) + 32;
        p->error = malloc(n);
        if (p->error)
                snprintf(p->error, n, "%s:%u:%u: %s", p->filename, t->line, t->col, msg);
        return -EINVAL;
}

static void advance_char(struct parser *p) {
        if (p->text[p->pos] == '\n') {
                p->line++;
                p->col = 1;
        } else
                p->col++;
        p->pos++;
}

static void skip_space(struct parser *p) {
        while (p->pos < p->len) {
                char c = p->text[p->pos];
                if (c == '#') {
                        while (p->pos < p->len && p->text[p->pos] != '\n')
                                advance_char(p);
                } else if (isspace((unsigned char) c))
                        advance_char(p);
                else
                        break;
        }
}

/* Reads the next token into p->tok. */
static int next(struct parser *p) {
        skip_space(p);
        struct token *t = &p->tok;
        *t = (struct token) { .start = p->text + p->pos, .line = p->line, .col = p->col };
        if (p->pos >= p->len) {
                t->type = TOK_EOF;
                return 0;
        }
        char c = p->text[p->pos];
        if (isalpha((unsigned char) c) || c == '_') {
                t->type = TOK_IDENT;
                while (p->pos < p->len && (isalnum((unsigned char) p->text[p->pos]) || p->text[p->pos] == '_' ||
                                           p->text[p->pos] == '.'))
                        advance_char(p);
        } else if (isdigit((unsigned char) c) || c == '-' || c == '+' || c == '.') {
                t->type = TOK_NUMBER;
                advance_char(p);
                while (p->pos < p->len &&
                       (isalnum((unsigned char) p->text[p->pos]) || p->text[p->pos] == '.' ||
                        ((p->text[p->pos] == '-' || p->text[p->pos] == '+') &&
                         (p->text[p->pos - 1] == 'e' || p->text[p->pos - 1] == 'E'))))
                        advance_char(p);
        } else if (c == '"' || c == '\'') {
                t->type = TOK_STRING;
                advance_char(p);
                for (;;) {
                        if (p->pos >= p->len || p->text[p->pos] == '\n')
                                return fail_at(p, t, "unterminated string");
                        if (p->text[p->pos] == '\\') {
                                advance_char(p);
                                if (p->pos >= p->len)
                                        return fail_at(p, t, "unterminated string");
                                advance_char(p);
                                continue;
                        }
                        if (p->text[p->pos] == c) {
                                advance_char(p);
                                break;
                        }
                        advance_char(p);
                }
        } else if (strchr("{}<>[]:,;", c)) {
                t->type = TOK_PUNCT;
                t->punct = c;
                advance_char(p);
        } else
                return fail_at(p, t, "unexpected character '%c'", c);
        t->len = (size_t) (p->text + p->pos - t->start);
        return 0;
}

static bool is_punct(const struct parser *p, char c) {
        return p->tok.type == TOK_PUNCT && p->tok.punct == c;
}

static bool tok_is(const struct token *t, const char *word) {
        return t->type == TOK_IDENT && t->len == strlen(word) && memcmp(t->start, word, t->len) == 0;
}

/* A string being decoded: adjacent literals append to it, and its
 * capacity doubles, so "a" "a" ... costs linear time and memory. */
struct strbuf {
        uint8_t *data;
        size_t len, cap;
};

static int strbuf_reserve(struct strbuf *b, size_t more) {
        return GREEDY_REALLOC_MIN(b->data, b->cap, b->len + more + 1, 64);
}

/* Decodes the escapes of a quoted string token (without the quotes) and
 * appends them to b. */
static int unescape(struct parser *p, const struct token *t, struct strbuf *b) {
        const char *s = t->start + 1, *end = t->start + t->len - 1;
        if (strbuf_reserve(b, t->len) < 0)
                return -ENOMEM;
        uint8_t *out = b->data + b->len;
        size_t n = 0;
        while (s < end) {
                if (*s != '\\') {
                        out[n++] = (uint8_t) *s++;
                        continue;
                }
                s++;
                char e = *s++;
                switch (e) {
                case 'n': out[n++] = '\n'; break;
                case 't': out[n++] = '\t'; break;
                case 'r': out[n++] = '\r'; break;
                case 'a': out[n++] = '\a'; break;
                case 'b': out[n++] = '\b'; break;
                case 'f': out[n++] = '\f'; break;
                case 'v': out[n++] = '\v'; break;
                case '\\': out[n++] = '\\'; break;
                case '\'': out[n++] = '\''; break;
                case '"': out[n++] = '"'; break;
                case '?': out[n++] = '?'; break;
                case 'x':
                case 'X': {
                        unsigned v = 0, k = 0;
                        while (k < 2 && s < end && isxdigit((unsigned char) *s)) {
                                v = v * 16 + (unsigned) (isdigit((unsigned char) *s) ? *s - '0' : (tolower((unsigned char) *s) - 'a' + 10));
                                s++;
                                k++;
                        }
                        if (k == 0) {
                                return fail_at(p, t, "bad \\x escape in string");
                        }
                        out[n++] = (uint8_t) v;
                        break;
                }
                default:
                        if (e >= '0' && e <= '7') {
                                unsigned v = (unsigned) (e - '0'), k = 1;
                                while (k < 3 && s < end && *s >= '0' && *s <= '7') {
                                        v = v * 8 + (unsigned) (*s++ - '0');
                                        k++;
                                }
                                if (v > 255) {
                                        return fail_at(p, t, "octal escape out of range");
                                }
                                out[n++] = (uint8_t) v;
                                break;
                        }
                        return fail_at(p, t, "unknown escape \\%c in string", e);
                }
        }
        out[n] = '\0';
        b->len += n;
        return 0;
}

static int parse_string_value(struct parser *p, uint8_t **ret, size_t *ret_len) {
        struct strbuf b = {};
        int r;

        if (p->tok.type != TOK_STRING)
                return fail_at(p, &p->tok, "expected a string");
        /* Adjacent strings are concatenated. */
        while (p->tok.type == TOK_STRING) {
                r = unescape(p, &p->tok, &b);
                if (r >= 0)
                        r = next(p);
                if (r < 0) {
                        free(b.data);
                        return r;
                }
        }
        *ret = b.data;
        *ret_len = b.len;
        return 0;
}

static int token_text(const struct token *t, char *buf, size_t size) {
        if (t->len + 1 > size)
                return -ERANGE;
        memcpy(buf, t->start, t->len);
        buf[t->len] = '\0';
        return 0;
}

static int parse_integer(struct parser *p, const ProtobufCFieldDescriptor *f, bool is_signed, int64_t min, uint64_t max,
                         uint64_t *ret) {
        char buf[64];
        const struct token *t = &p->tok;
        if (t->type != TOK_NUMBER || token_text(t, buf, sizeof(buf)) < 0)
                return fail_at(p, t, "expected an integer for field \"%s\"", f->name);
        char *end;
        errno = 0;
        if (buf[0] == '-') {
                long long v = strtoll(buf, &end, 0);
                if (*end || errno || !is_signed || v < min)
                        return fail_at(p, t, "value %s out of range for field \"%s\"", buf, f->name);
                *ret = (uint64_t) v;
        } else {
                unsigned long long v = strtoull(buf[0] == '+' ? buf + 1 : buf, &end, 0);
                if (*end || errno || v > max)
                        return fail_at(p, t, "value %s out of range for field \"%s\"", buf, f->name);
                *ret = (uint64_t) v;
        }
        return next(p);
}

static int parse_float(struct parser *p, const ProtobufCFieldDescriptor *f, double *ret) {
        char buf[64];
        const struct token *t = &p->tok;
        if (t->type == TOK_IDENT || t->type == TOK_NUMBER) {
                if (token_text(t, buf, sizeof(buf)) < 0)
                        return fail_at(p, t, "bad number for field \"%s\"", f->name);
                const char *s = buf[0] == '-' || buf[0] == '+' ? buf + 1 : buf;
                double sign = buf[0] == '-' ? -1.0 : 1.0;
                if (strcasecmp(s, "inf") == 0 || strcasecmp(s, "infinity") == 0) {
                        *ret = sign * INFINITY;
                        return next(p);
                }
                if (strcasecmp(s, "nan") == 0) {
                        *ret = NAN;
                        return next(p);
                }
                if (t->type == TOK_NUMBER) {
                        char *end;
                        size_t l = strlen(buf);
                        if (l > 1 && (buf[l - 1] == 'f' || buf[l - 1] == 'F'))
                                buf[l - 1] = '\0';
                        errno = 0;
                        double v = strtod(buf, &end);
                        if (!*end && !errno) {
                                *ret = v;
                                return next(p);
                        }
                }
        }
        return fail_at(p, t, "expected a number for field \"%s\"", f->name);
}

static void *field_ptr(ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        return (uint8_t *) m + f->offset;
}

static int parse_message_body(struct parser *p, ProtobufCMessage *m, char close);

/* Parses one value of field f into dst (storage of the field's C type). */
static int parse_value(struct parser *p, const ProtobufCFieldDescriptor *f, void *dst) {
        uint64_t u;
        double d;
        int r;

        switch (f->type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
                r = parse_integer(p, f, true, INT32_MIN, INT32_MAX, &u);
                if (r >= 0)
                        *(int32_t *) dst = (int32_t) (int64_t) u;
                return r;
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
                r = parse_integer(p, f, false, 0, UINT32_MAX, &u);
                if (r >= 0)
                        *(uint32_t *) dst = (uint32_t) u;
                return r;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
                r = parse_integer(p, f, true, INT64_MIN, INT64_MAX, &u);
                if (r >= 0)
                        *(int64_t *) dst = (int64_t) u;
                return r;
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
                r = parse_integer(p, f, false, 0, UINT64_MAX, &u);
                if (r >= 0)
                        *(uint64_t *) dst = u;
                return r;
        case PROTOBUF_C_TYPE_FLOAT:
                r = parse_float(p, f, &d);
                if (r >= 0)
                        *(float *) dst = (float) d;
                return r;
        case PROTOBUF_C_TYPE_DOUBLE:
                r = parse_float(p, f, &d);
                if (r >= 0)
                        *(double *) dst = d;
                return r;
        case PROTOBUF_C_TYPE_BOOL:
                if (tok_is(&p->tok, "true") || tok_is(&p->tok, "True") || tok_is(&p->tok, "t") ||
                    (p->tok.type == TOK_NUMBER && p->tok.len == 1 && p->tok.start[0] == '1'))
                        *(protobuf_c_boolean *) dst = 1;
                else if (tok_is(&p->tok, "false") || tok_is(&p->tok, "False") || tok_is(&p->tok, "f") ||
                         (p->tok.type == TOK_NUMBER && p->tok.len == 1 && p->tok.start[0] == '0'))
                        *(protobuf_c_boolean *) dst = 0;
                else
                        return fail_at(p, &p->tok, "expected true or false for field \"%s\"", f->name);
                return next(p);
        case PROTOBUF_C_TYPE_ENUM: {
                const ProtobufCEnumDescriptor *ed = f->descriptor;
                char buf[256];
                if (p->tok.type == TOK_IDENT) {
                        if (token_text(&p->tok, buf, sizeof(buf)) < 0)
                                return fail_at(p, &p->tok, "enum value name too long");
                        const ProtobufCEnumValue *v = protobuf_c_enum_descriptor_get_value_by_name(ed, buf);
                        if (!v)
                                return fail_at(p, &p->tok, "unknown value \"%s\" for enum %s (field \"%s\")", buf,
                                               ed->name, f->name);
                        *(int *) dst = v->value;
                        return next(p);
                }
                r = parse_integer(p, f, true, INT32_MIN, INT32_MAX, &u);
                if (r < 0)
                        return r;
                if (!protobuf_c_enum_descriptor_get_value(ed, (int) (int64_t) u))
                        return fail_at(p, &p->tok, "unknown number %" PRId64 " for enum %s (field \"%s\")",
                                       (int64_t) u, ed->name, f->name);
                *(int *) dst = (int) (int64_t) u;
                return 0;
        }
        case PROTOBUF_C_TYPE_STRING: {
                uint8_t *s;
                size_t n;
                r = parse_string_value(p, &s, &n);
                if (r < 0)
                        return r;
                if (memchr(s, '\0', n)) {
                        free(s);
                        return fail_at(p, &p->tok, "string field \"%s\" contains a NUL byte", f->name);
                }
                *(char **) dst = (char *) s;
                return 0;
        }
        case PROTOBUF_C_TYPE_BYTES: {
                uint8_t *s;
                size_t n;
                r = parse_string_value(p, &s, &n);
                if (r < 0)
                        return r;
                *(ProtobufCBinaryData *) dst = (ProtobufCBinaryData) { .len = n, .data = s };
                return 0;
        }
        case PROTOBUF_C_TYPE_MESSAGE: {
                const ProtobufCMessageDescriptor *md = f->descriptor;
                char close;
                if (is_punct(p, '{'))
                        close = '}';
                else if (is_punct(p, '<'))
                        close = '>';
                else
                        return fail_at(p, &p->tok, "expected '{' for message field \"%s\"", f->name);
                if (++p->depth > PBTXT_MAX_DEPTH)
                        return fail_at(p, &p->tok, "messages nested too deeply");
                ProtobufCMessage *sub = malloc(md->sizeof_message);
                if (!sub)
                        return -ENOMEM;
                protobuf_c_message_init(md, sub);
                *(ProtobufCMessage **) dst = sub; /* owned by the parent now */
                r = note_position(p, sub, 0, &p->field_tok);
                if (r >= 0)
                        r = next(p);
                if (r < 0)
                        return r;
                r = parse_message_body(p, sub, close);
                p->depth--;
                return r;
        }
        }
        return fail_at(p, &p->tok, "unsupported field type");
}

/* Appends one element to a repeated field and parses it. */
static int parse_repeated_element(struct parser *p, ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        size_t *n = (size_t *) ((uint8_t *) m + f->quantifier_offset);
        void **arr = (void **) field_ptr(m, f);
        size_t es = pbtxt_type_size(f->type);
        uint8_t *a = realloc(*arr, (*n + 1) * es);
        if (!a)
                return -ENOMEM;
        memset(a + *n * es, 0, es);
        *arr = a;
        (*n)++;
        return parse_value(p, f, a + (*n - 1) * es);
}

static bool field_is_set(const ProtobufCMessage *m, const ProtobufCFieldDescriptor *f) {
        const uint8_t *base = (const uint8_t *) m;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                return *(const uint32_t *) (base + f->quantifier_offset) == f->id;
        if (f->type == PROTOBUF_C_TYPE_MESSAGE || f->type == PROTOBUF_C_TYPE_STRING) {
                const void *ptr = *(void *const *) (base + f->offset);
                return ptr && ptr != f->default_value;
        }
        if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset)
                return *(const protobuf_c_boolean *) (base + f->quantifier_offset);
        return false;
}

static int parse_field(struct parser *p, ProtobufCMessage *m) {
        const ProtobufCMessageDescriptor *desc = m->descriptor;
        char name[256];
        struct token ftok = p->tok;
        int r;

        if (p->tok.type != TOK_IDENT)
                return fail_at(p, &p->tok, "expected a field name in %s", desc->name);
        if (token_text(&p->tok, name, sizeof(name)) < 0)
                return fail_at(p, &p->tok, "field name too long in %s", desc->name);
        const ProtobufCFieldDescriptor *f = protobuf_c_message_descriptor_get_field_by_name(desc, name);
        if (!f)
                return fail_at(p, &ftok, "unknown field \"%s\" in %s", name, desc->name);
        p->field_tok = ftok;
        r = note_position(p, m, f->id, &ftok);
        if (r < 0)
                return r;
        r = next(p);
        if (r < 0)
                return r;

        bool colon = is_punct(p, ':');
        if (colon) {
                r = next(p);
                if (r < 0)
                        return r;
        } else if (f->type != PROTOBUF_C_TYPE_MESSAGE)
                return fail_at(p, &p->tok, "expected ':' after field \"%s\"", name);

        if (f->label == PROTOBUF_C_LABEL_REPEATED) {
                if (is_punct(p, '[')) {
                        r = next(p);
                        if (r < 0)
                                return r;
                        if (is_punct(p, ']'))
                                return next(p);
                        for (;;) {
                                r = parse_repeated_element(p, m, f);
                                if (r < 0)
                                        return r;
                                if (is_punct(p, ','))
                                        r = next(p);
                                else if (is_punct(p, ']'))
                                        return next(p);
                                else
                                        return fail_at(p, &p->tok, "expected ',' or ']' in list of field \"%s\"", name);
                                if (r < 0)
                                        return r;
                        }
                }
                return parse_repeated_element(p, m, f);
        }

        if (field_is_set(m, f))
                return fail_at(p, &ftok, "field \"%s\" of %s set more than once", name, desc->name);
        /* A oneof member replaces its siblings' case. */
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF) {
                uint32_t *oneof_case = (uint32_t *) ((uint8_t *) m + f->quantifier_offset);
                if (*oneof_case != 0)
                        return fail_at(p, &ftok, "field \"%s\" of %s conflicts with another member of its oneof",
                                       name, desc->name);
        }
        r = parse_value(p, f, field_ptr(m, f));
        if (r < 0)
                return r;
        if (f->flags & PROTOBUF_C_FIELD_FLAG_ONEOF)
                *(uint32_t *) ((uint8_t *) m + f->quantifier_offset) = f->id;
        else if (f->label == PROTOBUF_C_LABEL_OPTIONAL && f->quantifier_offset && f->type != PROTOBUF_C_TYPE_MESSAGE &&
                 f->type != PROTOBUF_C_TYPE_STRING)
                *(protobuf_c_boolean *) ((uint8_t *) m + f->quantifier_offset) = 1;
        return 0;
}

static int parse_message_body(struct parser *p, ProtobufCMessage *m, char close) {
        int r;
        for (;;) {
                if (close && is_punct(p, close))
                        return next(p);
                if (p->tok.type == TOK_EOF) {
                        if (close)
                                return fail_at(p, &p->tok, "unexpected end of input, expected '%c' to close %s", close,
                                               m->descriptor->name);
                        return 0;
                }
                r = parse_field(p, m);
                if (r < 0)
                        return r;
                if (is_punct(p, ',') || is_punct(p, ';')) {
                        r = next(p);
                        if (r < 0)
                                return r;
                }
        }
}

int pbtxt_parse(const ProtobufCMessageDescriptor *desc, const char *text, size_t len, const char *filename,
                ProtobufCMessage **ret_msg, char **ret_error) {
        return pbtxt_parse_positions(desc, text, len, filename, ret_msg, ret_error, NULL);
}

int pbtxt_parse_positions(const ProtobufCMessageDescriptor *desc, const char *text, size_t len,
                          const char *filename, ProtobufCMessage **ret_msg, char **ret_error,
                          struct pbtxt_positions *ret_pos) {
        struct parser p = {
                .text = text,
                .len = len,
                .line = 1,
                .col = 1,
                .filename = filename ? filename : "<input>",
                .positions = ret_pos,
        };
        int r;

        if (ret_error)
                *ret_error = NULL;
        if (len > PBTXT_MAX_INPUT) {
                if (ret_error)
                        *ret_error = strdup("input too large");
                return -E2BIG;
        }
        ProtobufCMessage *m = malloc(desc->sizeof_message);
        if (!m)
                return -ENOMEM;
        protobuf_c_message_init(desc, m);

        r = next(&p);
        if (r >= 0)
                r = parse_message_body(&p, m, 0);
        if (r < 0) {
                protobuf_c_message_free_unpacked(m, NULL);
                if (ret_pos)
                        pbtxt_positions_done(ret_pos);
                if (ret_error)
                        *ret_error = p.error ? p.error : strdup("out of memory");
                else
                        free(p.error);
                return r;
        }
        *ret_msg = m;
        return 0;
}

bool pbtxt_position_find(const struct pbtxt_positions *pos, const ProtobufCMessage *msg, uint32_t field,
                         unsigned *ret_line, unsigned *ret_col) {
        for (size_t i = 0; pos && i < pos->n; i++)
                if (pos->v[i].msg == msg && pos->v[i].field == field) {
                        *ret_line = pos->v[i].line;
                        *ret_col = pos->v[i].col;
                        return true;
                }
        return false;
}

void pbtxt_positions_done(struct pbtxt_positions *pos) {
        free(pos->v);
        *pos = (struct pbtxt_positions) {};
}

size_t pbtxt_type_size(ProtobufCType type) {
        switch (type) {
        case PROTOBUF_C_TYPE_INT32:
        case PROTOBUF_C_TYPE_SINT32:
        case PROTOBUF_C_TYPE_SFIXED32:
        case PROTOBUF_C_TYPE_UINT32:
        case PROTOBUF_C_TYPE_FIXED32:
        case PROTOBUF_C_TYPE_FLOAT:
        case PROTOBUF_C_TYPE_ENUM:
                return 4;
        case PROTOBUF_C_TYPE_INT64:
        case PROTOBUF_C_TYPE_SINT64:
        case PROTOBUF_C_TYPE_SFIXED64:
        case PROTOBUF_C_TYPE_UINT64:
        case PROTOBUF_C_TYPE_FIXED64:
        case PROTOBUF_C_TYPE_DOUBLE:
                return 8;
        case PROTOBUF_C_TYPE_BOOL:
                return sizeof(protobuf_c_boolean);
        case PROTOBUF_C_TYPE_STRING:
        case PROTOBUF_C_TYPE_MESSAGE:
                return sizeof(void *);
        case PROTOBUF_C_TYPE_BYTES:
                return sizeof(ProtobufCBinaryData);
        }
        return 0;
}

