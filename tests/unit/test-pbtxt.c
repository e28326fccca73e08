/* SPDX-License-Identifier: LGPL-2.1-or-later */

#include <criterion/criterion.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pbtxt/pbtxt.h"

#include "perfetto/config/trace_config.pb-c.h"
#include "test/pbtxt_test.pb-c.h"

static Traced__Test__Everything *parse_ok(const char *text) {
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        int r = pbtxt_parse(&traced__test__everything__descriptor, text, strlen(text), "t.pbtxt", &m, &err);
        cr_assert_eq(r, 0, "parse failed: %s", err ? err : "?");
        return (Traced__Test__Everything *) m;
}

static void parse_err(const char *text, const char *expected) {
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        int r = pbtxt_parse(&traced__test__everything__descriptor, text, strlen(text), "t.pbtxt", &m, &err);
        cr_assert_eq(r, -EINVAL, "\"%s\" parsed", text);
        cr_assert_null(m);
        cr_assert_not_null(err);
        cr_assert_str_eq(err, expected);
        free(err);
}

Test(pbtxt, every_scalar_type) {
        Traced__Test__Everything *e = parse_ok("scalars {\n"
                                               "  i32: -5 i64: -9000000000 u32: 4294967295 u64: 18446744073709551615\n"
                                               "  s32: -7 s64: 7 f32: 0x20 f64: 9 sf32: -1 sf64: -2\n"
                                               "  flt: 1.5 dbl: -2.25e3 b: true str: \"hi\" raw: 'a\\x00b'\n"
                                               "}");
        Traced__Test__Scalars *s = e->scalars;
        cr_assert_not_null(s);
        cr_assert(s->has_i32 && s->i32 == -5);
        cr_assert_eq(s->i64, -9000000000LL);
        cr_assert_eq(s->u32, 4294967295u);
        cr_assert_eq(s->u64, UINT64_MAX);
        cr_assert_eq(s->s32, -7);
        cr_assert_eq(s->s64, 7);
        cr_assert_eq(s->f32, 32);
        cr_assert_eq(s->f64, 9);
        cr_assert_eq(s->sf32, -1);
        cr_assert_eq(s->sf64, -2);
        cr_assert_float_eq(s->flt, 1.5f, 1e-6);
        cr_assert_float_eq(s->dbl, -2250.0, 1e-9);
        cr_assert(s->has_b && s->b);
        cr_assert_str_eq(s->str, "hi");
        cr_assert_eq(s->raw.len, 3);
        cr_assert_arr_eq(s->raw.data, "a\0b", 3);
        protobuf_c_message_free_unpacked(&e->base, NULL);
}

Test(pbtxt, special_floats_and_bools) {
        Traced__Test__Everything *e = parse_ok("scalars { flt: -inf dbl: nan b: f }");
        cr_assert(isinf(e->scalars->flt) && e->scalars->flt < 0);
        cr_assert(isnan(e->scalars->dbl));
        cr_assert(e->scalars->has_b && !e->scalars->b);
        protobuf_c_message_free_unpacked(&e->base, NULL);
}

Test(pbtxt, repeated_enums_nesting_oneof) {
        Traced__Test__Everything *e = parse_ok("# leading comment\n"
                                               "numbers: 1 numbers: 2, numbers: [3, 4]\n"
                                               "names: \"a\" \"b\" ; names: ['c']\n"
                                               "color: GREEN colors: [RED, 2]\n"
                                               "children { number: 7 children < text: \"deep\" > }\n"
                                               "children: { }\n"
                                               "nested { i32: 1 }  # trailing\n");
        cr_assert_eq(e->n_numbers, 4);
        for (int i = 0; i < 4; i++)
                cr_assert_eq(e->numbers[i], i + 1);
        cr_assert_eq(e->n_names, 2);
        cr_assert_str_eq(e->names[0], "ab", "adjacent strings concatenate");
        cr_assert_str_eq(e->names[1], "c");
        cr_assert(e->has_color && e->color == TRACED__TEST__EVERYTHING__COLOR__GREEN);
        cr_assert_eq(e->n_colors, 2);
        cr_assert_eq(e->colors[1], TRACED__TEST__EVERYTHING__COLOR__GREEN);
        cr_assert_eq(e->n_children, 2);
        cr_assert_eq(e->children[0]->choice_case, TRACED__TEST__EVERYTHING__CHOICE_NUMBER);
        cr_assert_eq(e->children[0]->number, 7);
        cr_assert_str_eq(e->children[0]->children[0]->text, "deep");
        cr_assert_eq(e->choice_case, TRACED__TEST__EVERYTHING__CHOICE_NESTED);
        cr_assert_eq(e->nested->i32, 1);
        cr_assert_str_eq(e->with_default, "dflt");
        protobuf_c_message_free_unpacked(&e->base, NULL);
}

