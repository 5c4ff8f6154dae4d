# SPDX-License-Identifier: BSD-3-Clause
# tests/hosts/hosts-check.sh LAYOUT - sourced by the hosts-*.sh tests: builds the emulated hosts of LAYOUT
# ("2 2": two hosts of two ranks), runs every collective checked (hosts_worker) and judges the result:
# every rank reported, no wrong element, no error, the host names are the emulated ones, and where two levels
# apply (equal ranks per host, more than one) every rail of every host carried traffic. Exit 0 pass, 1 fail.
. "$(dirname "${BASH_SOURCE[0]}")/hosts-common.sh"
vh_setup "$1"
start=$(date +%s%N)
vh_run
rc=$?
sed 's/^/  | /' "$VH_OUT"
fail=0
n=$(vh_nranks)
[ "$rc" -eq 0 ] || { echo "FAIL: mpirun exit $rc (124/137: hung past the limit)"; fail=1; }
[ "$(grep -c '^HOSTS_CHECK ' "$VH_OUT")" -eq "$n" ] || { echo "FAIL: not every one of $n ranks reported"; fail=1; }
while read -r _ _ rank _ host _ cases _ wrong _ errors _ first; do
    case $host in "${VH_PREFIX}"[0-9]*) ;; *) echo "FAIL: rank $rank runs on host '$host', not an emulated one"; fail=1 ;; esac
    [ "$cases" -gt 100 ] || { echo "FAIL: rank $rank ran only $cases cases"; fail=1; }
    [ "$wrong" -eq 0 ] && [ "$errors" -eq 0 ] || { echo "FAIL: rank $rank: $wrong wrong, $errors errors; first: $first"; fail=1; }
done < <(grep '^HOSTS_CHECK ' "$VH_OUT")
even=1
for g in "${VH_LAYOUT[@]}"; do [ "$g" -eq "${VH_LAYOUT[0]}" ] || even=0; done
for h in $(seq 0 $((${#VH_LAYOUT[@]} - 1))); do
    line="hosts test: host $h rails:"
    for g in $(seq 0 $((VH_LAYOUT[h] - 1))); do
        tx=$(vh_rail_tx "$h" "$g")
        line+=" rail$g ${tx:-0} B"
        if [ "$even" = 1 ] && [ "${VH_LAYOUT[0]}" -gt 1 ] && [ "${tx:-0}" -lt 100000 ]; then
            echo "FAIL: rail $g of host $h sent only ${tx:-0} bytes: the two-level algorithms did not use every rail"
            fail=1
        fi
    done
    echo "$line"
done
echo "hosts test: layout '$1' ($n ranks, rails at $VH_RATE) took $((($(date +%s%N) - start) / 1000000)) ms"
[ "$fail" -eq 0 ] && echo PASS
exit "$fail"
