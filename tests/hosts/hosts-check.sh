# SPDX-License-Identifier: BSD-3-Clause
# tests/hosts/hosts-check.sh LAYOUT - sourced by the hosts-*.sh tests: builds the emulated hosts of LAYOUT
# ("2 2": two hosts of two ranks), runs every collective checked (hosts_worker) and judges the result:
# every rank reported, no wrong element, no error, the host names are the emulated ones, and where two levels
# apply (equal ranks per host, more than one) the rails of every host carried comparable traffic (the least at
# least half the most). Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/hosts-common.sh"
vh_setup "$1"
start=$(date +%s%N)
vh_run
rc=$?
sed 's/^/  | /' "$VH_OUT"
fail=0
n=$(vh_nranks)
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun exit $rc (124/137: hung past the limit)"; fail=1; }
vh_judge_ranks 100 || fail=1
even=1
for g in "${VH_LAYOUT[@]}"; do [ "$g" -eq "${VH_LAYOUT[0]}" ] || even=0; done
for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
    line="hosts test: host $h rails:"
    min= max=0
    for g in $(seq 0 $((VH_LAYOUT[h] - 1))); do
        tx=$(vh_rail_tx "$h" "$g")
        tx=${tx:-0}
        line+=" rail$g $tx B"
        [ -z "$min" ] || [ "$tx" -lt "$min" ] && min=$tx
        [ "$tx" -gt "$max" ] && max=$tx
    done
    echo "$line"
    # Two levels spread the inter-host bytes evenly over the rails; a flat ring puts most on one rail per host.
    if [ "$even" = 1 ] && [ "${VH_LAYOUT[0]}" -gt 1 ] && { [ "$max" -lt 1000000 ] || [ $((2 * min)) -lt "$max" ]; }; then
        echo "FAIL: host $h's rails sent $min to $max bytes: the two-level algorithms did not share the rails evenly"
        fail=1
    fi
done
echo "hosts test: layout '$1' ($n ranks, rails at $VH_RATE) took $((($(date +%s%N) - start) / 1000000)) ms"
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
