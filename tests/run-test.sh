#!/bin/sh
# make check runs every test through this script (LOG_COMPILER in
# Makefile.am): run-test.sh TEST [ARGS...].
#
# The test gets a directory of its own, /tmp/traced-check.XXXXXX, as
# TRACED_TEST_TMPDIR (where the Criterion tests make their scratch
# directories: tests/common/test-scratch.h) and as TMPDIR (mktemp, and what
# the programs it starts make). When it ends, the directory must be empty
# and no process it started may still be running: every process started
# from the test has the directory in its environment. A test that passed
# or was skipped is failed for anything left over; what is left is then
# named, the processes are killed and the directory removed, so that
# nothing stays behind even after a test that crashed or timed out.
#
# TRACED_TEST_KEEP=1 keeps the directory and whatever the test left in it
# (a failed test's logs), unchecked, and names it.
set -u

[ $# -gt 0 ] || { echo "usage: $0 TEST [ARGS...]" >&2; exit 99; }
dir=$(mktemp -d /tmp/traced-check.XXXXXX) || exit 99
# Like /tmp: the service core and the users some tests switch to make
# files here too.
chmod 1777 "$dir" || { rmdir "$dir"; exit 99; }

cleanup() {
        if [ "${TRACED_TEST_KEEP:-0}" = 1 ]; then
                echo "TRACED_TEST_KEEP=1: kept $dir"
                return
        fi
        # A file system a test mounted there and did not unmount (it
        # crashed): detached first, so that rm does not walk into it.
        awk -v d="$dir/" 'index($5, d) == 1 { print $5 }' /proc/self/mountinfo 2>/dev/null | sort -r |
                while read -r m; do umount -l "$m" 2>/dev/null; done
        rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM

# Processes whose environment names the directory (the grep gets its
# pattern on stdin: its own command line does not hold it).
started_here() {
        [ -n "$dir" ] || return 0 # (an empty name would match everything)
        # shellcheck disable=SC2062 # the globs are files; the pattern is on stdin
        printf '%s\n' "$dir" | grep -laF -f - /proc/[0-9]*/environ 2>/dev/null |
                sed -n 's|^/proc/\([0-9]*\)/environ$|\1|p'
}

# Only the test sees the directory in its environment; this script and
# what it runs afterwards do not.
TRACED_TEST_TMPDIR=$dir TMPDIR=$dir "$@"
rc=$?

[ "${TRACED_TEST_KEEP:-0}" = 1 ] && exit $rc

# Processes get a moment to finish exiting.
left=$(started_here)
i=0
while [ -n "$left" ] && [ $i -lt 50 ]; do
        sleep 0.1
        i=$((i + 1))
        left=$(started_here)
done
leftover=0
if [ -n "$left" ]; then
        echo "run-test.sh: $1 left processes running:"
        for p in $left; do
                printf '    %s\n' "$(ps -o pid=,args= -p "$p" 2>/dev/null || echo "$p")"
        done
        # shellcheck disable=SC2086
        kill -KILL $left 2>/dev/null
        leftover=1
fi
if [ -n "$(ls -A "$dir")" ]; then
        echo "run-test.sh: $1 left files in $dir:"
        (cd "$dir" && find . -mindepth 1 -maxdepth 2 | sort | head -n 50 | sed 's/^/    /')
        leftover=1
fi
if [ "$leftover" = 1 ] && { [ "$rc" -eq 0 ] || [ "$rc" -eq 77 ]; }; then
        echo "run-test.sh: FAIL: a test must remove what it made and stop what it started"
        rc=1
fi
exit $rc
