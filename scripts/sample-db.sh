#!/usr/bin/env bash
# Regenerates examples/sample-results.db, the results database a new user
# tries `fwab report`, `compare` and `trend` on without a firewall: four
# nights of examples/sample-nightly.yaml on a lab of its own (1g-small
# profile), with the lab's firmware upgrades between them:
#
#   run 1  2.7.2-RELEASE
#          fw upgrade → 2.8.0-RELEASE (no change in the data plane)
#   run 2  2.8.0-RELEASE
#          fw upgrade → 2.8.1-RELEASE (10 % slower on every configuration)
#   run 3  2.8.1-RELEASE
#   run 4  2.8.1-RELEASE
#
# The new file replaces the old one only when the runs show what the README
# promises: compare 1 2 and compare 3 4 pass the gate, compare 2 3 fails it,
# trend finds the change at run 3. Needs root; about 7 minutes.
#   sudo make sample-db                 (or scripts/sample-db.sh [OUT], default examples/sample-results.db)
# The lab's namespaces are fwsd-* (FWAB_SAMPLE_PREFIX names others); only
# 198.18.0.0/15, in namespaces it creates and removes.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
spec=examples/sample-nightly.yaml
out=${1:-examples/sample-results.db}
prefix=${FWAB_SAMPLE_PREFIX:-fwsd}

if [[ $(id -u) -ne 0 ]]; then
	echo "sample-db: the lab builds network namespaces and needs root: run 'sudo make sample-db'" >&2
	exit 1
fi
if [[ ! -x $fwab ]]; then
	echo "sample-db: $fwab is missing: run 'make build' first (make sample-db does)" >&2
	exit 1
fi
if ! command -v sqlite3 >/dev/null; then
	echo "sample-db: sqlite3 is needed to compact the database (apt-get install sqlite3)" >&2
	exit 1
fi

# Everything the run writes (lab folder, targets file, journal, database)
# lives in a folder of its own, removed at the end.
W=$(mktemp -d)
export XDG_STATE_HOME=$W/state XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data
lab=(--prefix "$prefix" --dir "$W/lab" --targets "$W/targets.yaml")
tflags=(--target lab --targets "$W/targets.yaml")
db=$W/results.db
start=$SECONDS

# The lab's own firmware profiles, but 2.8.1's 10 % as a fixed cap at 90 %
# of the 1g-small link's 941.5 Mbit/s goodput: on 1g-small every point runs
# at the link's rate, so it is the default profile's tracking slowdown
# without the 9 s re-measurement after every change of the data plane.
cat >"$W/firmware.yaml" <<'END'
profiles:
  - {version: 2.7.2-RELEASE, freebsd: 14.0-CURRENT}
  - {version: 2.8.0-RELEASE, freebsd: 15.0-CURRENT}
  - {version: 2.8.1-RELEASE, freebsd: 15.0-CURRENT, slowdown: {percent: 10, baseline_mbit: 941.5}}
END

$fwab lab down "${lab[@]}" >/dev/null 2>&1 || true
trap '$fwab lab down "${lab[@]}" >/dev/null || echo "sample-db: lab down failed: run fwab lab down ${lab[*]}" >&2; rm -rf "$W"' EXIT
$fwab lab up "${lab[@]}" --profile 1g-small --firmware-profiles "$W/firmware.yaml" >/dev/null

version() { $fwab fw info "${tflags[@]}" | awk '$1 == "version" {print $2}'; }
night() {
	echo "== run $1 on $(version) ($(uptime | sed 's/.*load average: /load /'), $((SECONDS - start)) s)"
	$fwab sweep "$spec" "${tflags[@]}" --db "$db" --progress=false >/dev/null
}

# --log-level error: the reboot's SSH reconnects are expected.
upgrade() { $fwab fw upgrade "${tflags[@]}" --log-level error >/dev/null; }

night 1
upgrade
night 2
upgrade
night 3
night 4
echo "== sweeps done ($((SECONDS - start)) s)"

# The file is shipped only when it shows what README.md says it shows, as
# cmd/fwab/sample_db_test.go checks it: expect CODE CHECK WHAT ARGS... runs
# fwab ARGS on the new database; its exit status must be CODE and the awk
# program CHECK must exit 0 on its output.
status=0
expect() {
	local want=$1 check=$2 what=$3 got=0
	shift 3
	$fwab "$@" --db "$db" >"$W/out.txt" 2>&1 || got=$?
	if [[ $got -ne $want ]] || ! awk "$check" "$W/out.txt"; then
		echo "sample-db: $what: 'fwab $*' exited $got (want $want), or its output is not what README.md says:" >&2
		cat "$W/out.txt" >&2
		status=1
	fi
}
none='/REGRESSION/ {bad = 1} /^no regression$/ {ok = 1} END {exit !(ok && !bad)}'
# Every throughput row (up and down at both points) a regression.
every='/^Mbit\/s/ {t = 1; next} t && NF == 0 {t = 0} t && ($1 == "up" || $1 == "down") {n++; if ($NF == "REGRESSION") r++} END {exit !(n == 4 && r == 4)}'
# A change per point and probe, each at run 3 on 2.8.1.
at3='$1 ~ /^nat\.outbound=/ {n++; if ($3 == "3" && $5 == "2.8.1-RELEASE") k++} END {exit !(n == 4 && k == 4)}'
expect 0 "$none" "an upgrade that changes nothing (2.7.2 → 2.8.0)" compare 1 2
expect 1 "$every" "the 10 % slowdown (2.8.0 → 2.8.1)" compare 2 3
expect 0 "$none" "two runs on one firmware (2.8.1)" compare 3 4
expect 1 "$at3" "the change at run 3" trend "$spec" --testbed lab --window 2
if [[ $status -ne 0 ]]; then
	echo "sample-db: the runs do not show what the README says (a busy machine?); $out is unchanged: run again" >&2
	exit 1
fi

# One file, no WAL beside it, free pages dropped: readers open it read-only.
sqlite3 "$db" 'PRAGMA journal_mode=DELETE; VACUUM;' >/dev/null
cp "$db" "$out.new"
mv "$out.new" "$out"
echo "== $out: $(stat -c %s "$out") bytes, runs 1-4 ($((SECONDS - start)) s)"
