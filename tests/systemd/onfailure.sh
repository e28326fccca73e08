#!/bin/bash
# SPDX-License-Identifier: LGPL-2.1-or-later
#
# traced-snapshot@.service under systemd as PID 1 (issue #49, item 5):
# a unit with OnFailure=traced-snapshot@%n.service fails, and the flight
# recorder's snapshot in /var/lib/traced/snapshots/UNIT-TIME.pftrace
# holds its journal lines, names its process, and `tracectl summary` says
# which unit failed and when.
#
# Run by `make check-systemd` (not part of make check), as root:
#   make check-systemd [SYSTEMD_TEST_KEEP=1]
#
# How systemd gets to be PID 1 here, with no network, no image and nothing
# changed on the host:
#   - the root is an overlay of the host's own / (read only, the lower
#     layer) under a tmpfs (the upper layer): the host's systemd, dbus and
#     libraries, with this build installed into it (make install
#     DESTDIR=root; configure's --prefix must be /usr or /usr/local, where
#     systemd looks for units, sysusers.d and tmpfiles.d);
#   - unshare gives it its own mount, PID, cgroup, network, UTS and IPC
#     namespaces; PID 1 there mounts /proc, /sys, a cgroup2 hierarchy (the
#     cgroup namespace's root is a cgroup made for the run, a child of
#     ours, so that systemd manages a subtree of its own), a tmpfs /dev
#     with the usual nodes bound from the host, tmpfs /run and /tmp, then
#     execs systemd in the root with container=traced-test and
#     --unit=traced-onfailure-test.target (sysinit.target for the users and
#     directories, dbus.socket for `tracectl snapshot --unit`'s questions
#     to systemd, traced's sockets);
#   - every mount lives in that mount namespace only: when systemd powers
#     off (SIGRTMIN+4) the namespaces go and the mounts with them; the
#     cgroup is removed after. What the run leaves is checked: no mount
#     naming the run's directory, no process, no cgroup, no tracefs
#     instance.
# The flight recorder is the installed flight-recorder.cfg copied into
# the sessions directory (traced(8), RESIDENT SESSIONS: "copy it to change
# it"), with one change: its linux.ftrace data source records in a tracefs
# instance of its own, not in the top-level one that other tests on this
# kernel use.
#
# Exit status: 0 PASS, 1 FAIL, 77 SKIP (not root, or the kernel or the
# host lacks what a container needs: said why).
set -u

TOP_BUILDDIR=${TOP_BUILDDIR:?run through make check-systemd}
TOP_SRCDIR=${TOP_SRCDIR:?run through make check-systemd}
: "${PREFIX:?}" "${BINDIR:?}" "${SYSCONFDIR:?}" "${PKGDATADIR:?}"
KEEP=${SYSTEMD_TEST_KEEP:-}
TRACECTL=$TOP_BUILDDIR/tracectl
TIMEOUT=${SYSTEMD_TEST_TIMEOUT:-120}

# The unit that fails and its program.
UNIT=traced-onfailure-victim.service
SNAPUNIT="traced-snapshot@$UNIT.service"
VICTIM_COMM=onfail-victim
TARGET=traced-onfailure-test.target

say() { echo "onfailure: $*"; }
skip() {
        echo "SKIP: $*"
        exit 77
}

