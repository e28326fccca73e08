#!/bin/sh
# The tests make their scratch files where tests/run-test.sh checks what
# they leave behind: in C through test_mkdtemp(), test_tmpfile() and
# test_tmp_dir() (tests/common/test-scratch.h), in shell under
# ${TMPDIR:-/tmp}. A temporary name spelled out under /tmp (a mkdtemp or
# mktemp template, or a name built with printf) escapes that check, so
# this fails on any in tests/ (the harness's own directory aside).
set -eu
top=${TOP_SRCDIR:-$(cd "$(dirname "$0")/.." && pwd)}
cd "$top"
hits=$(grep -rnE '/tmp/[^"'"'"' ]*(XXXXXX|%)' tests --include='*.c' --include='*.h' --include='*.sh' |
        grep -v '^tests/run-test\.sh:' || true)
if [ -n "$hits" ]; then
        echo "FAIL: temporary paths under /tmp, outside the test's own directory:"
        echo "$hits" | sed 's/^/    /'
        echo "(use test_mkdtemp()/test_tmpfile() in C, \"\${TMPDIR:-/tmp}\" in shell)"
        exit 1
fi
echo "ok: no test names a temporary path under /tmp"
