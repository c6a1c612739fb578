#!/usr/bin/env bash
# Blackout per service action on the embedded lab: one short sweep per
# action kind (filter reload, interface reconfigure, IDS restart, IPsec
# restart, reboot), each with a 2,000 datagrams/s blackout stream and 4
# held TCP connections, printing the report's "Blackout per change" table.
# Needs root; about 5 minutes. REPEATS=N (default 3) applies per value.
set -euo pipefail
cd "$(dirname "$0")/.."
fwab=$PWD/bin/fwab
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
[[ $(id -u) -eq 0 ]] || { echo "bench/blackout.sh: the lab needs root" >&2; exit 1; }
repeats=${REPEATS:-3}

$fwab lab up >/dev/null
# sweep NAME AXIS-LINE [EXTRA-YAML]: one axis of two values.
sweep() {
	local name=$1 axis=$2 extra=${3:-}
	cat >"$work/$name.yaml" <<SPEC
name: blackout-$name
target: lab
axes:
  $axis
probes:
  - {name: up, direction: up, duration: 1s}
repeats: $repeats
order: as-written
idle: 0s
drift_check: false
settle: {timeout: 120s, pause: 0s}
blackout: {rate: 2000}
$extra
SPEC
	$fwab sweep "$work/$name.yaml" --target lab --db "$work/$name.db" --progress=false >"$work/$name.out" 2>"$work/$name.err" ||
		{ echo "bench/blackout.sh: sweep $name failed:" >&2; tail -n 5 "$work/$name.err" >&2; return 1; }
	$fwab report 1 --db "$work/$name.db" | awk '/^## Blackout per change/ {on = 1; next} on && /^\| (change|---)/ {next} on && /^\|/ {print} on && /^## / {on = 0}'
}
printf '| change | applies | blocked ms (median) | blocked ms (max) | longest gap ms | TCP survived |\n| --- | ---: | ---: | ---: | ---: | ---: |\n'
sweep filter 'rules@lan: [0, 1000]'
sweep offload 'offload.tso: [on, off]'
sweep ids 'ids@lan: [off, ips-inline]' 'fixed: {offload.checksum: off, offload.tso: off, offload.lro: off}'
sweep ipsec 'ipsec@fwab: [aes128gcm16, aes256-sha256]' "$(sed -n '/^tunnel:/,$p' examples/ipsec-accelerator.yaml)"
sweep reboot 'crypto.hardware: [none, aesni]'
