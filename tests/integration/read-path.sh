#!/bin/sh
# SPDX-License-Identifier: LGPL-2.1-or-later
# The test driver's compiler for tests/integration/X-via-read.read_path:
# runs the integration test program X, through tests/run-test.sh like every
# test, with the ftrace plugin told to read() every CPU's ring buffer
# (TRACED_FTRACE_READ=read) instead of mapping it, so that the tests cover
# both of its readers.
set -e
prog=${1%-via-read.read_path}
[ "$prog" != "$1" ] || { echo "read-path.sh: $1 is not an X-via-read.read_path" >&2; exit 99; }
shift
TRACED_FTRACE_READ=read
export TRACED_FTRACE_READ
exec "${SHELL:-/bin/sh}" "$(dirname "$0")/../run-test.sh" "$prog" "$@"
