#!/usr/bin/env bash
# Firmware regression on the embedded lab, end to end: a baseline run, an
# upgrade to a firmware that changes nothing (A/A: the gate must pass), an
# upgrade to one with an injected 10 % slowdown (the gate must fail).
# Needs root. Exit 0 when the gate behaved as it should on both.
# The lab's prefix, folder and targets file come from FWAB_LAB_PREFIX,
# FWAB_LAB_DIR and FWAB_TARGETS (scripts/lab-env.sh); the database from FWAB_DB;
# the matrix from FWAB_SPEC (default examples/firmware-gate.yaml).
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
db=${FWAB_DB:-$(mktemp -d)/results.db}
spec=${FWAB_SPEC:-examples/firmware-gate.yaml}
# The 1 GbE appliance profile unless FWAB_LAB_PROFILE names another: there
# the link sets each point's rate and a 10 % slowdown is gated on every
# point; on unlimited every sample measures this machine's free CPU and
# moves 12-25 % between probes (lab/README.md, "Firmware gate on the lab";
# BENCHMARKS.md, "The firmware gate's two designs, 10 trials each").
export FWAB_LAB_PROFILE=${FWAB_LAB_PROFILE:-1g-small}
. scripts/lab-env.sh

$fwab lab down "${labflags[@]}" >/dev/null 2>&1 || true
$fwab lab up "${labflags[@]}" "${upflags[@]}" >/dev/null   # firmware profiles: 2.7.2, 2.8.0, 2.8.1 (10 % slower)
trap '$fwab lab down "${labflags[@]}" >/dev/null' EXIT

echo "== baseline on $($fwab fw info "${tflags[@]}" | awk '$1 == "version" {print $2}') ($(load))"
$fwab sweep "$spec" "${tflags[@]}" --db "$db" --progress=false >/dev/null
a=$(lastrun)

echo "== upgrade to 2.8.0 (no injected change)"
$fwab fw upgrade "${tflags[@]}"
$fwab sweep "$spec" "${tflags[@]}" --db "$db" --progress=false >/dev/null
b=$(lastrun)

echo "== upgrade to 2.8.1 (10 % slower on every point; $(load))"
$fwab fw upgrade "${tflags[@]}"
$fwab sweep "$spec" "${tflags[@]}" --db "$db" --progress=false >/dev/null
c=$(lastrun)
echo "== done ($(load))"

status=0
echo "== compare $a $b: same data plane, the gate must pass"
if $fwab compare "$a" "$b" --db "$db" --fail-on-regression 3%; then echo "gate passed, as it should"; else echo "gate FAILED on an A/A pair"; status=1; fi
echo "== compare $b $c: 10 % slowdown, the gate must fail"
if $fwab compare "$b" "$c" --db "$db" --fail-on-regression 3% --junit "${db%/*}/junit.xml"; then echo "gate PASSED a 10 % regression"; status=1; else echo "gate failed, as it should (JUnit: ${db%/*}/junit.xml)"; fi
exit $status