# ---- PID 1 -------------------------------------------------------------
# The stage run as PID 1 of the new namespaces: the root, this build in
# it, the scenario's units, the API file systems, then systemd.
boot_stage() {
        set -e
        local R=$S/root
        mkdir -p "$S/layer" "$R"
        mount -t tmpfs -o mode=0755,size=2g tmpfs "$S/layer"
        mkdir "$S/layer/upper" "$S/layer/work"
        mount -t overlay overlay -o "lowerdir=/,upperdir=$S/layer/upper,workdir=$S/layer/work" "$R"

        make -s -C "$TOP_BUILDDIR" install DESTDIR="$R" >"$S/install.log" 2>&1
        chroot "$R" ldconfig

        # The flight recorder, recording in a tracefs instance of its own.
        mkdir -p "$R$SYSCONFDIR/traced/sessions.d"
        sed "s|^\( *\)ftrace_config {|&\n\1  instance_name: \"$INSTANCE\"|" \
                "$R$PKGDATADIR/sessions.d/flight-recorder.cfg" >"$R$SYSCONFDIR/traced/sessions.d/flight-recorder.cfg"
        grep -q "instance_name: \"$INSTANCE\"" "$R$SYSCONFDIR/traced/sessions.d/flight-recorder.cfg"

        # The unit that fails, as a user writes it (traced(8)'s example).
        mkdir -p "$R/usr/local/libexec"
        cat >"$R/usr/local/libexec/$VICTIM_COMM" <<-EOF
	#!/bin/sh
	echo "$MARKER: starting the job"
	sleep 0.2
	echo "$MARKER: giving up" >&2
	exit 1
	EOF
        chmod 0755 "$R/usr/local/libexec/$VICTIM_COMM"
        cat >"$R/etc/systemd/system/$UNIT" <<-EOF
	[Unit]
	Description=A job that fails (traced's OnFailure test)
	OnFailure=traced-snapshot@%n.service

	[Service]
	Type=oneshot
	ExecStart=/usr/local/libexec/$VICTIM_COMM
	EOF
        cat >"$R/etc/systemd/system/$TARGET" <<-EOF
	[Unit]
	Description=traced's OnFailure test
	Requires=sysinit.target dbus.socket traced.socket traced-consumer.socket
	After=sysinit.target dbus.socket traced.socket traced-consumer.socket
	# traced from boot, as traced(8) says for a resident session (systemctl
	# add-wants multi-user.target traced.service).
	Wants=traced.service
	AllowIsolate=yes
	EOF
        # Nothing of the host's timers (apt, man-db...) in the container.
        ln -sf /dev/null "$R/etc/systemd/system/timers.target"

        mount -t proc proc "$R/proc"
        mount -t sysfs sysfs "$R/sys"
        mount -t cgroup2 cgroup2 "$R/sys/fs/cgroup"
        mount -t tmpfs -o mode=0755 tmpfs "$R/dev"
        local n
        for n in null zero full random urandom tty; do
                touch "$R/dev/$n"
                mount --bind "/dev/$n" "$R/dev/$n"
        done
        mkdir "$R/dev/pts" "$R/dev/shm"
        mount -t devpts -o newinstance,ptmxmode=0666,mode=0620 devpts "$R/dev/pts"
        ln -s pts/ptmx "$R/dev/ptmx"
        mount -t tmpfs -o mode=1777 tmpfs "$R/dev/shm"
        mount -t tmpfs -o mode=0755 tmpfs "$R/run"
        mount -t tmpfs -o mode=1777 tmpfs "$R/tmp"
        touch "$S/booting"
        # The root becomes the mount namespace's root (pivot_root, the old
        # one detached), not a chroot: in a chroot the kernel refuses new
        # user namespaces, which PrivateUsers= asks for.
        cd "$R"
        pivot_root . .
        umount -l .
        cd /
        export container=traced-test
        exec "$SYSTEMD" --unit="$TARGET" --log-level=info
}
if [ "${1:-}" = --boot-stage ]; then
        # Re-entered through unshare, as PID 1 of the new namespaces (S,
        # SYSTEMD, MARKER, INSTANCE from the run that started it).
        boot_stage
        exit 1
fi

# The marker the failing unit writes, unique to the run, and the flight
# recorder's tracefs instance (the boot stage has them from the run).
MARKER="traced-onfailure-marker-$$-$RANDOM$RANDOM"
INSTANCE="traced-onfailure-$$"

# ---- what the run needs ------------------------------------------------
[ "$(id -u)" = 0 ] || skip "needs root (mounts, namespaces, systemd as PID 1): run make check-systemd as root"
for c in unshare nsenter chroot pivot_root findmnt mount umount; do
        command -v "$c" >/dev/null || skip "$c is missing (util-linux, coreutils)"
done
SYSTEMD=
for s in /usr/lib/systemd/systemd /lib/systemd/systemd; do
        [ -x "$s" ] && SYSTEMD=$s && break
done
[ -n "$SYSTEMD" ] || skip "systemd is not installed on this host (apt-get install systemd)"
[ -x /usr/bin/dbus-daemon ] || skip "dbus is not installed on this host (apt-get install dbus)"
case "$PREFIX" in
/usr | /usr/local) ;;
*) skip "this build's --prefix is $PREFIX: systemd finds units, sysusers.d and tmpfiles.d under /usr or /usr/local only (configure --prefix=/usr/local)" ;;
esac
[ -x "$TRACECTL" ] || {
        echo "FAIL: $TRACECTL is not built"
        exit 1
}
grep -qw overlay /proc/filesystems || modprobe overlay 2>/dev/null
grep -qw overlay /proc/filesystems || skip "the kernel has no overlayfs (CONFIG_OVERLAY_FS)"
[ -e /proc/self/ns/cgroup ] || skip "the kernel has no cgroup namespaces (CONFIG_CGROUPS, 4.6 or later)"

