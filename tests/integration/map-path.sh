#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The test driver's compiler for tests/integration/X-via-mmap.map_path:
# runs the integration test program X, through tests/run-test.sh like every
# test, with the ftrace plugin told to map every CPU's ring buffer where the
# kernel offers it (TRACED_FTRACE_READ=mmap) instead of read() (the
# default), so that the tests cover both of its readers.
set -e
prog=${1%-via-mmap.map_path}
[ "$prog" != "$1" ] || { echo "map-path.sh: $1 is not an X-via-mmap.map_path" >&2; exit 99; }
shift
TRACED_FTRACE_READ=mmap
export TRACED_FTRACE_READ
exec "${SHELL:-/bin/sh}" "$(dirname "$0")/../run-test.sh" "$prog" "$@"
