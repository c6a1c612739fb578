#!/usr/bin/env bash
# Sweep overhead on the embedded lab: wall time minus the time needed for
# probes, applies and settling, as fwab sweep accounts for it. Needs root.
# Goal: at most 3 % of wall time; service actions equal to the plan's.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ $(id -u) -eq 0 ]] || { echo "bench/sweep.sh: the lab needs root" >&2; exit 1; }

$fwab lab up >/dev/null
$fwab sweep bench/sweep-overhead.yaml --target lab --seed 7 --dry-run | tail -n 1
$fwab sweep bench/sweep-overhead.yaml --target lab --seed 7 --db "$work/results.db" --progress=false 2>"$work/stderr" >"$work/stdout"
grep '^time: ' "$work/stderr"
cat "$work/stdout"
