#!/bin/sh
# Installs, from Debian's archive, everything traced needs to build, test
# and run. Safe to re-run: installs only what is missing.
set -eu

PACKAGES="
build-essential autoconf automake libtool pkg-config make
debhelper lintian
libsystemd-dev systemd dbus util-linux
libprotobuf-c-dev protobuf-c-compiler protobuf-compiler
libunwind-dev libbpf-dev libinih-dev libelf-dev libdw-dev libdebuginfod-dev zlib1g-dev libjson-c-dev libseccomp-dev libiberty-dev
libcriterion-dev libxml2-dev
bpftool
clang llvm lld libclang-rt-14-dev
libselinux1-dev selinux-policy-dev selinux-policy-default setools semodule-utils bzip2
mandoc man-db procps bash-completion
python3-minimal python3-dev python3-protobuf nodejs openjdk-17-jdk-headless
abigail-tools
debuginfod golang-go
"

# One dpkg-query for all of them: a re-run (tools/run.sh runs this every
# time) takes a moment, not a process per package.
# shellcheck disable=SC2086
installed=" $(dpkg-query -W -f='${Package} ${Status}\n' $PACKAGES 2>/dev/null | awk '/ install ok installed$/ {printf "%s ", $1}')"
missing=""
for p in $PACKAGES; do
        case "$installed" in
        *" $p "*) ;;
        *) missing="$missing $p" ;;
        esac
done

if [ -z "$missing" ]; then
        echo "install-deps: all build dependencies present"
        exit 0
fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then
        SUDO="sudo"
fi
echo "install-deps: installing:$missing"
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get update -q
# shellcheck disable=SC2086
$SUDO env DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $missing
