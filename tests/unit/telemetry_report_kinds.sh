#!/bin/sh
# SPDX-License-Identifier: BSD-3-Clause
# vccl-telemetry report compares host-transport links (paths 0 and 1, here 0.1-1 GB/s) with each other only, not
# with device-path links (path 2, GPUs of one host, here 10-100 GB/s), and never flags a device-path link (its
# bandwidth is a lower bound: records end when the host polls). Synthetic records: only the host link at 0.1 GB/s
# is slow; with one median over both kinds every host link would be flagged. Then: a job with only two timed
# collectives gets a note that lateness rests on few of them (sampling), point-to-point records alone do not.
builddir=${top_builddir:-.}
tool=$builddir/vccl-telemetry
[ -x "$tool" ] || { echo "FAIL: $tool not built"; exit 1; }
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
f=$dir/vccl-kinds-0000000000000001-0.jsonl
echo '{"type":"meta","comm":"kinds","rank":0,"nranks":5}' > "$f"
# link PEER PATH NS_PER_MB: five 1 MB transfers back to back, each taking NS_PER_MB.
link() {
    i=0
    t=0
    while [ $i -lt 5 ]; do
        d=$((t + $3))
        echo "{\"type\":\"xfer\",\"rank\":0,\"peer\":$1,\"path\":$2,\"dir\":\"send\",\"bytes\":1000000,\"post_ns\":$t,\"done_ns\":$d,\"coll\":\"p2p\",\"seq\":0,\"status\":0,\"window_bw\":0,\"outstanding\":0}" >> "$f"
        t=$d
        i=$((i + 1))
    done
}
link 1 0 1000000   # 1 GB/s
link 2 0 1000000   # 1 GB/s
link 3 0 10000000  # 0.1 GB/s: slow for the host transport
link 1 2 10000     # 100 GB/s
link 2 2 10000     # 100 GB/s
link 3 2 11111     # 90 GB/s
link 4 2 100000    # 10 GB/s: low, but a device-path figure is a lower bound
out=$("$tool" report --fraction 0.5 --json "$f") || { echo "FAIL: report exited non-zero: $out"; exit 1; }
slow=$(echo "$out" | grep -o '"slow":true' | wc -l)
[ "$slow" -eq 1 ] || { echo "FAIL: $slow slow links, want 1: $out"; exit 1; }
echo "$out" | grep -q '"peer":3,"path":0,"dir":"send".*"slow":true' || { echo "FAIL: rank 0 -> 3 (path 0) not the slow one: $out"; exit 1; }
echo "$out" | grep -q '"median_bw_device":950004' || { echo "FAIL: device median: $out"; exit 1; }
text=$("$tool" report --fraction 0.5 "$f")
echo "$text" | grep -q "slow link: rank 0 -> rank 3 (path 0)" || { echo "FAIL: text report: $text"; exit 1; }
echo "$text" | grep -q "device-path links (path 2, median 95.000 GB/s) are lower bounds" || { echo "FAIL: text header: $text"; exit 1; }
echo "$text" | grep -q "timed collective(s)" && { echo "FAIL: a note on sampled collectives for point-to-point records: $text"; exit 1; }
# Two timed collectives (0 and 64: sampled, one in 64): the report says that lateness rests on few of them.
g=$dir/vccl-few-0000000000000002-0.jsonl
echo '{"type":"meta","comm":"few","rank":0,"nranks":2}' > "$g"
for seq in 0 64; do
    echo "{\"type\":\"xfer\",\"rank\":0,\"peer\":1,\"path\":0,\"dir\":\"send\",\"bytes\":1000000,\"post_ns\":$((seq * 1000000)),\"done_ns\":$((seq * 1000000 + 900000)),\"coll\":\"allreduce\",\"seq\":$seq,\"status\":0,\"window_bw\":0,\"outstanding\":0}" >> "$g"
done
text=$("$tool" report "$g")
echo "$text" | grep -q "note: at most 2 timed collective(s) per rank, too few to judge lateness; unless the job ran with VCCL_TELEMETRY_SAMPLE=1" || { echo "FAIL: no note on few timed collectives: $text"; exit 1; }
echo "PASS: report compares host-transport links among themselves and flags no device-path link; notes few timed collectives"