# Our cgroup in the cgroup2 hierarchy, and where that is mounted: the
# unified hierarchy (/sys/fs/cgroup) or the hybrid one's
# (/sys/fs/cgroup/unified).
CGMNT=$(findmnt -rn -t cgroup2 -o TARGET | head -n1)
[ -n "$CGMNT" ] || skip "no cgroup2 hierarchy is mounted (systemd 252 in a container needs one)"
CGSELF=$(sed -n 's/^0:://p' /proc/self/cgroup)
[ -n "$CGSELF" ] || skip "this process is in no cgroup2 cgroup"
CGPARENT=$CGMNT${CGSELF%/}
[ -w "$CGPARENT" ] || skip "cannot make a cgroup under $CGPARENT (read only: a container that delegates no cgroup2 subtree)"

# ---- scratch, cleanup --------------------------------------------------
S=$(mktemp -d "${TMPDIR:-/tmp}/traced-pid1.XXXXXX") || exit 1
CG=$CGPARENT/traced-onfailure.$$
BOOT_PID= # unshare
PID1=     # systemd, as the host sees it
FAILED=0

cg_remove() {
        [ -d "$CG" ] || return 0
        # Anything still in it (there should be nothing once the PID
        # namespace is gone) is killed, then the tree removed, deepest first.
        local i
        for i in $(seq 50); do
                [ -n "$(find "$CG" -name cgroup.procs -exec cat {} + 2>/dev/null)" ] || break
                [ -w "$CG/cgroup.kill" ] && echo 1 >"$CG/cgroup.kill" 2>/dev/null
                sleep 0.1
        done
        find "$CG" -depth -type d -exec rmdir {} + 2>/dev/null
        [ ! -d "$CG" ]
}

cleanup() {
        local rc=$?
        trap - EXIT INT TERM
        if [ -n "$BOOT_PID" ] && kill -0 "$BOOT_PID" 2>/dev/null; then
                # Power off; if systemd does not go within 30 s, kill unshare,
                # which kills its child (--kill-child) and with it the namespace.
                [ -n "$PID1" ] && kill -RTMIN+4 "$PID1" 2>/dev/null
                local i
                for i in $(seq 300); do
                        kill -0 "$BOOT_PID" 2>/dev/null || break
                        sleep 0.1
                done
                if kill -0 "$BOOT_PID" 2>/dev/null; then
                        say "systemd did not power off within 30 s: killed"
                        kill -KILL "$BOOT_PID" 2>/dev/null
                fi
                wait "$BOOT_PID" 2>/dev/null
        fi
        local left=
        cg_remove || left="$left cgroup $CG;"
        if [ -d "/sys/kernel/tracing/instances/$INSTANCE" ]; then
                rmdir "/sys/kernel/tracing/instances/$INSTANCE" 2>/dev/null
                left="$left tracefs instance $INSTANCE (removed now);"
        fi
        local m
        m=$(findmnt -rn -o TARGET | grep -F "$S" || true)
        [ -z "$m" ] || left="$left mounts: $m;"
        if [ -n "$left" ]; then
                echo "FAIL: the run left:$left"
                rc=1
        fi
        if [ -n "$KEEP" ]; then
                say "kept $S"
        else
                rm -rf --one-file-system "$S"
        fi
        exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

fail() {
        echo "FAIL: $*"
        FAILED=1
}


# ---- boot ----------------------------------------------------------------
export S SYSTEMD MARKER INSTANCE
T0=$(date +%s)
mkdir "$CG" || {
        echo "FAIL: cannot make the cgroup $CG"
        exit 1
}
(
        echo "$BASHPID" >"$CG/cgroup.procs" || exit 1
        exec unshare --mount --propagation private --pid --fork --kill-child --cgroup --net --uts --ipc \
                bash "$0" --boot-stage
) >"$S/boot.log" 2>&1 &
BOOT_PID=$!

# systemd is unshare's child once the stage has set the root up.
deadline=$((SECONDS + TIMEOUT))
while [ ! -e "$S/booting" ] && kill -0 "$BOOT_PID" 2>/dev/null && [ $SECONDS -lt $deadline ]; do
        sleep 0.2
done
if [ ! -e "$S/booting" ]; then
        echo "FAIL: the root was not set up (install or mounts); its log:"
        sed 's/^/    /' "$S/boot.log" "$S/install.log" 2>/dev/null | tail -n 40
        exit 1
fi
PID1=$(cat "/proc/$BOOT_PID/task/$BOOT_PID/children" 2>/dev/null)
PID1=${PID1%% *}
[ -n "$PID1" ] || {
        echo "FAIL: no PID 1 under unshare ($BOOT_PID)"
        cat "$S/boot.log"
        exit 1
}
in_root() { nsenter -t "$PID1" -a -r -w -- "$@"; }

state=
while [ $SECONDS -lt $deadline ] && kill -0 "$PID1" 2>/dev/null; do
        state=$(in_root systemctl is-system-running 2>/dev/null)
        case "$state" in running | degraded) break ;; esac
        sleep 0.3
