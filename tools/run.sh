#!/bin/sh
# The main job on a fresh Debian 12 machine: install the dependencies,
# build traced, and run it.
#
# Today the service daemon and tracectl are still being built, so the job
# builds the tree and runs the IPC wire layer's tests (codec, host/client
# dispatch, streaming replies, fd passing) and its fuzz corpus replay. It
# grows into "record a system trace with the default config and print a
# summary" as the daemon and the CLI land.
set -eu

top=$(cd "$(dirname "$0")/.." && pwd)
"$top/tools/install-deps.sh"
cd "$top"
./autogen.sh >/dev/null
mkdir -p build
cd build
[ -f Makefile ] || ../configure >configure.out
make -j"$(nproc 2>/dev/null || echo 2)"
make -j"$(nproc 2>/dev/null || echo 2)" check TESTS="tests/unit/test-ipc-frame tests/unit/test-ipc-host tests/fuzz/fuzz-ipc-frame-replay"
for t in tests/unit/test-ipc-frame tests/unit/test-ipc-host tests/fuzz/fuzz-ipc-frame-replay; do
        echo "== $t"
        tail -n 1 "$t.log"
done
