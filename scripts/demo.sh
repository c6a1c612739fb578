#!/usr/bin/env bash
# The main job, end to end on this machine: build the embedded lab (an
# emulated pfSense between two network namespaces), sweep the T730 review's
# matrix through it, print the table and write the HTML report.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
db=${FWAB_DEMO_DB:-$PWD/fwab-demo.db}
spec=${FWAB_DEMO_SPEC:-examples/t730-packages.yaml}
# The T730: 1 GbE ports and the services on one GX-424CC core's worth of
# this machine, calibrated at lab up (lab/README.md, "Appliance profiles");
# FWAB_DEMO_PROFILE=unlimited for the lab without limits.
profile=${FWAB_DEMO_PROFILE:-t730}

step() { printf '\n== %s\n' "$*"; }

if [[ $(id -u) -ne 0 ]]; then
	echo "demo: the lab builds network namespaces and needs root: run 'sudo make demo'" >&2
	exit 1
fi

step "fwab lab up --profile $profile: namespaces fwab-lan, fwab-dut, fwab-peer, fwab-wan; an emulated pfSense on 127.0.0.1"
$fwab lab up --profile "$profile"
$fwab lab status | grep '^profile:'
$fwab fw info --target lab

step "fwab sweep $spec --dry-run: the plan"
$fwab sweep "$spec" --target lab --dry-run | tail -n 12

step "fwab sweep $spec: apply, verify, settle and probe every point; results in $db"
$fwab sweep "$spec" --target lab --db "$db"
run=$($fwab runs list --db "$db" | awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/ && $1 + 0 > id + 0 {id = $1} END {print id}')

report=$PWD/fwab-report-$run.html
$fwab report "$run" --db "$db" --format html -o "$report"

step "fwab lab down"
$fwab lab down
printf '\nThe HTML report (self-contained, charts inline): %s\n' "$report"
