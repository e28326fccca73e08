#!/bin/sh
# The SELinux policy module: links selinux/traced.pp (built by make) with
# the reference policy's base module, expands the result into a kernel
# policy (which also checks every neverallow of the reference policy) and
# proves with setools' sesearch what each of traced's domains may do:
#   - the service core holds no capability, cannot touch tracefs, perf
#     events or BPF, and writes files only in the trace directory (so never
#     in home directories);
#   - only the ftrace host writes tracefs;
#   - only the perf and bpf hosts open perf events, only those two use
#     BPF;
#   - only the journald host reads the journal, with CAP_DAC_READ_SEARCH
#     alone;
#   - the supervisor makes the plugin hosts' cache directories, and
#     writes no file there.
set -eu
builddir=${TOP_BUILDDIR:-.}
pp="$builddir/selinux/traced.pp"
if [ ! -f "$pp" ]; then
        echo "SKIP: the policy module was not built (configure found no selinux-policy-dev)"
        exit 77
fi
for t in "${SESEARCH:-}" "${SEMODULE_LINK:-}" "${SEMODULE_EXPAND:-}"; do
        if [ -z "$t" ]; then
                echo "SKIP: sesearch (setools), semodule_link or semodule_expand (semodule-utils) is missing"
                exit 77
        fi
done
base=${SELINUX_BASE_POLICY:-/usr/share/selinux/default/base.pp.bz2}
if [ ! -f "$base" ]; then
        echo "SKIP: no reference policy base module at $base (selinux-policy-default)"
        exit 77
fi

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
# sh runs the EXIT trap on exit, not when a signal kills it.
trap 'exit 129' HUP
trap 'exit 130' INT
trap 'exit 143' TERM
case "$base" in
*.bz2) bzip2 -dc "$base" >"$tmp/base.pp" ;;
*) cp "$base" "$tmp/base.pp" ;;
esac
"$SEMODULE_LINK" -o "$tmp/linked.pp" "$tmp/base.pp" "$pp" >/dev/null
"$SEMODULE_EXPAND" "$tmp/linked.pp" "$tmp/policy"
policy="$tmp/policy"
echo "linked with $base and expanded: ok"

fail=0
# query NAME EXPECT(empty|nonempty) sesearch-args...
query() {
        name=$1; expect=$2; shift 2
        out=$("$SESEARCH" -A "$@" "$policy")
        if [ "$expect" = empty ] && [ -n "$out" ]; then
                echo "FAIL: $name: sesearch -A $*"; echo "$out" | sed 's/^/    /'; fail=1
        elif [ "$expect" = nonempty ] && [ -z "$out" ]; then
                echo "FAIL: $name: nothing matches sesearch -A $*"; fail=1
        else
                echo "ok: $name ($(printf '%s' "$out" | grep -c . || true) rule(s))"
        fi
}

core=traced_core_t
hosts="traced_plugin_host_t traced_ftrace_host_t traced_perf_host_t traced_bpf_host_t traced_journald_host_t traced_sysstats_host_t traced_heap_host_t"
all="traced_t $core $hosts"

# The core.
query "the core has no capability" empty -s $core -c capability,capability2
for t in user_home_t user_home_dir_t; do
        query "the core cannot write $t" empty -s $core -t $t -c file,dir,lnk_file -p write,append,create,add_name
done
query "the core cannot read or write tracefs" empty -s $core -t tracefs_t
query "the core cannot open perf events" empty -s $core -c perf_event
query "the core cannot use BPF" empty -s $core -c bpf
query "the core cannot write /var/cache/traced" empty -s $core -t traced_cache_t -c file,dir -p write,append,create,add_name
# Every file type the core may write, and nothing else.
written=$("$SESEARCH" -A -s $core -c file -p write,append,create "$policy" | awk '{print $3}' | sed 's/:.*//' | sort -u | tr '\n' ' ')
expected="tmpfs_t traced_core_t traced_trace_t "
if [ "$written" != "$expected" ]; then
        echo "FAIL: the core writes files of types: $written(expected: $expected)"; fail=1
else
        echo "ok: the core writes only files of $written"
fi

# tracefs.
for d in $all; do
        case $d in
        traced_ftrace_host_t) query "$d writes tracefs" nonempty -s $d -t tracefs_t -c file -p write ;;
        *) query "$d cannot write tracefs" empty -s $d -t tracefs_t -c file,dir -p write,append,create,add_name ;;
        esac
done

