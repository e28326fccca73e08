#!/bin/sh
# Verifies the generated systemd units with systemd-analyze, with the
# service pointing at the traced binary of this build.
set -eu
builddir=$(cd "${TOP_BUILDDIR:-.}" && pwd)
srcdir=$(cd "${srcdir:-$(dirname "$0")/..}" && pwd)
if ! command -v systemd-analyze >/dev/null 2>&1; then
        echo "SKIP: systemd-analyze is not installed"
        exit 77
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
for u in traced.socket traced-consumer.socket traced-remote.socket traced.service; do
        sed "s|^ExecStart=.*|ExecStart=$(cd "$builddir" && pwd)/traced|" "$builddir/units/$u" > "$tmp/$u"
done
# The snapshot template, for a unit named as OnFailure=...@%n.service names it.
sed "s|^ExecStart=[^ ]*|ExecStart=$(cd "$builddir" && pwd)/tracectl|" "$builddir/units/traced-snapshot@.service" \
        > "$tmp/traced-snapshot@.service"
cd "$tmp"
snap=traced-snapshot@failing.service.service
out=$(systemd-analyze verify --man=no traced.socket traced-consumer.socket traced-remote.socket traced.service \
        "$snap" 2>&1) || {
        echo "$out"; exit 1; }
if [ -n "$out" ]; then
        echo "systemd-analyze verify reported:"; echo "$out"; exit 1
fi
echo "systemd-analyze verify: ok"
systemd-analyze security --offline=yes traced.service | tail -n 1
level=$(systemd-analyze security --offline=yes traced.service | sed -n 's/.*exposure level for traced.service: \([0-9.]*\).*/\1/p')
# The threshold is UNIT_MAX_EXPOSURE in Makefile.am.
max=${UNIT_MAX_EXPOSURE:?set by make check (Makefile.am)}
awk -v l="$level" -v m="$max" 'BEGIN { exit !(l != "" && l + 0 <= m + 0) }' || {
        echo "exposure $level of traced.service is above $max (UNIT_MAX_EXPOSURE)"; exit 1; }
echo "exposure $level <= $max: ok"
level=$(systemd-analyze security --offline=yes "$snap" | sed -n 's/.*exposure level for .*: \([0-9.]*\).*/\1/p')
awk -v l="$level" -v m="$max" 'BEGIN { exit !(l != "" && l + 0 <= m + 0) }' || {
        echo "exposure $level of traced-snapshot@.service is above $max (UNIT_MAX_EXPOSURE)"; exit 1; }
echo "exposure $level of traced-snapshot@.service <= $max: ok"
grep -q "^ExecStart=.*tracectl snapshot flight-recorder --unit %i$" "$builddir/units/traced-snapshot@.service" || {
        echo "traced-snapshot@.service does not snapshot the flight recorder for %i (the unit's name as given: %I would turn its dashes into slashes)"; exit 1; }
grep -q "^StateDirectory=traced/snapshots$" "$builddir/units/traced-snapshot@.service" || {
        echo "traced-snapshot@.service does not make /var/lib/traced/snapshots"; exit 1; }

# The plugins' state directory the unit makes writable (ProtectSystem=strict
# leaves the rest of /run read-only) is the one the ftrace plugin writes,
# and it is not the sockets' directory, which the traced group must reach.
journal=$(sed -n 's/^#define ROOT_JOURNAL_PATH "\(.*\)"$/\1/p' "$srcdir/plugins/ftrace/root-journal.h")
statedir=$(sed -n 's/^RuntimeDirectory=//p' traced.service)
[ "$(dirname "$journal")" = "/run/$statedir" ] || {
        echo "the ftrace plugin writes $journal, the unit's RuntimeDirectory is /run/$statedir"; exit 1; }
grep -q "^RuntimeDirectoryMode=0700$" traced.service || { echo "/run/$statedir is not 0700"; exit 1; }
sock=$(sed -n 's/^ListenStream=//p' "$builddir/units/traced.socket" | head -n 1)
[ "$(dirname "$sock")" != "/run/$statedir" ] || { echo "the plugins' state shares the sockets' directory"; exit 1; }
grep -q "/run/$statedir/" "$builddir/man/traced.8" || { echo "traced(8) does not name /run/$statedir"; exit 1; }
echo "plugin state in /run/$statedir, apart from the sockets in $(dirname "$sock"): ok"

# The cache directory the bpf_stack plugin keeps its unwind tables in
# ($CACHE_DIRECTORY of its host: the unit's, with a directory per plugin
# host, "bpfstack" for plugins/bpfstack.so): labelled by the SELinux
# policy, named by traced-bpf-stack(7) with the subdirectory the plugin
# writes.
cachedir=$(sed -n 's/^CacheDirectory=//p' traced.service)
sub=$(sed -n 's/^#define UNWIND_CACHE_SUBDIR "\(.*\)"$/\1/p' "$srcdir/plugins/bpfstack/bpfstack-session.h")
[ -n "$cachedir" ] && [ -n "$sub" ] || { echo "no CacheDirectory= in traced.service, or no UNWIND_CACHE_SUBDIR"; exit 1; }
grep -q "^/var/cache/$cachedir(/\.\*)?.*traced_cache_t" "$srcdir/selinux/traced.fc" || {
        echo "selinux/traced.fc does not label /var/cache/$cachedir traced_cache_t"; exit 1; }
sed 's/\\-/-/g' "$builddir/man/traced-bpf-stack.7" | grep -q "/var/cache/$cachedir/bpfstack/$sub" || {
        echo "traced-bpf-stack(7) does not name /var/cache/$cachedir/bpfstack/$sub"; exit 1; }
echo "unwind table cache in /var/cache/$cachedir/bpfstack/$sub: ok"