done
case "$state" in
running | degraded) ;;
*)
        echo "FAIL: systemd did not boot within ${TIMEOUT}s (state: ${state:-no answer}); its log:"
        sed 's/^/    /' "$S/boot.log" | tail -n 40
        exit 1
        ;;
esac
say "systemd $($SYSTEMD --version | sed -n '1s/^systemd \([0-9]*\).*/\1/p') is PID 1 in the root ($state) after $(($(date +%s) - T0)) s"
[ "$state" = running ] || in_root systemctl --no-pager --failed | sed 's/^/    /'

diagnose() {
        echo "--- the container's journal (traced, the snapshot, the failed unit):"
        in_root journalctl -b --no-pager -o short-monotonic -u traced.service -u "$SNAPUNIT" -u "$UNIT" \
                -u dbus.service 2>&1 | tail -n 60 | sed 's/^/    /'
}

# ---- the flight recorder ---------------------------------------------------
up=
while [ $SECONDS -lt $deadline ]; do
        if in_root "$BINDIR/tracectl" query 2>/dev/null | grep -q 'flight-recorder'; then
                up=1
                break
        fi
        sleep 0.3
done
[ -n "$up" ] || {
        fail "traced did not start the resident session flight-recorder"
        in_root "$BINDIR/tracectl" query 2>&1 | sed 's/^/    /'
        diagnose
        exit 1
}
say "traced runs the flight recorder"

# ---- the unit fails --------------------------------------------------------
if in_root systemctl start "$UNIT" 2>"$S/start.err"; then
        fail "$UNIT did not fail"
        exit 1
fi
say "$UNIT failed ($(in_root systemctl show -P Result "$UNIT"))"

# systemd queues traced-snapshot@UNIT.service as the unit fails: wait
# until it ran. A snapshot unit neither run nor queued 5 s after the
# failure was not started at all.
snap_state= snap_result= idle=0
while [ $SECONDS -lt $deadline ]; do
        snap_state=$(in_root systemctl show -P ActiveState "$SNAPUNIT")
        if [ -n "$(in_root systemctl show -P InvocationID "$SNAPUNIT")" ]; then
                idle=0
                [ "$snap_state" = inactive -o "$snap_state" = failed ] && break
        elif ! in_root systemctl list-jobs --no-legend --plain 2>/dev/null | grep -qF "$SNAPUNIT"; then
                idle=$((idle + 1))
                [ $idle -lt 17 ] || break
        fi
        sleep 0.3
done
if [ -z "$(in_root systemctl show -P InvocationID "$SNAPUNIT")" ]; then
        fail "systemd did not start $SNAPUNIT when $UNIT failed"