# perf events and BPF.
for d in $all; do
        case $d in
        traced_perf_host_t | traced_bpf_host_t)
                query "$d opens perf events" nonempty -s $d -c perf_event -p open
                query "$d has CAP_PERFMON" nonempty -s $d -c capability2 -p perfmon ;;
        *)
                query "$d cannot open perf events" empty -s $d -c perf_event
                query "$d has no CAP_PERFMON" empty -s $d -c capability2 -p perfmon ;;
        esac
        case $d in
        traced_bpf_host_t | traced_perf_host_t)
                query "$d loads BPF" nonempty -s $d -c bpf -p prog_load
                query "$d has CAP_BPF" nonempty -s $d -c capability2 -p bpf
                [ "$d" != traced_bpf_host_t ] ||
                        query "$d keeps its unwind tables in /var/cache/traced" nonempty -s $d -t traced_cache_t -c file -p create,write ;;
        *)
                query "$d cannot use BPF" empty -s $d -c bpf
                query "$d has no CAP_BPF" empty -s $d -c capability2 -p bpf
                case $d in
                traced_t)
                        query "$d makes the hosts' directories in /var/cache/traced" nonempty -s $d -t traced_cache_t -c dir -p create,add_name
                        query "$d writes no file in /var/cache/traced" empty -s $d -t traced_cache_t -c file -p write,append,create ;;
                *) query "$d cannot write /var/cache/traced" empty -s $d -t traced_cache_t -c file,dir -p write,append,create,add_name ;;
                esac ;;
        esac
        case $d in
        traced_ftrace_host_t) ;;
        *) query "$d has no CAP_SYS_ADMIN" empty -s $d -c capability -p sys_admin ;;
        esac
done

# process_vm_readv(2) (CPython's frames and code objects): the two
# profilers' hosts only.
for d in $all; do
        case $d in
        traced_perf_host_t | traced_bpf_host_t)
                query "$d reads the memory of the processes it samples" nonempty -s $d -c process -p ptrace ;;
        *) query "$d cannot ptrace" empty -s $d -c process -p ptrace ;;
        esac
done

# linux.inode_file_map: the ftrace host lists directories of any owner
# but reads no file of theirs.
# It runs as the traced-plugin user, which owns neither tracefs nor its
# state: CAP_DAC_OVERRIDE, with this policy's types the bound.
query "traced_ftrace_host_t has CAP_DAC_OVERRIDE" nonempty -s traced_ftrace_host_t -c capability -p dac_override
query "traced_ftrace_host_t lists any directory" nonempty -s traced_ftrace_host_t -t etc_t -c dir -p read
query "traced_ftrace_host_t reads no file it lists" empty -s traced_ftrace_host_t -t etc_t -c file -p read
query "traced_ftrace_host_t reads no shadow file" empty -s traced_ftrace_host_t -t shadow_t -c file -p read

# The journal: only the journald host reads it, and it holds no capability
# but CAP_DAC_READ_SEARCH (the journal is root's, the host runs as the
# traced-plugin user).
for d in $all; do
        case $d in
        traced_journald_host_t)
                query "$d reads the journal" nonempty -s $d -t systemd_journal_t -c file -p read
                query "$d watches the journal's directories" nonempty -s $d -t systemd_journal_t -c dir -p watch
                query "$d writes no journal file" empty -s $d -t systemd_journal_t -c file,dir -p write,append,create
                query "$d has CAP_DAC_READ_SEARCH" nonempty -s $d -c capability -p dac_read_search
                query "$d reads no shadow file" empty -s $d -t shadow_t -c file -p read
                query "$d has no other capability" empty -s $d -c capability,capability2 -p dac_override,sys_admin,sys_ptrace,syslog,perfmon,bpf ;;
        *) query "$d cannot read the journal" empty -s $d -t systemd_journal_t -c file -p read ;;
        esac
done
# The sysstats host reads counters: no capability but the setpcap every
# host has (to drop its bounding set), no process's /proc entries.
query "traced_sysstats_host_t holds no capability but setpcap" empty -s traced_sysstats_host_t -c capability \
        -p chown,dac_override,dac_read_search,fowner,kill,setuid,setgid,sys_ptrace,sys_admin,sys_resource,ipc_lock
query "traced_sysstats_host_t has no capability2" empty -s traced_sysstats_host_t -c capability2
query "traced_sysstats_host_t reads /proc counters" nonempty -s traced_sysstats_host_t -t proc_t -c file -p read
query "traced_sysstats_host_t reads sysfs" nonempty -s traced_sysstats_host_t -t sysfs_t -c file -p read

# The heap host: its state page and socket, the profiled processes' maps
# and binaries (sys_ptrace, dac_read_search), never their memory (above:
# no ptrace), no other capability.
query "traced_heap_host_t makes its socket in /run/traced-heap" nonempty -s traced_heap_host_t -t traced_heap_sock_t \
        -c sock_file -p create
query "traced_heap_host_t writes its state page" nonempty -s traced_heap_host_t -t traced_heap_runtime_t -c file -p write
query "traced_heap_host_t has CAP_SYS_PTRACE" nonempty -s traced_heap_host_t -c capability -p sys_ptrace
query "traced_heap_host_t has no other capability" empty -s traced_heap_host_t -c capability \
        -p chown,dac_override,fowner,kill,setuid,setgid,sys_admin,sys_resource,ipc_lock
query "traced_heap_host_t has no capability2" empty -s traced_heap_host_t -c capability2
query "any process may connect to the heap socket" nonempty -t traced_heap_sock_t -c sock_file -p write

# Other domains reach traced through the interfaces only: the producer and
# consumer sockets are distinct types.
query "the producer socket has its type" nonempty -t traced_producer_sock_t -c sock_file -s traced_t
exit $fail
