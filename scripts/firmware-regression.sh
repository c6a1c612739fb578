#!/usr/bin/env bash
# Firmware regression on the embedded lab, end to end: a baseline run, an
# upgrade to a firmware that changes nothing (A/A: the gate must pass), an
# upgrade to one with an injected 10 % slowdown (the gate must fail).
# Needs root. Exit 0 when the gate behaved as it should on both.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
db=${FWAB_DB:-$(mktemp -d)/results.db}
spec=examples/firmware-gate.yaml

$fwab lab down >/dev/null 2>&1 || true
$fwab lab up >/dev/null   # firmware profiles: 2.7.2, 2.8.0, 2.8.1 (10 % slower)
lastrun() { $fwab runs list --db "$db" | awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/ && $1 + 0 > id + 0 {id = $1} END {print id}'; }

echo "== baseline on $($fwab fw info --target lab | awk '$1 == "version" {print $2}')"
$fwab sweep "$spec" --db "$db" --progress=false >/dev/null
a=$(lastrun)

echo "== upgrade to 2.8.0 (no injected change)"
$fwab fw upgrade --target lab
$fwab sweep "$spec" --db "$db" --progress=false >/dev/null
b=$(lastrun)

echo "== upgrade to 2.8.1 (10 % slower)"
$fwab fw upgrade --target lab
$fwab sweep "$spec" --db "$db" --progress=false >/dev/null
c=$(lastrun)
$fwab lab down >/dev/null

status=0
echo "== compare $a $b: same data plane, the gate must pass"
if $fwab compare "$a" "$b" --db "$db" --fail-on-regression 3%; then echo "gate passed, as it should"; else echo "gate FAILED on an A/A pair"; status=1; fi
echo "== compare $b $c: 10 % slowdown, the gate must fail"
if $fwab compare "$b" "$c" --db "$db" --fail-on-regression 3% --junit "${db%/*}/junit.xml"; then echo "gate PASSED a 10 % regression"; status=1; else echo "gate failed, as it should (JUnit: ${db%/*}/junit.xml)"; fi
exit $status
