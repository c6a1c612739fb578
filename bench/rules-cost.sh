#!/usr/bin/env bash
# rules-cost.sh (root): what N filter rules cost on the lab's data plane, per
# packet of one long TCP stream and per new connection, for the orders the
# lab has rendered: "old" (every block rule before the conntrack accept, the
# lab before pf semantics), "pf-before" (pf order: state first, then the
# rules, the generated ones before the LAN pass rule, so every new
# connection walks them) and "pf-after" (state first, the LAN pass rule
# matches first, as with configxml's rules@lan appended after the factory
# pass rule: they are never reached). The rules are shaped as
# BuildRuleset renders rules@lan=N (emu/testdata/ruleset-rules-lan-3.nft).
# Only 198.18.0.0/15, in namespaces fzr-* this script creates and deletes.
#
#   sudo ./bench/rules-cost.sh [N] [ROUNDS]
set -euo pipefail
N=${1:-10000}
ROUNDS=${2:-3}
T=${T:-3}
W=$(mktemp -d)
cleanup() {
	[ -f "$W/iperf.pid" ] && kill "$(cat "$W/iperf.pid")" 2>/dev/null || true
	[ -f "$W/srv.pid" ] && kill "$(cat "$W/srv.pid")" 2>/dev/null || true
	sleep 0.2
	for n in fzr-lan fzr-dut fzr-wan; do ip netns del $n 2>/dev/null || true; done
	rm -rf "$W"
}
trap cleanup EXIT
for n in fzr-lan fzr-dut fzr-wan; do ip netns add $n; ip -n $n link set lo up; done
ip link add fzr0 netns fzr-lan type veth peer name fzrd0 netns fzr-dut
ip link add fzrd1 netns fzr-dut type veth peer name fzr1 netns fzr-wan
ip -n fzr-lan addr add 198.18.1.10/24 dev fzr0
ip -n fzr-dut addr add 198.18.1.1/24 dev fzrd0
ip -n fzr-dut addr add 198.19.1.1/24 dev fzrd1
ip -n fzr-wan addr add 198.19.1.10/24 dev fzr1
for p in "fzr-lan fzr0" "fzr-dut fzrd0" "fzr-dut fzrd1" "fzr-wan fzr1"; do set -- $p; ip -n $1 link set $2 up; done
ip -n fzr-lan route add default via 198.18.1.1
ip -n fzr-wan route add default via 198.19.1.1
ip netns exec fzr-dut sysctl -qw net.ipv4.ip_forward=1
ip netns exec fzr-wan iperf3 -s -D -B 198.19.1.10 --pidfile "$W/iperf.pid"
cat >"$W/conn.py" <<'PY'
import socket, sys, time
if sys.argv[1] == "serve":
    s = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("198.19.1.10", 7001)); s.listen(1024)
    while True:
        c, _ = s.accept(); c.close()
else:
    end, n = time.time() + float(sys.argv[2]), 0
    while time.time() < end:
        c = socket.socket(); c.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\1\0\0\0\0\0\0\0")
        c.settimeout(2); c.connect(("198.19.1.10", 7001)); c.close(); n += 1
    print(round(n / float(sys.argv[2])))
PY
ip netns exec fzr-wan python3 "$W/conn.py" serve & echo $! >"$W/srv.pid"
sleep 0.5

gen() { # gen N: the generated rules
	local i
	for ((i = 0; i < $1; i++)); do
		printf '\t\tiifname "fzrd0" ip protocol tcp ip saddr 198.18.%d.%d ip daddr 198.19.200.1 tcp dport %d drop\n' $((128 + (i / 256) % 128)) $((i % 256)) $((10000 + i / 32768))
	done
}
STATE=$'\t\tct state established,related accept\n'
PASS=$'\t\tiifname "fzrd0" ip saddr 198.18.1.0/24 accept\n'
gen "$N" >"$W/gen"
mk() { # mk NAME PARTS...: a ruleset file
	local f="$W/$1.nft"; shift
	{ printf 'table ip fzr {}\ndelete table ip fzr\ntable ip fzr {\n\tchain filter {\n\t\ttype filter hook forward priority filter; policy drop;\n'
	  for p in "$@"; do case $p in state) printf '%s' "$STATE";; pass) printf '%s' "$PASS";; gen) cat "$W/gen";; esac; done
	  printf '\t\tcounter drop\n\t}\n}\n'; } >"$f"
}
mk none state pass
mk old gen pass state
mk pf-before state gen pass
mk pf-after state pass gen
printf '%-10s %5s %12s %14s\n' variant round "tcp Mbit/s" "connects/s"
for r in $(seq "$ROUNDS"); do
	for v in none old pf-before pf-after; do
		ip netns exec fzr-dut nft -f "$W/$v.nft"
		ip netns exec fzr-dut conntrack -F >/dev/null 2>&1 || true
		bps=$(ip netns exec fzr-lan iperf3 -c 198.19.1.10 -t "$T" -J | python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))')
		cps=$(ip netns exec fzr-lan python3 "$W/conn.py" connect "$T")
		printf '%-10s %5s %12s %14s\n' "$v" "$r" "$bps" "$cps"
	done
done
