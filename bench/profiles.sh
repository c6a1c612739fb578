#!/usr/bin/env bash
# The T730 example (examples/t730-packages.yaml: defaults, +pfBlockerNG,
# +IDS, +inline IPS; up and down; its repeats) on each lab profile in turn,
# one lab per profile, then each run's report: the medians with their 95 %
# intervals and each point's change against the defaults. Needs root and
# bin/fwab. Takes about 10 minutes per profile.
#
# Usage: bench/profiles.sh [PROFILE...]   (default: t730 1g-small unlimited)
# The lab's prefix, folder and targets file come from FWAB_LAB_PREFIX,
# FWAB_LAB_DIR and FWAB_TARGETS (scripts/lab-env.sh); the database and the
# reports go to FWAB_WORK (default: a new temporary folder).
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
spec=${FWAB_SPEC:-examples/t730-packages.yaml}
[[ $(id -u) -eq 0 ]] || { echo "bench/profiles.sh: the lab needs root" >&2; exit 1; }
profiles=("$@")
if ((${#profiles[@]} == 0)); then profiles=(t730 1g-small unlimited); fi
work=${FWAB_WORK:-$(mktemp -d)}
mkdir -p "$work"
db=$work/results.db
. scripts/lab-env.sh
trap '$fwab lab down "${labflags[@]}" >/dev/null 2>&1 || true' EXIT

for p in "${profiles[@]}"; do
	$fwab lab down "${labflags[@]}" >/dev/null 2>&1 || true
	$fwab lab up "${labflags[@]}" --profile "$p" >/dev/null
	echo "== profile $p: $(load)"
	$fwab sweep "$spec" "${tflags[@]}" --db "$db" --progress=false >"$work/$p.sweep" 2>"$work/$p.stderr"
	run=$(lastrun)
	echo "== profile $p: run $run done, $(load)"
	$fwab report "$run" --db "$db" | tee "$work/$p.md"
	$fwab lab down "${labflags[@]}" >/dev/null
done
echo "database and reports in $work"
