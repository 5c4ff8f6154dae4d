#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# Summarises a test run: summarize-tests.sh [BUILDDIR...] (default: the current directory).
#
# Reads every GoogleTest XML report in BUILDDIR/test-results/*.xml and automake's BUILDDIR/tests/**/*.trs, for
# each BUILDDIR given (CI passes its plain, sanitizer and fuzz build directories); the counts are summed and
# failed tests are named with their build directory when there are several.
# Prints one line per failed test case, then, last, exactly one line "N passed, N failed" (with
# ", N skipped" appended when some were skipped). Counting:
#   - every gtest test case counts once (passed, failed, or skipped/disabled);
#   - an automake test with no XML report counts once by its .trs result: a crash or hang before the
#     report was written is 1 failed, a passing shell check is 1 passed;
#   - an automake test that failed although its report shows no failed case (a crash at exit, a failure on
#     another rank) adds 1 failed.
# The XML report of an automake test is the path its log names on a line "VCCL_TEST_XML: PATH" (written by
# tests/mpi/run-mpi-test.sh), else test-results/<test name without extension>.xml.
# Exit status: 1 when anything failed, else 0.
set -u
[ $# -gt 0 ] || set -- .

passed=0
failed=0
skipped=0

# Parses one gtest XML report: prints "PASS|FAIL|SKIP suite.name" per test case.
parse_xml() {
    awk '
        function attr(line, key,    re, s) {
            re = " " key "=\"[^\"]*\""
            if (match(line, re)) { s = substr(line, RSTART + length(key) + 3, RLENGTH - length(key) - 4); return s }
            return ""
        }
        function finish() {
            if (!open) return
            if (status == "notrun" || result == "suppressed") verdict = "SKIP"
            else if (fail) verdict = "FAIL"
            else if (skip || result == "skipped") verdict = "SKIP"
            else verdict = "PASS"
            print verdict " " cls "." name
            open = 0
        }
        /<testcase[ >]/ {
            finish()
            open = 1; fail = 0; skip = 0
            name = attr($0, "name"); cls = attr($0, "classname")
            status = attr($0, "status"); result = attr($0, "result")
            if ($0 ~ /\/>[ \t\r]*$/) finish()
            next
        }
        open && /<failure[ >]/ { fail = 1 }
        open && /<error[ >]/ { fail = 1 }
        open && /<skipped[ >\/]/ { skip = 1 }
        open && /<\/testcase>/ { finish() }
        END { finish() }
    ' < <(strip_cdata "$1")
}

# Removes <![CDATA[ ... ]]> sections (failure messages may contain anything, even "<testcase").
strip_cdata() {
    awk '
        {
            line = $0; out = ""
            while (line != "") {
                if (incdata) {
                    i = index(line, "]]>")
                    if (i == 0) { line = ""; break }
                    line = substr(line, i + 3); incdata = 0
                } else {
                    i = index(line, "<![CDATA[")
                    if (i == 0) { out = out line; line = ""; break }
                    out = out substr(line, 1, i - 1); line = substr(line, i + 9); incdata = 1
                }
            }
            print out
        }
    ' "$1"
}

shopt -s nullglob globstar
ndirs=$#
summarize_dir() {
builddir=$1
results=$builddir/test-results
where=""
[ "$ndirs" -gt 1 ] && where="$(basename "$builddir")/"
declare -A xml_failures=()
for xml in "$results"/*.xml; do
    base=$(basename "$xml")
    nfail=0
    while read -r verdict test; do
        case $verdict in
            PASS) passed=$((passed + 1)) ;;
            SKIP) skipped=$((skipped + 1)) ;;
            FAIL)
                failed=$((failed + 1))
                nfail=$((nfail + 1))
                echo "FAILED: $where$test ($base)"
                ;;
        esac
    done < <(parse_xml "$xml")
    xml_failures[$base]=$nfail
done

for trs in "$builddir"/tests/**/*.trs; do
    [ -f "$trs" ] || continue
    test=${trs%.trs}
    rel=${test#"$builddir"/}
    log=$test.log
    res=$(sed -n 's/^:test-result: *//p' "$trs" | awk '
        /^(FAIL|ERROR|XPASS)/ { bad = 1 } /^SKIP/ { skip = 1 } { any = 1 }
        END { if (bad) print "FAIL"; else if (!any) print "FAIL"; else if (skip) print "SKIP"; else print "PASS" }')
    xmlbase=""
    if [ -f "$log" ]; then
        path=$(sed -n 's/^VCCL_TEST_XML: *//p' "$log" | tail -n 1)
        [ -n "$path" ] && xmlbase=$(basename "$path")
    fi
    if [ -z "$xmlbase" ]; then
        name=$(basename "$test")
        xmlbase=${name%.*}.xml
        [ -f "$results/$xmlbase" ] || xmlbase=$name.xml
    fi
    if [ -n "${xml_failures[$xmlbase]+set}" ]; then
        # Its cases were counted from the report; a failed run with no failed case still counts once.
        if [ "$res" = FAIL ] && [ "${xml_failures[$xmlbase]}" -eq 0 ]; then
            failed=$((failed + 1))
            echo "FAILED: $where$rel (exited with failure although no test case failed in $xmlbase; see $rel.log)"
        fi
        continue
    fi
    case $res in
        PASS) passed=$((passed + 1)) ;;
        SKIP) skipped=$((skipped + 1)) ;;
        *)
            failed=$((failed + 1))
            why="no test report: crashed or hung"
            if [ -f "$log" ]; then
                hung=$(grep -m 1 -o 'TIMEOUT: .*' "$log" 2>/dev/null)
                [ -n "$hung" ] && why="$why; $hung"
            fi
            echo "FAILED: $where$rel ($why; see $rel.log)"
            ;;
    esac
done
}

for dir in "$@"; do
    summarize_dir "$dir"
done

line="$passed passed, $failed failed"
[ "$skipped" -gt 0 ] && line="$line, $skipped skipped"
echo "$line"
[ "$failed" -eq 0 ]
