#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Tests of the launch recipes: contrib/megatron/launch-megatron.sh, contrib/slurm/vccl-bind.sh and
# the two sbatch templates. Each case runs a script with the environment a launcher would give it and checks
# what the launched program sees (a probe that prints its environment and CPU affinity):
#   - launch-megatron.sh under a real mpirun (2 ranks), under a Slurm environment (srun and scontrol are
#     stand-ins on PATH that start the tasks as Slurm would), under torchrun's variables, and its refusals;
#   - vccl-bind.sh on the saved topology of an 8-GPU node (tests/topo/dgx8.xml through vccl-info), its
#     knobs, a local rank beyond the GPUs, a CPU list outside the allowed CPUs, and a failing vccl-info;
#   - sbatch-srun.sh and sbatch-mpirun.sh end to end, chained with launch-megatron.sh.
# Writes a gtest-style report with one case each (test-results/test-launch-scripts.xml under make check).
# Needs bash and python3 (vccl-bind.sh reads vccl-info's JSON with it); the mpirun cases skip without mpirun.
set -u

# What a launcher or the shell running this test may have set would leak into the cases: start from none of it.
unset RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT CUDA_DEVICE_MAX_CONNECTIONS \
    CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER LD_PRELOAD
for v in $(compgen -e | grep -E '^(VCCL_|OMPI_|PMIX_|PMI_|SLURM_)' || true); do unset "$v"; done

src=${top_srcdir:-$(cd "$(dirname "$0")/../.." && pwd)}
build=${top_builddir:-$src/build}
info=$build/vccl-info
# make check exports MPIRUN as the path of mpirun alone; the project's fixed flags follow it. Every job has a
# hard limit, so that a stuck launch fails the case instead of hanging the suite.
mpirun_cmd="timeout -k 10 120 ${MPIRUN:-mpirun} --allow-run-as-root --oversubscribe --bind-to none --mca pml ob1 --mca btl self,vader"
megatron=$src/contrib/megatron/launch-megatron.sh
bind=$src/contrib/slurm/vccl-bind.sh

command -v python3 >/dev/null 2>&1 || { echo "SKIP: python3 not found (vccl-bind.sh needs it)"; exit 77; }
[ -x "$info" ] || { echo "SKIP: $info not built"; exit 77; }

tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# --- a tiny report writer: one <testcase> per case ---
cases=()
n_fail=0
n_skip=0
current=
reasons=()
xml_escape() { sed -e 's/&/\&amp;/g' -e 's/</\&lt;/g' -e 's/>/\&gt;/g' -e 's/"/\&quot;/g'; }
begin() { current=$1; reasons=(); skip_reason=; }
check() { # check DESCRIPTION ACTUAL EXPECTED
    [ "$2" = "$3" ] || reasons+=("$1: got '$2', expected '$3'")
}
check_match() { # check_match DESCRIPTION ACTUAL EXTENDED-REGEX
    printf '%s' "$2" | grep -Eq -- "$3" || reasons+=("$1: got '$2', expected to match /$3/")
}
skip_case() { skip_reason=$1; }
end() {
    local body
    if [ -n "$skip_reason" ]; then
        echo "SKIP $current: $skip_reason"
        n_skip=$((n_skip + 1))
        cases+=("<testcase name=\"$current\" classname=\"LaunchScripts\"><skipped message=\"$(printf '%s' "$skip_reason" | xml_escape)\"/></testcase>")
    elif [ ${#reasons[@]} -eq 0 ]; then
        echo "PASS $current"
        cases+=("<testcase name=\"$current\" classname=\"LaunchScripts\"/>")
    else
        echo "FAIL $current"
        printf '    %s\n' "${reasons[@]}"
        n_fail=$((n_fail + 1))
        body=$(printf '%s\n' "${reasons[@]}" | xml_escape)
        cases+=("<testcase name=\"$current\" classname=\"LaunchScripts\"><failure message=\"$(printf '%s' "${reasons[0]}" | xml_escape)\">$body</failure></testcase>")
    fi
}

# The probe: what a launched rank sees. One line per variable (unset: <unset>), then its allowed CPUs.
probe=$tmp/probe.sh
cat >"$probe" <<'EOF'
#!/usr/bin/env bash
out=${PROBE_OUT:?}.${RANK:-${SLURM_PROCID:-${OMPI_COMM_WORLD_RANK:-0}}}
{
    for v in RANK WORLD_SIZE LOCAL_RANK LOCAL_WORLD_SIZE MASTER_ADDR MASTER_PORT CUDA_DEVICE_MAX_CONNECTIONS \
        LD_PRELOAD LD_LIBRARY_PATH CUDA_VISIBLE_DEVICES CUDA_DEVICE_ORDER VCCL_NET_DEVICES VCCL_BACKUP_NET_DEVICES \
        VCCL_PROXY_CPUS; do
        if [ -n "${!v+x}" ]; then echo "$v=${!v}"; else echo "$v=<unset>"; fi
    done
    echo "CPUS=$(python3 -c 'import os; print(",".join(str(c) for c in sorted(os.sched_getaffinity(0))))')"
} >"$out"
EOF
chmod +x "$probe"
seen() { # seen FILE VAR: the probe's value of VAR
    sed -n "s/^$2=//p" "$1"
}

# A libvccl-nccl install directory: launch-megatron.sh only needs libnccl.so.2 to exist there; the probe is
# a script, so an empty file preloaded would only make the dynamic linker complain. A real build's library
# is used where there is one (its dependencies resolve from the build tree).
nccl_dir=$tmp/prefix/lib/vccl/nccl
mkdir -p "$nccl_dir"
if [ -e "$build/src/nccl_compat/.libs/libnccl.so.2" ]; then
    ln -s "$build/src/nccl_compat/.libs/libnccl.so.2" "$nccl_dir/libnccl.so.2"
else
    : >"$nccl_dir/libnccl.so.2"
fi
lib_env=(LD_LIBRARY_PATH="$build/.libs${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}")

# Stand-ins for Slurm's commands: scontrol expands a node list of the form prefix[a-b]; srun starts
# --ntasks tasks (default SLURM_NTASKS) one after another with SLURM_PROCID/SLURM_LOCALID set, after
# recording its options.
bin=$tmp/bin
mkdir -p "$bin"
cat >"$bin/scontrol" <<'EOF'
#!/usr/bin/env bash
[ "$1 $2 $3" = "show hostnames" ] || [ "$1 $2" = "show hostnames" ] || exit 1
list=$3
if [[ $list =~ ^([^[]*)\[([0-9]+)-([0-9]+)\]$ ]]; then
    p=${BASH_REMATCH[1]}; a=${BASH_REMATCH[2]}; b=${BASH_REMATCH[3]}
    for ((i = 10#$a; i <= 10#$b; i++)); do printf '%s%0*d\n' "$p" "${#a}" "$i"; done
else
    echo "$list"
fi
EOF
cat >"$bin/srun" <<'EOF'
#!/usr/bin/env bash
echo "srun $*" >>"${SRUN_LOG:?}"
ntasks=${SLURM_NTASKS:-1}
while [ $# -gt 0 ]; do
    case $1 in
        --ntasks=*) ntasks=${1#--ntasks=} ;;
        --*) ;;
        *) break ;;
    esac
    shift
done
rc=0
for ((t = 0; t < ntasks; t++)); do
    SLURM_PROCID=$t SLURM_LOCALID=$t SLURM_NTASKS=$ntasks "$@" || rc=$?
done
exit $rc
EOF
chmod +x "$bin/scontrol" "$bin/srun"

# ---------------------------------------------------------------------------------------------------------
begin MegatronUnderMpirun
if ! command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
    skip_case "mpirun not found"
else
    rm -f "$tmp"/mpi.*
    env "${lib_env[@]}" VCCL_NCCL_DIR="$nccl_dir" PROBE_OUT="$tmp/mpi" \
        $mpirun_cmd -np 2 -x VCCL_NCCL_DIR -x PROBE_OUT "$megatron" "$probe" </dev/null >"$tmp/mpi.log" 2>&1 ||
        reasons+=("mpirun exited with $?: $(tail -n 3 "$tmp/mpi.log")")
    for r in 0 1; do
        f=$tmp/mpi.$r
        [ -s "$f" ] || { reasons+=("rank $r did not run the probe"); continue; }
        check "rank $r RANK" "$(seen "$f" RANK)" "$r"
        check "rank $r WORLD_SIZE" "$(seen "$f" WORLD_SIZE)" 2
        check "rank $r LOCAL_RANK" "$(seen "$f" LOCAL_RANK)" "$r"
        check "rank $r LOCAL_WORLD_SIZE" "$(seen "$f" LOCAL_WORLD_SIZE)" 2
        check "rank $r MASTER_PORT" "$(seen "$f" MASTER_PORT)" 29500
        check "rank $r CUDA_DEVICE_MAX_CONNECTIONS" "$(seen "$f" CUDA_DEVICE_MAX_CONNECTIONS)" 1
        check_match "rank $r LD_LIBRARY_PATH" "$(seen "$f" LD_LIBRARY_PATH)" "^$nccl_dir(:|$)"
        check_match "rank $r LD_PRELOAD" "$(seen "$f" LD_PRELOAD)" "^$nccl_dir/libnccl.so.2(:|$)"
    done
    if [ -s "$tmp/mpi.0" ] && [ -s "$tmp/mpi.1" ]; then
        # The mpirun host's address from OMPI_MCA_orte_hnp_uri (or 127.0.0.1): the same on both ranks.
        a0=$(seen "$tmp/mpi.0" MASTER_ADDR)
        check_match "MASTER_ADDR" "$a0" '^([0-9]{1,3}\.){3}[0-9]{1,3}$'
        check "MASTER_ADDR of rank 1" "$(seen "$tmp/mpi.1" MASTER_ADDR)" "$a0"
    fi
    grep -q "launch-megatron.sh: world=2 master=" "$tmp/mpi.log" || reasons+=("rank 0 did not print its summary line")
fi
end

begin MegatronUnderSlurm
rm -f "$tmp"/slurm.*
env -u OMPI_COMM_WORLD_RANK PATH="$bin:$PATH" SLURM_PROCID=5 SLURM_NTASKS=8 SLURM_LOCALID=1 \
    SLURM_NTASKS_PER_NODE='4(x2)' SLURM_JOB_ID=1234 SLURM_JOB_NODELIST='gpu[0007-4000]' VCCL_NCCL_DIR="$nccl_dir" \
    PROBE_OUT="$tmp/slurm" "$megatron" "$probe" 2>"$tmp/slurm.log" || reasons+=("exit $?: $(cat "$tmp/slurm.log")")
f=$tmp/slurm.5
if [ -s "$f" ]; then
    check RANK "$(seen "$f" RANK)" 5
    check WORLD_SIZE "$(seen "$f" WORLD_SIZE)" 8
    check LOCAL_RANK "$(seen "$f" LOCAL_RANK)" 1
    check "LOCAL_WORLD_SIZE from '4(x2)'" "$(seen "$f" LOCAL_WORLD_SIZE)" 4
    check "MASTER_ADDR (first host of a long allocation)" "$(seen "$f" MASTER_ADDR)" gpu0007
    check "MASTER_PORT (29500 + job id mod 1000)" "$(seen "$f" MASTER_PORT)" 29734
else
    reasons+=("the probe did not run")
fi
end

begin MegatronKeepsTorchrunVariables
rm -f "$tmp"/trun.*
env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.9.8.7 \
    MASTER_PORT=6000 CUDA_DEVICE_MAX_CONNECTIONS=8 VCCL_NCCL_DIR="$nccl_dir" VCCL_NCCL_PRELOAD=0 LD_PRELOAD= \
    PROBE_OUT="$tmp/trun" "$megatron" "$probe" 2>"$tmp/trun.log" || reasons+=("exit $?: $(cat "$tmp/trun.log")")
f=$tmp/trun.3
if [ -s "$f" ]; then
    for kv in RANK=3 WORLD_SIZE=4 LOCAL_RANK=1 LOCAL_WORLD_SIZE=2 MASTER_ADDR=10.9.8.7 MASTER_PORT=6000 \
        CUDA_DEVICE_MAX_CONNECTIONS=8; do
        check "${kv%%=*}" "$(seen "$f" "${kv%%=*}")" "${kv#*=}"
    done
    check "LD_PRELOAD with VCCL_NCCL_PRELOAD=0" "$(seen "$f" LD_PRELOAD)" ""
    check_match "LD_LIBRARY_PATH" "$(seen "$f" LD_LIBRARY_PATH)" "^$nccl_dir(:|$)"
else
    reasons+=("the probe did not run")
fi
end

begin MegatronFindsVcclPrefixAndRealNccl
rm -f "$tmp"/pfx.* "$tmp"/real.*
env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u VCCL_NCCL_DIR VCCL_PREFIX="$tmp/prefix" LD_PRELOAD= \
    PROBE_OUT="$tmp/pfx" "$megatron" "$probe" 2>"$tmp/pfx.log" || reasons+=("VCCL_PREFIX: exit $?: $(cat "$tmp/pfx.log")")
if [ -s "$tmp/pfx.0" ]; then
    check_match "LD_PRELOAD from VCCL_PREFIX" "$(seen "$tmp/pfx.0" LD_PRELOAD)" "^$tmp/prefix/lib/vccl/nccl/libnccl.so.2$"
else
    reasons+=("VCCL_PREFIX: the probe did not run")
fi
env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID VCCL_USE_NCCL=yes VCCL_NCCL_DIR=/nonexistent LD_PRELOAD= \
    LD_LIBRARY_PATH=/opt/x PROBE_OUT="$tmp/real" "$megatron" "$probe" 2>"$tmp/real.log" ||
    reasons+=("VCCL_USE_NCCL=1: exit $?: $(cat "$tmp/real.log")")
if [ -s "$tmp/real.0" ]; then
    check "LD_PRELOAD with VCCL_USE_NCCL=1" "$(seen "$tmp/real.0" LD_PRELOAD)" ""
    check "LD_LIBRARY_PATH with VCCL_USE_NCCL=1" "$(seen "$tmp/real.0" LD_LIBRARY_PATH)" /opt/x
    grep -q "nccl=real NCCL" "$tmp/real.log" || reasons+=("no 'nccl=real NCCL' in the summary line")
else
    reasons+=("VCCL_USE_NCCL=1: the probe did not run")
fi
end

begin MegatronRefusesWhatItCannotDo
# No library where it looks: exit 2 and the directory named; no command: usage; Open MPI over several hosts
# without a usable mpirun address: exit 2 asking for MASTER_ADDR; with one, its first address.
env -u OMPI_COMM_WORLD_RANK -u SLURM_PROCID -u VCCL_PREFIX VCCL_NCCL_DIR="$tmp/empty" PATH=/usr/bin:/bin \
    "$megatron" true >/dev/null 2>"$tmp/ref1.log"
check "exit without libnccl.so.2" "$?" 2
grep -q "no libnccl.so.2 of vccl in '$tmp/empty'" "$tmp/ref1.log" || reasons+=("message: $(cat "$tmp/ref1.log")")
"$megatron" >/dev/null 2>"$tmp/ref2.log"
check "exit without a command" "$?" 2
grep -q "usage:" "$tmp/ref2.log" || reasons+=("no usage line: $(cat "$tmp/ref2.log")")
env -u SLURM_PROCID -u OMPI_MCA_orte_hnp_uri -u MASTER_ADDR OMPI_COMM_WORLD_RANK=0 OMPI_COMM_WORLD_SIZE=4 \
    OMPI_COMM_WORLD_LOCAL_SIZE=2 VCCL_USE_NCCL=1 "$megatron" true 2>"$tmp/ref3.log"
check "exit on several hosts without the mpirun address" "$?" 2
grep -q "set MASTER_ADDR" "$tmp/ref3.log" || reasons+=("message: $(cat "$tmp/ref3.log")")
rm -f "$tmp"/uri.*
env -u SLURM_PROCID -u MASTER_ADDR OMPI_COMM_WORLD_RANK=2 OMPI_COMM_WORLD_SIZE=4 OMPI_COMM_WORLD_LOCAL_SIZE=2 \
    OMPI_COMM_WORLD_LOCAL_RANK=0 OMPI_MCA_orte_hnp_uri='1234.0;tcp://10.1.2.3,192.168.0.5:41234' VCCL_USE_NCCL=1 \
    PROBE_OUT="$tmp/uri" "$megatron" "$probe" 2>/dev/null
[ -s "$tmp/uri.2" ] && check "MASTER_ADDR from the mpirun URI" "$(seen "$tmp/uri.2" MASTER_ADDR)" 10.1.2.3 ||
    reasons+=("the probe did not run with an mpirun URI")
end

# ---------------------------------------------------------------------------------------------------------
# vccl-bind.sh on the saved topology of an 8-GPU, 8-NIC node (32 CPUs, GPUs 0-3 on CPUs 0-7,16-23).
topo_json=$tmp/dgx8.json
VCCL_TOPO_FILE="$src/tests/topo/dgx8.xml" "$info" -t --json >"$topo_json" 2>"$tmp/info.log" ||
    echo "vccl-info -t --json failed: $(cat "$tmp/info.log")"
allowed=$(python3 -c 'import os; print(",".join(str(c) for c in sorted(os.sched_getaffinity(0))))')
# The allowed CPUs within the CPU list $1 (e.g. 0-7,16-23), or all allowed ones when none is (then vccl-bind.sh
# binds no CPUs).
allowed_within() {
    python3 -c 'import sys
want = set()
for part in sys.argv[2].split(","):
    lo, _, hi = part.partition("-")
    want.update(range(int(lo), int(hi or lo) + 1))
print(",".join(c for c in sys.argv[1].split(",") if int(c) in want) or sys.argv[1])' "$allowed" "$1"
}

begin BindFromSavedTopology
rm -f "$tmp"/bind.*
env -u SLURM_LOCALID -u OMPI_COMM_WORLD_LOCAL_RANK VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_LOCAL_RANK=1 \
    PROBE_OUT="$tmp/bind" RANK=1 "$bind" "$probe" 2>"$tmp/bind.log" || reasons+=("exit $?: $(cat "$tmp/bind.log")")
f=$tmp/bind.1
if [ -s "$f" ]; then
    check CUDA_VISIBLE_DEVICES "$(seen "$f" CUDA_VISIBLE_DEVICES)" 1
    check CUDA_DEVICE_ORDER "$(seen "$f" CUDA_DEVICE_ORDER)" PCI_BUS_ID
    check VCCL_NET_DEVICES "$(seen "$f" VCCL_NET_DEVICES)" mlx5_1:1
    check VCCL_BACKUP_NET_DEVICES "$(seen "$f" VCCL_BACKUP_NET_DEVICES)" mlx5_3:1
    check VCCL_PROXY_CPUS "$(seen "$f" VCCL_PROXY_CPUS)" 0-7,16-23
    # Bound to the GPU's CPUs that this process may use (0-7,16-23 within what it is allowed).
    check "CPU affinity" "$(seen "$f" CPUS)" "$(allowed_within 0-7,16-23)"
else
    reasons+=("the probe did not run")
fi
# On a small machine the set above may be everything allowed, so binding and not binding look alike: GPU 1's
# CPUs made the last allowed CPU alone must bind to exactly it.
last_cpu=${allowed##*,}
if [ "$last_cpu" != "$allowed" ]; then
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); d["topology"]["gpus"][1]["cpulist"] = sys.argv[2]; json.dump(d, open(sys.argv[3], "w"))' \
        "$topo_json" "$last_cpu" "$tmp/one-cpu.json"
    env VCCL_BIND_TOPO_JSON="$tmp/one-cpu.json" VCCL_BIND_LOCAL_RANK=1 PROBE_OUT="$tmp/bind" RANK=2 "$bind" "$probe" 2>/dev/null
    [ -s "$tmp/bind.2" ] && check "CPU affinity to GPU 1's one CPU" "$(seen "$tmp/bind.2" CPUS)" "$last_cpu" ||
        reasons+=("one CPU: the probe did not run")
fi
end

begin BindLocalRankSources
# OMPI_COMM_WORLD_LOCAL_RANK wins over SLURM_LOCALID (mpirun's ranks inside an sbatch job all inherit the batch
# step's SLURM_LOCALID=0), SLURM_LOCALID over LOCAL_RANK, VCCL_BIND_LOCAL_RANK over all.
rm -f "$tmp"/src.*
env VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_CPUS=0 SLURM_LOCALID=0 OMPI_COMM_WORLD_LOCAL_RANK=5 LOCAL_RANK=6 \
    PROBE_OUT="$tmp/src" RANK=0 "$bind" "$probe" 2>/dev/null
[ -s "$tmp/src.0" ] && check "GPU from OMPI_COMM_WORLD_LOCAL_RANK" "$(seen "$tmp/src.0" CUDA_VISIBLE_DEVICES)" 5 ||
    reasons+=("OMPI_COMM_WORLD_LOCAL_RANK: the probe did not run")
env VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_CPUS=0 SLURM_LOCALID=2 LOCAL_RANK=6 \
    PROBE_OUT="$tmp/src" RANK=1 "$bind" "$probe" 2>/dev/null
[ -s "$tmp/src.1" ] && check "GPU from SLURM_LOCALID" "$(seen "$tmp/src.1" CUDA_VISIBLE_DEVICES)" 2 ||
    reasons+=("SLURM_LOCALID: the probe did not run")
env VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_CPUS=0 VCCL_BIND_LOCAL_RANK=7 SLURM_LOCALID=2 \
    PROBE_OUT="$tmp/src" RANK=2 "$bind" "$probe" 2>/dev/null
[ -s "$tmp/src.2" ] && check "GPU from VCCL_BIND_LOCAL_RANK" "$(seen "$tmp/src.2" CUDA_VISIBLE_DEVICES)" 7 ||
    reasons+=("VCCL_BIND_LOCAL_RANK: the probe did not run")
end

begin BindKnobsAndOddCases
rm -f "$tmp"/knob.*
# VCCL_BIND_GPU=0 and VCCL_BIND_NET=0 leave those variables as they were.
env -u CUDA_VISIBLE_DEVICES -u VCCL_NET_DEVICES -u VCCL_BACKUP_NET_DEVICES -u VCCL_PROXY_CPUS \
    VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_LOCAL_RANK=3 VCCL_BIND_GPU=0 VCCL_BIND_NET=0 VCCL_BIND_CPUS=0 \
    PROBE_OUT="$tmp/knob" RANK=0 "$bind" "$probe" 2>/dev/null
if [ -s "$tmp/knob.0" ]; then
    check "CUDA_VISIBLE_DEVICES with VCCL_BIND_GPU=0" "$(seen "$tmp/knob.0" CUDA_VISIBLE_DEVICES)" "<unset>"
    check "VCCL_NET_DEVICES with VCCL_BIND_NET=0" "$(seen "$tmp/knob.0" VCCL_NET_DEVICES)" "<unset>"
    check "CPU affinity with VCCL_BIND_CPUS=0" "$(seen "$tmp/knob.0" CPUS)" "$allowed"
else
    reasons+=("knobs: the probe did not run")
fi
# Local rank 9 of 8 GPUs: wraps to GPU 1 and says so.
env VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_LOCAL_RANK=9 VCCL_BIND_CPUS=0 PROBE_OUT="$tmp/knob" RANK=1 \
    "$bind" "$probe" 2>"$tmp/knob.log"
[ -s "$tmp/knob.1" ] && check "GPU of local rank 9 on 8 GPUs" "$(seen "$tmp/knob.1" CUDA_VISIBLE_DEVICES)" 1 ||
    reasons+=("local rank 9: the probe did not run")
grep -q "local rank 9 but 8 choices" "$tmp/knob.log" || reasons+=("no warning for local rank 9: $(cat "$tmp/knob.log")")
# GPU 4's CPUs (8-15,24-31) may lie outside what this process may use (a Slurm cgroup, this 2-core VM): the
# rank must still start, bound to what it may use.
env VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_LOCAL_RANK=4 PROBE_OUT="$tmp/knob" RANK=2 "$bind" "$probe" \
    2>"$tmp/knob2.log"
check "exit with CPUs outside the allowed set" "$?" 0
if [ -s "$tmp/knob.2" ]; then
    check "CPU affinity for GPU 4" "$(seen "$tmp/knob.2" CPUS)" "$(allowed_within 8-15,24-31)"
    check "GPU 4" "$(seen "$tmp/knob.2" CUDA_VISIBLE_DEVICES)" 4
else
    reasons+=("GPU 4: the probe did not run: $(cat "$tmp/knob2.log")")
fi
# vccl-info that fails: the command still runs, unbound, with a message.
printf '#!/bin/sh\nexit 3\n' >"$bin/bad-info"
chmod +x "$bin/bad-info"
env -u VCCL_BIND_TOPO_JSON -u CUDA_VISIBLE_DEVICES VCCL_INFO_PATH="$bin/bad-info" PROBE_OUT="$tmp/knob" RANK=3 \
    "$bind" "$probe" 2>"$tmp/knob3.log"
check "exit when vccl-info fails" "$?" 0
[ -s "$tmp/knob.3" ] && check "CUDA_VISIBLE_DEVICES when vccl-info fails" "$(seen "$tmp/knob.3" CUDA_VISIBLE_DEVICES)" "<unset>" ||
    reasons+=("failing vccl-info: the probe did not run")
grep -qF "'$bin/bad-info -t --json' failed; running without binding" "$tmp/knob3.log" ||
    reasons+=("no message naming VCCL_INFO_PATH's program: $(cat "$tmp/knob3.log")")
# A saved topology that is not JSON: the command still runs, unbound, with a message.
echo "not json" >"$tmp/bad.json"
env -u CUDA_VISIBLE_DEVICES VCCL_BIND_TOPO_JSON="$tmp/bad.json" PROBE_OUT="$tmp/knob" RANK=4 "$bind" "$probe" \
    2>"$tmp/knob4.log"
check "exit with a saved topology that is not JSON" "$?" 0
[ -s "$tmp/knob.4" ] || reasons+=("bad JSON: the probe did not run: $(cat "$tmp/knob4.log")")
grep -q "cannot read the topology" "$tmp/knob4.log" || reasons+=("bad JSON: no message: $(cat "$tmp/knob4.log")")
# Word switches as vccl takes them: VCCL_BIND_GPU=off leaves CUDA_VISIBLE_DEVICES alone.
env -u CUDA_VISIBLE_DEVICES VCCL_BIND_TOPO_JSON="$topo_json" VCCL_BIND_LOCAL_RANK=2 VCCL_BIND_GPU=off VCCL_BIND_CPUS=no \
    PROBE_OUT="$tmp/knob" RANK=5 "$bind" "$probe" 2>/dev/null
[ -s "$tmp/knob.5" ] && check "CUDA_VISIBLE_DEVICES with VCCL_BIND_GPU=off" "$(seen "$tmp/knob.5" CUDA_VISIBLE_DEVICES)" "<unset>" ||
    reasons+=("VCCL_BIND_GPU=off: the probe did not run")
end

# ---------------------------------------------------------------------------------------------------------
begin SbatchSrunChainedWithMegatron
# The srun template on a (stand-in) Slurm allocation of 1 node and 2 tasks: one vccl-info per node saved in
# VCCL_TOPO_DIR, then each task bound by vccl-bind.sh and started by launch-megatron.sh.
rm -rf "$tmp"/sb.* "$tmp/topo-dir"
: >"$tmp/srun.log"
(cd "$tmp" && env -u OMPI_COMM_WORLD_RANK -u VCCL_BIND_LOCAL_RANK PATH="$bin:$build:$PATH" SRUN_LOG="$tmp/srun.log" \
    SLURM_NTASKS=2 SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NUM_NODES=1 SLURM_JOB_ID=42 SLURM_JOB_NODELIST=node01 \
    VCCL_TOPO_FILE="$src/tests/topo/dgx8.xml" VCCL_TOPO_DIR="$tmp/topo-dir" VCCL_NCCL_DIR="$nccl_dir" \
    VCCL_BIND_CPUS=0 PROBE_OUT="$tmp/sb" timeout -k 10 120 bash "$src/contrib/slurm/sbatch-srun.sh" "$megatron" "$probe") \
    >"$tmp/sb.log" 2>&1 || reasons+=("exit $?: $(tail -n 5 "$tmp/sb.log")")
ls "$tmp/topo-dir"/*.json >/dev/null 2>&1 || reasons+=("no topology saved in VCCL_TOPO_DIR")
check "srun calls" "$(wc -l <"$tmp/srun.log")" 2
grep -q -- "--mpi=pmix" "$tmp/srun.log" || reasons+=("the task launch lacks --mpi=pmix: $(cat "$tmp/srun.log")")
for r in 0 1; do
    f=$tmp/sb.$r
    [ -s "$f" ] || { reasons+=("task $r did not run the probe: $(tail -n 3 "$tmp/sb.log")"); continue; }
    check "task $r RANK" "$(seen "$f" RANK)" "$r"
    check "task $r WORLD_SIZE" "$(seen "$f" WORLD_SIZE)" 2
    check "task $r GPU" "$(seen "$f" CUDA_VISIBLE_DEVICES)" "$r"
    check "task $r NIC" "$(seen "$f" VCCL_NET_DEVICES)" "mlx5_$r:1"
    check "task $r MASTER_ADDR" "$(seen "$f" MASTER_ADDR)" node01
    check "task $r MASTER_PORT" "$(seen "$f" MASTER_PORT)" 29542
done
end

begin SbatchMpirunChainedWithMegatron
if ! command -v "${MPIRUN:-mpirun}" >/dev/null 2>&1; then
    skip_case "mpirun not found"
else
    rm -f "$tmp"/sm.*
    # Inside an sbatch job: the batch step's SLURM_LOCALID=0 and SLURM_PROCID=0 reach every rank mpirun starts.
    (cd "$tmp" && env "${lib_env[@]}" PATH="$(dirname "$(command -v "${MPIRUN:-mpirun}")"):$build:$PATH" \
        SLURM_NTASKS_PER_NODE=2 SLURM_JOB_NUM_NODES=1 SLURM_LOCALID=0 SLURM_PROCID=0 \
        VCCL_TOPO_FILE="$src/tests/topo/dgx8.xml" VCCL_NCCL_DIR="$nccl_dir" VCCL_BIND_CPUS=0 PROBE_OUT="$tmp/sm" \
        MPIRUN_FLAGS="--allow-run-as-root --oversubscribe --mca pml ob1 --mca btl self,vader -x PROBE_OUT" \
        timeout -k 10 120 bash "$src/contrib/slurm/sbatch-mpirun.sh" "$megatron" "$probe") </dev/null >"$tmp/sm.log" 2>&1 ||
        reasons+=("exit $?: $(tail -n 5 "$tmp/sm.log")")
    grep -q "could not find environment variable" "$tmp/sm.log" &&
        reasons+=("mpirun warned about a variable that is not set: $(grep 'could not find' "$tmp/sm.log" | head -n 1)")
    for r in 0 1; do
        f=$tmp/sm.$r
        [ -s "$f" ] || { reasons+=("rank $r did not run the probe: $(tail -n 3 "$tmp/sm.log")"); continue; }
        check "rank $r RANK" "$(seen "$f" RANK)" "$r"
        check "rank $r LOCAL_RANK" "$(seen "$f" LOCAL_RANK)" "$r"
        check "rank $r GPU" "$(seen "$f" CUDA_VISIBLE_DEVICES)" "$r"
        check "rank $r backup NIC" "$(seen "$f" VCCL_BACKUP_NET_DEVICES)" "mlx5_$((r + 2)):1"
    done
fi
end

# ---------------------------------------------------------------------------------------------------------
if [ -n "${top_builddir:-}" ]; then
    mkdir -p "$top_builddir/test-results"
    xml=$top_builddir/test-results/test-launch-scripts.xml
    echo "VCCL_TEST_XML: $xml"
    {
        echo '<?xml version="1.0" encoding="UTF-8"?>'
        echo "<testsuites><testsuite name=\"LaunchScripts\" tests=\"${#cases[@]}\" failures=\"$n_fail\">"
        printf '%s\n' "${cases[@]}"
        echo "</testsuite></testsuites>"
    } >"$xml"
fi
echo "launch scripts: $((${#cases[@]} - n_fail - n_skip)) passed, $n_fail failed, $n_skip skipped"
[ "$n_fail" -eq 0 ]
