#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""traced's typed protobuf writers, generated from protos/ at build time.

Reads the FileDescriptorSet protoc writes for the .proto files
(`protoc --descriptor_set_out=FILE --include_imports --include_source_info`)
and writes, for each .proto file P, OUT/traced/pbzero/P.pbw.h: header-only,
C89 (with the compiler's inline) and C++ clean, on <traced/pbzero.h>.

Per message M (nested messages are Parent_Child; names outside the
perfetto.protos package carry their package, dots as underscores):
  typedef struct M { struct traced_pb_msg msg; } M;     its handle
  M_FIELD_f                                              field numbers
  M_init(M *m, struct traced_pb_stream *s)               a root message
  scalar f:      M_set_f(m, v)       repeated: M_add_f(m, v)
  string f:      M_set_f(m, const char *) and M_set_f_n(m, const char *, size_t)
                 (repeated: M_add_f, M_add_f_n)
  bytes f:       M_set_f(m, const void *, size_t)        (repeated: M_add_f)
  message f:     M_begin_f(m, Child *c) ... M_end_f(m, c)
                 M_set_f_serialized(m, const void *, size_t)  (repeated: M_add_...)
  packed f:      M_set_f(m, const T *values, size_t n)
                 M_set_f_encoded(m, const void *, size_t)  (elements already encoded)
                 M_begin_f(m, traced_pb_packed *p), M_append_f(p, v), M_end_f(m, p)
Enums are C enums: E (top level, values E_VALUE) or M_E (nested, values
M_VALUE, in the scope of their message as in C++).
"""

import argparse
import os
import re
import sys

from google.protobuf import descriptor_pb2

F = descriptor_pb2.FieldDescriptorProto

# C parameter type, and the encoding: kind (varint / fixed32 / fixed64)
# and the expression of the value to encode from the parameter v.
SCALARS = {
    F.TYPE_DOUBLE: ("double", "fixed64", "traced_pb_double_bits({v})"),
    F.TYPE_FLOAT: ("float", "fixed32", "traced_pb_float_bits({v})"),
    F.TYPE_INT64: ("int64_t", "varint", "(uint64_t) {v}"),
    F.TYPE_UINT64: ("uint64_t", "varint", "{v}"),
    F.TYPE_INT32: ("int32_t", "varint", "(uint64_t) (int64_t) {v}"),
    F.TYPE_FIXED64: ("uint64_t", "fixed64", "{v}"),
    F.TYPE_FIXED32: ("uint32_t", "fixed32", "{v}"),
    F.TYPE_BOOL: ("int", "varint", "(uint64_t) ({v} != 0)"),
    F.TYPE_UINT32: ("uint32_t", "varint", "(uint64_t) {v}"),
    F.TYPE_SFIXED32: ("int32_t", "fixed32", "(uint32_t) {v}"),
    F.TYPE_SFIXED64: ("int64_t", "fixed64", "(uint64_t) {v}"),
    F.TYPE_SINT32: ("int32_t", "varint", "traced_pb_zigzag32({v})"),
    F.TYPE_SINT64: ("int64_t", "varint", "traced_pb_zigzag64({v})"),
    F.TYPE_ENUM: (None, "varint", "(uint64_t) (int64_t) (int32_t) {v}"),
}
FIXED_SIZE = {"fixed32": 4, "fixed64": 8}

MAIN_PACKAGE = "perfetto.protos"


def c_scope(package, name_path):
    """The C name of a type declared in package under name_path (A.B.C)."""
    base = name_path.replace(".", "_")
    if package == MAIN_PACKAGE:
        return base
    return package.replace(".", "_") + "_" + base


def comment_text(text):
    lines = [l.strip() for l in text.strip().splitlines()]
    text = " ".join(l for l in lines if l)
    return text.replace("/*", "/ *").replace("*/", "* /")


def wrap_comment(text, indent="", width=100):
    words = text.split()
    out, line = [], indent + "/*"
    for w in words:
        if len(line) + 1 + len(w) > width:
            out.append(line)
            line = indent + " *"
        line += " " + w
    line += " */"
    out.append(line)
    return out


class Types:
    """Every message and enum of the set, by full name."""

    def __init__(self, fds):
        self.messages = {}  # ".pkg.M.N" -> (C name, DescriptorProto, file)
        self.enums = {}  # ".pkg.E" -> (C name, value prefix, EnumDescriptorProto, file)
        for f in fds.file:
            for m in f.message_type:
                self._add_message(f, m, [])
            for e in f.enum_type:
                cname = c_scope(f.package, e.name)
                self.enums["." + f.package + "." + e.name] = (cname, cname, e, f)

    def _add_message(self, f, m, parents):
        path = parents + [m.name]
        full = "." + f.package + "." + ".".join(path)
        cname = c_scope(f.package, ".".join(path))
        self.messages[full] = (cname, m, f)
        for n in m.nested_type:
            self._add_message(f, n, path)
        for e in m.enum_type:
            ename = c_scope(f.package, ".".join(path + [e.name]))
            self.enums[full + "." + e.name] = (ename, cname, e, f)


class Comments:
    def __init__(self, f):
        self.by_path = {}
        for loc in f.source_code_info.location:
            if loc.leading_comments:
                self.by_path[tuple(loc.path)] = loc.leading_comments

    def get(self, path):
        return comment_text(self.by_path.get(tuple(path), ""))


def header_path(proto_name):
    return "traced/pbzero/" + re.sub(r"\.proto$", "", proto_name) + ".pbw.h"


class FileGen:
    def __init__(self, f, types):
        self.f = f
        self.types = types
        self.comments = Comments(f)
        self.proto3 = f.syntax == "proto3"
        self.out = []

    def w(self, *lines):
        self.out.extend(lines)

    def messages(self):
        """(C name, DescriptorProto, source path) of every message, outer first."""
        res = []

        def walk(m, parents, path):
            full = "." + self.f.package + "." + ".".join(parents + [m.name])
            res.append((self.types.messages[full][0], m, full, path))
            for i, n in enumerate(m.nested_type):
                walk(n, parents + [m.name], path + [3, i])

        for i, m in enumerate(self.f.message_type):
            walk(m, [], [4, i])
        return res

    def enums(self):
        res = []
        for i, e in enumerate(self.f.enum_type):
            res.append((self.f.package, e, "." + self.f.package + "." + e.name, [5, i]))
        for cname, m, full, path in self.messages():
            for i, e in enumerate(m.enum_type):
                res.append((self.f.package, e, full + "." + e.name, path + [4, i]))
        return res

    def gen(self):
        guard = "TRACED_" + re.sub(r"[^A-Za-z0-9]", "_", header_path(self.f.name)[len("traced/"):]).upper()
        self.w("/* Generated by tools/pbgen.py from %s: do not edit. */" % self.f.name,
               "#ifndef " + guard, "#define " + guard, "", "#include <traced/pbzero.h>")
        for dep in self.f.dependency:
            self.w("#include <%s>" % header_path(dep))
        self.w("", "#ifdef __cplusplus", 'extern "C" {', "#endif", "")

        for package, e, full, path in self.enums():
            self.gen_enum(e, full, path)
        msgs = self.messages()
        for cname, m, full, path in msgs:
            self.w("typedef struct %s {" % cname, "        struct traced_pb_msg msg;", "} %s;" % cname)
        if msgs:
            self.w("")
        for cname, m, full, path in msgs:
            self.gen_message(cname, m, path)

        self.w("#ifdef __cplusplus", "}", "#endif", "", "#endif")
        return "\n".join(self.out) + "\n"

    def gen_enum(self, e, full, path):
        ename, prefix, _, _ = self.types.enums[full]
        c = self.comments.get(path)
        if c:
            self.w(*wrap_comment(c))
        self.w("typedef enum %s {" % ename)
        for i, v in enumerate(e.value):
            sep = "," if i + 1 < len(e.value) else ""
            self.w("        %s_%s = %d%s" % (prefix, v.name, v.number, sep))
        self.w("} %s;" % ename, "")

    def fn(self, ret, name, params, body):
        self.w("TRACED_PB_INLINE %s %s(%s) {" % (ret, name, params))
        self.w(*["        " + l if l else "" for l in body])
        self.w("}")

    def gen_message(self, cname, m, path):
        c = self.comments.get(path)
        self.w(*wrap_comment("%s%s" % (cname, (": " + c) if c else "")))
        if m.field:
            self.w("enum {")
            for i, fd in enumerate(m.field):
                sep = "," if i + 1 < len(m.field) else ""
                self.w("        %s_FIELD_%s = %d%s" % (cname, fd.name, fd.number, sep))
            self.w("};")
        self.fn("void", cname + "_init", "%s *m, struct traced_pb_stream *s" % cname,
                ["traced_pb_msg_init(&m->msg, s);"])
        for i, fd in enumerate(m.field):
            c = self.comments.get(path + [2, i])
            if c:
                self.w(*wrap_comment(c))
            self.gen_field(cname, fd)
        self.w("")

    def packed(self, fd):
        if fd.label != F.LABEL_REPEATED or fd.type in (F.TYPE_STRING, F.TYPE_BYTES, F.TYPE_MESSAGE, F.TYPE_GROUP):
            return False
        if fd.options.HasField("packed"):
            return fd.options.packed
        return self.proto3

    def gen_field(self, cname, fd):
        n = fd.number
        rep = fd.label == F.LABEL_REPEATED
        verb = "add" if rep else "set"
        base = "%s_%%s_%s" % (cname, fd.name)
        msg = "&m->msg, %s_FIELD_%s" % (cname, fd.name)
        if fd.type == F.TYPE_GROUP:
            raise SystemExit("%s: groups are not supported (%s.%s)" % (self.f.name, cname, fd.name))
        if fd.type == F.TYPE_MESSAGE:
            child = self.types.messages[fd.type_name][0]
            self.fn("void", base % "begin", "%s *m, %s *child" % (cname, child),
                    ["traced_pb_msg_begin_nested(%s, &child->msg);" % msg])
            self.fn("void", base % "end", "%s *m, %s *child" % (cname, child),
                    ["traced_pb_msg_end_nested(&m->msg, &child->msg);"])
            self.fn("void", (base % verb) + "_serialized", "%s *m, const void *data, size_t size" % cname,
                    ["traced_pb_msg_bytes(%s, data, size);" % msg])
            return
        if fd.type == F.TYPE_STRING:
            self.fn("void", base % verb, "%s *m, const char *value" % cname,
                    ["traced_pb_msg_string(%s, value);" % msg])
            self.fn("void", (base % verb) + "_n", "%s *m, const char *value, size_t size" % cname,
                    ["traced_pb_msg_bytes(%s, value, size);" % msg])
            return
        if fd.type == F.TYPE_BYTES:
            self.fn("void", base % verb, "%s *m, const void *data, size_t size" % cname,
                    ["traced_pb_msg_bytes(%s, data, size);" % msg])
            return
        ctype, kind, expr = SCALARS[fd.type]
        if fd.type == F.TYPE_ENUM:
            ctype = self.types.enums[fd.type_name][0]
        if self.packed(fd):
            self.gen_packed(cname, fd, ctype, kind, expr)
            return
        self.fn("void", base % verb, "%s *m, %s value" % (cname, ctype),
                ["traced_pb_msg_%s(%s, %s);" % (kind, msg, expr.format(v="value"))])

    def gen_packed(self, cname, fd, ctype, kind, expr):
        base = "%s_%%s_%s" % (cname, fd.name)
        msg = "&m->msg, %s_FIELD_%s" % (cname, fd.name)
        one = expr.format(v="values[i]")
        body = ["size_t i, size = 0;"]
        if kind == "varint":
            body += ["for (i = 0; i < n; i++)", "        size += traced_pb_varint_size(%s);" % one]
        else:
            body += ["size = n * %du;" % FIXED_SIZE[kind]]
        body += ["traced_pb_msg_len_header(%s, size);" % msg,
                 "for (i = 0; i < n; i++)",
                 "        traced_pb_stream_%s(m->msg.stream, %s);" % (kind, one)]
        self.fn("void", base % "set", "%s *m, const %s *values, size_t n" % (cname, ctype), body)
        self.fn("void", (base % "set") + "_encoded", "%s *m, const void *data, size_t size" % cname,
                ["traced_pb_msg_bytes(%s, data, size);" % msg])
        self.fn("void", base % "begin", "%s *m, traced_pb_packed *p" % cname,
                ["traced_pb_msg_begin_nested(%s, &p->msg);" % msg])
        self.fn("void", base % "append", "traced_pb_packed *p, %s value" % ctype,
                ["traced_pb_packed_%s(p, %s);" % (kind, expr.format(v="value"))])
        self.fn("void", base % "end", "%s *m, traced_pb_packed *p" % cname,
                ["traced_pb_msg_end_nested(&m->msg, &p->msg);"])


def write_if_changed(path, text):
    try:
        with open(path, encoding="utf-8") as f:
            if f.read() == text:
                return
    except FileNotFoundError:
        pass
    os.makedirs(os.path.dirname(path), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("descriptor_set", help="FileDescriptorSet from protoc --descriptor_set_out --include_imports")
    ap.add_argument("--out", required=True, help="directory that receives traced/pbzero/...")
    ap.add_argument("--list", action="store_true", help="print the headers it would write, and exit")
    args = ap.parse_args()

    fds = descriptor_pb2.FileDescriptorSet()
    with open(args.descriptor_set, "rb") as f:
        fds.ParseFromString(f.read())
    types = Types(fds)
    for f in fds.file:
        path = os.path.join(args.out, header_path(f.name))
        if args.list:
            print(path)
            continue
        write_if_changed(path, FileGen(f, types).gen())


if __name__ == "__main__":
    sys.exit(main())