else
        snap_result=$(in_root systemctl show -P Result "$SNAPUNIT")
        say "$SNAPUNIT: $snap_state, result $snap_result"
        [ "$snap_state" = inactive ] && [ "$snap_result" = success ] ||
                fail "$SNAPUNIT did not succeed (state ${snap_state:-none}, result ${snap_result:-none})"
fi

# ---- the snapshot ----------------------------------------------------------
files=$(in_root find /var/lib/traced/snapshots -maxdepth 1 -name "$UNIT-*.pftrace" -printf '%f %u:%g %m\n')
say "in /var/lib/traced/snapshots: ${files:-nothing}"
n=$(printf '%s' "$files" | grep -c . || true)
if [ "$n" != 1 ]; then
        fail "expected one snapshot /var/lib/traced/snapshots/$UNIT-TIME.pftrace, found $n"
        diagnose
        exit 1
fi
name=${files%% *}
case "$files" in
*" traced:traced 640") ;;
*) fail "the snapshot is not the traced user's, group traced, mode 0640: $files" ;;
esac
in_root cat "/var/lib/traced/snapshots/$name" >"$S/snapshot.pftrace"
say "$name: $(stat -c %s "$S/snapshot.pftrace") bytes"

# It opens alone: decoded whole by this build's tracectl.
if ! "$TRACECTL" summary "$S/snapshot.pftrace" >"$S/summary.txt" 2>"$S/summary.err"; then
        fail "tracectl summary cannot read the snapshot: $(cat "$S/summary.err")"
fi
if ! "$TRACECTL" print --journal "$S/snapshot.pftrace" >"$S/journal.txt" 2>"$S/print.err"; then
        fail "tracectl print --journal cannot read the snapshot: $(cat "$S/print.err")"
fi
sed -n '/^Snapshot:/,/journal lines\|no journal/p' "$S/summary.txt" | sed 's/^/    /'

# Which unit failed, and when (the time systemd gives, to the second).
failed_at=$(in_root systemctl show -P InactiveEnterTimestamp "$UNIT")
main_pid=$(in_root systemctl show -P ExecMainPID "$UNIT")
when=$(date -d "$failed_at" '+%Y-%m-%d %H:%M:%S %Z' 2>/dev/null)
grep -q "^Snapshot: *of session flight-recorder" "$S/summary.txt" ||
        fail "the summary does not say the snapshot is of the flight recorder"
grep -qF "Failed unit:    $UNIT failed at $when (failed, result exit-code)" "$S/summary.txt" ||
        fail "the summary does not say $UNIT failed at $when (failed, result exit-code)"
grep -qF "main process $main_pid exited with status 1" "$S/summary.txt" ||
        fail "the summary does not name the main process $main_pid, exited with status 1"
# Its journal lines, from its process, named.
grep -qE "journal lines of it, from.* pid $main_pid \($VICTIM_COMM\)" "$S/summary.txt" ||
        fail "the summary does not count the unit's journal lines from pid $main_pid ($VICTIM_COMM)"
for line in "$MARKER: starting the job" "$MARKER: giving up"; do
        grep -F "$line" "$S/journal.txt" | grep -qF "$UNIT" ||
                fail "the snapshot does not hold the journal line \"$line\" of $UNIT"
done
# The process, named by the scheduler's events too (its exec renames
# the task). Those carry the kernel's pids, not the container's that
# systemd and the journal give, so the name is what is matched.
"$TRACECTL" print "$S/snapshot.pftrace" >"$S/print.txt" 2>&1
grep -qE "task_rename .*newcomm: \"$VICTIM_COMM\"" "$S/print.txt" ||
        fail "the snapshot's scheduler events do not name the process $VICTIM_COMM (no task_rename to it)"

if [ "$FAILED" != 0 ]; then
        diagnose
        [ -n "$KEEP" ] || say "SYSTEMD_TEST_KEEP=1 keeps the snapshot, summary and logs"
        echo "FAIL: traced-snapshot@.service under systemd as PID 1 ($(($(date +%s) - T0)) s)"
        exit 1
fi
echo "PASS: $UNIT failed, $SNAPUNIT wrote /var/lib/traced/snapshots/$name holding its journal lines ($(($(date +%s) - T0)) s)"
exit 0