Test(pbtxt, escapes) {
        Traced__Test__Everything *e = parse_ok("text: \"tab\\tnl\\nq\\\"s\\'\\\\ \\101\\x42\"");
        cr_assert_str_eq(e->text, "tab\tnl\nq\"s'\\ AB");
        protobuf_c_message_free_unpacked(&e->base, NULL);
}

Test(pbtxt, errors_are_positioned) {
        parse_err("scalars {\n  i32: 1\n  bogus: 2\n}", "t.pbtxt:3:3: unknown field \"bogus\" in traced.test.Scalars");
        parse_err("color: PURPLE", "t.pbtxt:1:8: unknown value \"PURPLE\" for enum traced.test.Everything.Color (field \"color\")");
        parse_err("scalars { u32: -1 }", "t.pbtxt:1:16: value -1 out of range for field \"u32\"");
        parse_err("scalars { i32: 2147483648 }", "t.pbtxt:1:16: value 2147483648 out of range for field \"i32\"");
        parse_err("scalars { i32: x }", "t.pbtxt:1:16: expected an integer for field \"i32\"");
        parse_err("scalars { str: \"open }", "t.pbtxt:1:16: unterminated string");
        parse_err("scalars { i32: 1", "t.pbtxt:1:17: unexpected end of input, expected '}' to close traced.test.Scalars");
        parse_err("color: RED color: GREEN", "t.pbtxt:1:12: field \"color\" of traced.test.Everything set more than once");
        parse_err("text: \"a\" number: 1", "t.pbtxt:1:11: field \"number\" of traced.test.Everything conflicts with another member of its oneof");
        parse_err("scalars { b: maybe }", "t.pbtxt:1:14: expected true or false for field \"b\"");
        parse_err("numbers 5", "t.pbtxt:1:9: expected ':' after field \"numbers\"");
        parse_err("numbers: [1 2]", "t.pbtxt:1:13: expected ',' or ']' in list of field \"numbers\"");
        parse_err("text: \"\\q\"", "t.pbtxt:1:7: unknown escape \\q in string");
        parse_err("@", "t.pbtxt:1:1: unexpected character '@'");
}

Test(pbtxt, depth_is_bounded) {
        char *deep = malloc(200 * 12 + 1);
        size_t n = 0;
        for (int i = 0; i < 200; i++)
                n += (size_t) sprintf(deep + n, "children {");
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        cr_assert_eq(pbtxt_parse(&traced__test__everything__descriptor, deep, n, NULL, &m, &err), -EINVAL);
        cr_assert(strstr(err, "nested too deeply") != NULL, "%s", err);
        free(err);
        free(deep);
}

Test(pbtxt, print_round_trips) {
        const char *text = "scalars { i32: -5 u64: 7 flt: 0.5 b: true str: \"x\\ny\" raw: \"\\001\\377\" }\n"
                           "numbers: [1, 2, 3] names: \"n\" color: RED children { text: \"c\" } number: 42\n";
        Traced__Test__Everything *a = parse_ok(text);
        char *buf = NULL;
        size_t len = 0;
        FILE *f = open_memstream(&buf, &len);
        pbtxt_print(f, &a->base, 0);
        fclose(f);
        Traced__Test__Everything *b = parse_ok(buf);
        size_t na = protobuf_c_message_get_packed_size(&a->base), nb = protobuf_c_message_get_packed_size(&b->base);
        cr_assert_eq(na, nb, "printed:\n%s", buf);
        uint8_t *pa = malloc(na), *pb = malloc(nb);
        protobuf_c_message_pack(&a->base, pa);
        protobuf_c_message_pack(&b->base, pb);
        cr_assert_arr_eq(pa, pb, na, "round trip changed the message:\n%s", buf);
        free(pa);
        free(pb);
        free(buf);
        protobuf_c_message_free_unpacked(&a->base, NULL);
        protobuf_c_message_free_unpacked(&b->base, NULL);
}

static char *slurp(const char *path, size_t *ret_len) {
        FILE *f = fopen(path, "r");
        cr_assert_not_null(f, "%s", path);
        char *buf = malloc(1 << 16);
        *ret_len = fread(buf, 1, 1 << 16, f);
        fclose(f);
        return buf;
}

