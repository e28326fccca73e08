#!/usr/bin/env python3
# SPDX-License-Identifier: LGPL-2.1-or-later
"""Converts `perf script -F comm,pid,tid,cpu,time,ip,sym,dso` output (with
callchains) into a Perfetto trace of PerfSample packets with interned
callstacks, the format traced's perf plugin and upstream traced_perf write,
so `tracectl report` and `perf report` can be timed on the same samples.

  perf-script-to-trace.py OUT.pftrace [--repeat N] < script.txt

--repeat writes the samples N times, each copy on a sequence whose
incremental state is cleared first (as after a producer's
ClearIncrementalState), so every copy re-interns what it uses."""

import re
import sys


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        if v:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def key(field, wt):
    return varint((field << 3) | wt)


def f_varint(field, v):
    return key(field, 0) + varint(v)


def f_bytes(field, b):
    return key(field, 2) + varint(len(b)) + b


HEADER = re.compile(r"^(\S.*?)\s+(\d+)/(\d+)\s+\[(\d+)\]\s+(\d+)\.(\d+):")
FRAME = re.compile(r"^\s+([0-9a-f]+)\s+(.*?)\s+\((.*)\)$")

SEQ = 1
SEQ_CLEARED = 1
SEQ_NEEDS = 2


class Interner:
    def __init__(self):
        self.clear()

    def clear(self):
        self.paths = {}
        self.mappings = {}
        self.builds = {}
        self.funcs = {}
        self.frames = {}
        self.stacks = {}

    def _get(self, table, k, make):
        iid = table.get(k)
        if iid is None:
            iid = len(table) + 1
            table[k] = iid
            make(iid)
        return iid

    def stack(self, frames, out):
        """frames: [(ip, sym, dso)] leaf first; out: InternedData bytes."""

        def frame_iid(fr):
            ip, sym, dso = fr

            def make_frame(iid):
                def make_map(miid):
                    comps = [c for c in dso.split("/") if c] or [dso]
                    ids = []
                    for c in comps:
                        ids.append(self._get(self.paths, c, lambda p, c=c: out.append(
                            f_bytes(17, f_varint(1, p) + f_bytes(2, c.encode())))))
                    body = f_varint(1, miid)
                    for i in ids:
                        body += f_varint(7, i)
                    out.append(f_bytes(19, body))

                m = self._get(self.mappings, dso, make_map)
                body = f_varint(1, iid) + f_varint(3, m)
                if sym != "[unknown]":
                    fn = self._get(self.funcs, sym, lambda f: out.append(
                        f_bytes(5, f_varint(1, f) + f_bytes(2, sym.encode()))))
                    body += f_varint(2, fn)
                else:
                    body += f_varint(4, int(ip, 16))
                out.append(f_bytes(6, body))

            return self._get(self.frames, (sym if sym != "[unknown]" else ip, dso), make_frame)

        ids = tuple(frame_iid(fr) for fr in reversed(frames))  # root first

        def make_stack(iid):
            body = f_varint(1, iid)
            for i in ids:
                body += f_varint(2, i)
            out.append(f_bytes(7, body))

        return self._get(self.stacks, ids, make_stack)


def packet(body):
    return f_bytes(1, body)


def main():
    out_path = sys.argv[1]
    repeat = 1
    if len(sys.argv) > 3 and sys.argv[2] == "--repeat":
        repeat = int(sys.argv[3])

    samples = []
    cur = None
    for line in sys.stdin:
        line = line.rstrip("\n")
        m = HEADER.match(line)
        if m:
            cur = [m.group(1), int(m.group(2)), int(m.group(3)), int(m.group(4)),
                   int(m.group(5)) * 1000000000 + int(m.group(6).ljust(9, "0")[:9]), []]
            samples.append(cur)
            continue
        m = FRAME.match(line)
        if m and cur is not None:
            cur[5].append((m.group(1), m.group(2), m.group(3)))

    interner = Interner()
    copy = bytearray()
    defaults = f_bytes(59, f_bytes(12, f_bytes(1, f_varint(2, 2999) + f_varint(4, 1))))
    copy += packet(f_varint(10, SEQ) + f_varint(13, SEQ_CLEARED) + defaults)
    for comm, pid, tid, cpu, ts, frames in samples:
        interned = []
        sid = interner.stack(frames, interned) if frames else None
        sample = f_varint(1, cpu) + f_varint(2, pid) + f_varint(3, tid) + f_varint(5, 2)
        if sid is not None:
            sample += f_varint(4, sid)
        body = f_varint(8, ts) + f_varint(10, SEQ) + f_varint(13, SEQ_NEEDS)
        if interned:
            body += f_bytes(12, b"".join(interned))
        body += f_bytes(66, sample)
        copy += packet(body)
    copy = bytes(copy)
    with open(out_path, "wb") as f:
        for _ in range(repeat):
            f.write(copy)
    sys.stderr.write("%d samples, %d distinct callstacks, %d bytes per copy, %d copies\n"
                     % (len(samples), len(interner.stacks), len(copy), repeat))


if __name__ == "__main__":
    main()
