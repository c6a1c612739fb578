#!/usr/bin/env bash
# The demo: what fwab does, end to end, on this machine. Until the sweep
# lands it edits, lints and compares a pfSense config offline.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=./bin/fwab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

cp fixtures/configs/pfsense-2.7.xml "$work/config.xml"
step "fwab config show: what the config says"
$fwab config show "$work/config.xml"

step "fwab config set: inline IPS on LAN, 1000 generated rules, checksum offload off"
$fwab config set "$work/config.xml" ids@lan=ips-inline rules@lan=1000 offload.checksum=off -o "$work/ips.xml"

step "fwab config diff: the knobs that changed, then the elements"
$fwab config diff "$work/config.xml" "$work/ips.xml" | head -n 20

step "fwab config lint: inline IPS with LRO turned back on is refused"
$fwab config set "$work/ips.xml" offload.lro=on -o "$work/unsafe.xml"
$fwab config lint "$work/unsafe.xml" || echo "(exit $?: lint found errors, as it should)"

step "3DES on pfSense 2.7 is refused before anything is written"
$fwab config set "$work/config.xml" ipsec@site-b=3des-sha1 -o "$work/3des.xml" || echo "(exit $?)"