Test(pbtxt, upstream_trace_configs) {
        size_t len;
        char *text = slurp(TEST_DATA_DIR "/upstream/config-readbuffers.pbtxt", &len);
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, "config-readbuffers.pbtxt", &m,
                                 &err),
                     0, "%s", err);
        Perfetto__Protos__TraceConfig *c = (Perfetto__Protos__TraceConfig *) m;
        cr_assert_eq(c->n_buffers, 1);
        cr_assert_eq(c->buffers[0]->size_kb, 4096);
        cr_assert_eq(c->buffers[0]->fill_policy, PERFETTO__PROTOS__TRACE_CONFIG__BUFFER_CONFIG__FILL_POLICY__RING_BUFFER);
        cr_assert_eq(c->n_data_sources, 2);
        cr_assert_str_eq(c->data_sources[0]->config->name, "linux.ftrace");
        cr_assert_str_eq(c->data_sources[0]->config->ftrace_config->ftrace_events[0], "ftrace/print");
        cr_assert_str_eq(c->data_sources[1]->config->name, "linux.process_stats");
        cr_assert_eq(c->duration_ms, 1500);
        protobuf_c_message_free_unpacked(m, NULL);
        free(text);

        text = slurp(TEST_DATA_DIR "/upstream/config-write-into-file.pbtxt", &len);
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, text, len, "c.pbtxt", &m, &err), 0, "%s",
                     err);
        c = (Perfetto__Protos__TraceConfig *) m;
        cr_assert(c->write_into_file);
        protobuf_c_message_free_unpacked(m, NULL);
        free(text);

        const char *typo = "buffers {\n  size_kb: 1\n}\nbuffers {\n  bufer_size_kb: 2\n}\n";
        cr_assert_eq(pbtxt_parse(&perfetto__protos__trace_config__descriptor, typo, strlen(typo), "config.pbtxt", &m,
                                 &err),
                     -EINVAL);
        cr_assert_str_eq(err, "config.pbtxt:5:3: unknown field \"bufer_size_kb\" in perfetto.protos.TraceConfig.BufferConfig");
        free(err);
}

/* Where the fields were written: each element of a repeated message its
 * own entry, for errors found after the parse. */
Test(pbtxt, positions_of_fields) {
        const char *text = "buffers { size_kb: 1 }\n"
                           "data_sources {\n"
                           "  config { name: \"a\" }\n"
                           "}\n"
                           "data_sources { config {\n"
                           "    name: \"b\"\n"
                           "    target_buffer: 3 } }\n";
        ProtobufCMessage *m = NULL;
        char *err = NULL;
        struct pbtxt_positions pos = {};
        cr_assert_eq(pbtxt_parse_positions(&perfetto__protos__trace_config__descriptor, text, strlen(text), "p",
                                           &m, &err, &pos),
                     0, "%s", err);
        Perfetto__Protos__TraceConfig *c = (Perfetto__Protos__TraceConfig *) m;
        unsigned line = 0, col = 0;
        cr_assert(pbtxt_position_find(&pos, &c->data_sources[1]->base, 0, &line, &col));
        cr_assert_eq(line, 5);
        cr_assert_eq(col, 1);
        cr_assert(pbtxt_position_find(&pos, &c->data_sources[1]->config->base, 2, &line, &col));
        cr_assert_eq(line, 7, "target_buffer (field 2) is on line 7, not %u", line);
        cr_assert_eq(col, 5);
        cr_assert(pbtxt_position_find(&pos, &c->data_sources[0]->config->base, 0, &line, &col));
        cr_assert_eq(line, 3);
        cr_assert_eq(col, 3);
        cr_assert(pbtxt_position_find(&pos, &c->buffers[0]->base, 1, &line, &col));
        cr_assert_eq(line, 1);
        cr_assert_eq(col, 11);
        cr_assert_not(pbtxt_position_find(&pos, &c->data_sources[0]->config->base, 2, &line, &col),
                      "a field never written has no position");
        pbtxt_positions_done(&pos);
        protobuf_c_message_free_unpacked(m, NULL);

        /* A failed parse leaves none. */
        cr_assert_eq(pbtxt_parse_positions(&perfetto__protos__trace_config__descriptor, "buffers { x: 1 }", 16, "p",
                                           &m, &err, &pos),
                     -EINVAL);
        free(err);
        cr_assert_eq(pos.n, 0);
        cr_assert_null(pos.v);
}
