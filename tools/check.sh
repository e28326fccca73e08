#!/bin/sh
# Runs the whole test suite from a clean build: dependencies, a -Werror
# build with `make check`, the same suite under ASan+UBSan, and (with
# --distcheck) `make distcheck`.
# With --fuzz=SECONDS, each libFuzzer target then runs that long on top of
# its corpus (`make fuzz-run`; crashers land in tests/fuzz/corpus/).
# With --deb, the Debian packages are built (dpkg-buildpackage -us -uc -b,
# from a copy of the tree) and lintian checks them: any error or warning
# fails.
# With --systemd, `make check-systemd` (root) then boots systemd as PID 1
# in a container over the host's root with the build installed, and checks
# traced-snapshot@.service there (HACKING.md, "Under systemd as PID 1";
# about 30 s, no network); a SKIP (no root, a kernel without what it
# needs) does not fail the run.
#   tools/check.sh [--sanitizers | --no-sanitizers] [--distcheck] [--fuzz=SECONDS] [--deb] [--systemd]
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
sanitizers=yes
distcheck=no
fuzz_seconds=
deb=no
systemd=no
for a in "$@"; do
        case "$a" in
        --sanitizers) sanitizers=yes ;;
        --no-sanitizers) sanitizers=no ;;
        --distcheck) distcheck=yes ;;
        --fuzz=*) fuzz_seconds=${a#--fuzz=} ;;
        --deb) deb=yes ;;
        --systemd) systemd=yes ;;
        *) echo "usage: $0 [--sanitizers | --no-sanitizers] [--distcheck] [--fuzz=SECONDS] [--deb] [--systemd]" >&2; exit 2 ;;
        esac
done

"$top/tools/install-deps.sh"
jobs=$(nproc 2>/dev/null || echo 2)

out=$top
src=$top
if [ -f "$top/config.status" ]; then
        # Configured in place: out-of-tree builds need a clean source tree,
        # so the suites build from a copy without the in-place build.
        src=$(mktemp -d /tmp/traced-check-src-XXXXXX)
        trap 'rm -rf "$src"' EXIT
        echo "== $top is configured in place; testing a clean copy of it ($src)"
        tar -C "$top" --exclude=./build --exclude=./build-check --exclude=./build-asan -cf - . | tar -C "$src" -xf -
        (cd "$src" && make distclean >/dev/null 2>&1 || true)
fi
cd "$src"
./autogen.sh >/dev/null

# The logs of the tests that failed under DIR, last and whole, so that a
# truncated CI log still ends with them.
show_failed() {
        failed=$(grep -l -E '^:test-result: (FAIL|ERROR|XPASS)' $(find "$1" -name '*.trs' -path '*tests*') 2>/dev/null || true)
        for t in $failed; do
                echo "===== ${t%.trs}.log (failed)"; tail -n 400 "${t%.trs}.log"
        done
        echo "== failed in $1:" $failed
}

run_suite() {
        dir=$1; shift
        rm -rf "$dir"
        mkdir -p "$dir"
        (
                cd "$dir"
                "$src/configure" --enable-werror "$@" >configure.out 2>&1 || { cat configure.out; exit 1; }
                make -j"$jobs" >make.out 2>&1 || { cat make.out; exit 1; }
                if ! make -j"$jobs" check; then
                        show_failed .
                        exit 1
                fi
        )
}

echo "== build and test ($out/build-check)"
run_suite "$out/build-check"

if [ "$systemd" = yes ]; then
        echo "== traced-snapshot@.service under systemd as PID 1 (make check-systemd)"
        (cd "$out/build-check" && make check-systemd)
fi

if [ "$sanitizers" = yes ]; then
        echo "== build and test with ASan+UBSan ($out/build-asan)"
        ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
                run_suite "$out/build-asan" --enable-sanitizers
fi

if [ "$distcheck" = yes ]; then
        echo "== make distcheck"
        # The unit tests and static checks (DISTCHECK_TESTS in Makefile.am):
        # the integration suite ran above, plain and sanitized.
        if ! (cd "$out/build-check" && make -j"$jobs" distcheck TESTS='$(DISTCHECK_TESTS)' >distcheck.out 2>&1); then
                tail -n 80 "$out/build-check/distcheck.out"
                # distcheck leaves its tree behind when it fails.
                show_failed "$out/build-check"
                exit 1
        fi
        echo "distcheck: ok"
fi
if [ -n "$fuzz_seconds" ]; then
        echo "== fuzzing each target for ${fuzz_seconds}s"
        (cd "$top/build-check" && make -j"$jobs" fuzz >fuzz-build.out 2>&1) || { tail -n 40 "$top/build-check/fuzz-build.out"; exit 1; }
        (cd "$top/build-check" && make fuzz-run FUZZ_SECONDS="$fuzz_seconds")
fi
if [ "$deb" = yes ]; then
        # From a copy without the autogen output: dpkg-buildpackage builds in
        # its source tree, which the suites above need unconfigured.
        echo "== Debian packages (dpkg-buildpackage -us -uc -b, lintian)"
        debdir=$(mktemp -d /tmp/traced-deb-XXXXXX)
        if [ "$src" = "$top" ]; then
                trap 'rm -rf "$debdir"' EXIT
        else
                trap 'rm -rf "$src" "$debdir"' EXIT
        fi
        mkdir "$debdir/traced"
        if git -C "$top" rev-parse --git-dir >/dev/null 2>&1; then
                git -C "$top" ls-files -z | (cd "$top" && xargs -0 tar -cf - --no-recursion) | tar -C "$debdir/traced" -xf -
        else
                tar -C "$top" --exclude=./build --exclude=./build-check --exclude=./build-asan -cf - . | tar -C "$debdir/traced" -xf -
        fi
        if ! (cd "$debdir/traced" && dpkg-buildpackage -us -uc -b -j"$jobs" >"$debdir/build.log" 2>&1); then
                tail -n 80 "$debdir/build.log"
                exit 1
        fi
        ls "$debdir"/*.deb
        # lintian exits non-zero on any error or warning (its overrides, each
        # with its reason, are in debian/*.lintian-overrides).
        lintian --fail-on error,warning "$debdir"/*.changes
        echo "deb: ok"
fi
echo "== all tests passed"
