#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The test driver's compiler for tests/integration/X-via-mmap.map_path and
# X-via-read.read_path: runs the integration test program X, through
# tests/run-test.sh like every test, with the ftrace plugin told to read
# every CPU's ring buffer another way than its default (splice() of full
# sub-buffers): through the kernel's mapping where it offers one
# (TRACED_FTRACE_READ=mmap), or by read() alone (TRACED_FTRACE_READ=read),
# so that the tests cover all of its readers.
set -e
case "$1" in
*-via-mmap.map_path) prog=${1%-via-mmap.map_path} how=mmap ;;
*-via-read.read_path) prog=${1%-via-read.read_path} how=read ;;
*)
        echo "map-path.sh: $1 is neither an X-via-mmap.map_path nor an X-via-read.read_path" >&2
        exit 99
        ;;
esac
shift
TRACED_FTRACE_READ=$how
export TRACED_FTRACE_READ
exec "${SHELL:-/bin/sh}" "$(dirname "$0")/../run-test.sh" "$prog" "$@"
