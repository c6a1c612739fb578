#!/usr/bin/env bash
# Does a tbf cap on the lab's DUT cost what it says under the machine's
# current load? Alternates, per direction: an uncapped iperf3 run, then a
# run under a cap of (100-P) % of that run's goodput as a wire rate (as the
# lab's tracking slowdown sets it), N times, and prints each pair and the
# median ratio (want 1-P/100). Needs root and a lab that is up on a profile
# without a slowdown: scripts/lab-env.sh's FWAB_LAB_PREFIX names it.
# Usage: bench/tbf-fidelity.sh [-p PERCENT] [-n PAIRS] [-t SECONDS]
set -euo pipefail
percent=10 pairs=6 secs=3
while getopts p:n:t: opt; do
	case $opt in
	p) percent=$OPTARG ;;
	n) pairs=$OPTARG ;;
	t) secs=$OPTARG ;;
	*) echo "usage: $0 [-p PERCENT] [-n PAIRS] [-t SECONDS]" >&2; exit 2 ;;
	esac
done
prefix=${FWAB_LAB_PREFIX:-fwab}
dut=$prefix-dut lanif=${prefix}d0 wanif=${prefix}d1
port=$((20000 + RANDOM % 20000))
pidfile=$(mktemp)
ip netns exec "$prefix-wan" iperf3 -s -D -B 198.19.1.10 -p "$port" --pidfile "$pidfile"
cleanup() {
	kill "$(cat "$pidfile")" 2>/dev/null || true
	rm -f "$pidfile"
	for v in $lanif $wanif; do ip netns exec "$dut" tc qdisc del dev "$v" root 2>/dev/null || true; done
}
trap cleanup EXIT
sleep 0.5
run() { # run [-R]: goodput in Mbit/s, 1 s left out
	ip netns exec "$prefix-lan" iperf3 -c 198.19.1.10 -p "$port" -t "$secs" -O 1 -J "$@" |
		python3 -c 'import json,sys; print(round(json.load(sys.stdin)["end"]["sum_received"]["bits_per_second"]/1e6))'
}
cap() { # cap IF MBIT: tbf at MBIT of goodput as a wire rate, burst 25 ms
	local wire
	wire=$(python3 -c "print(int($2 * (100 - $percent) / 100 * 1514 / 1448 * 1000))")
	ip netns exec "$dut" tc qdisc del dev "$1" root 2>/dev/null || true
	ip netns exec "$dut" tc qdisc add dev "$1" root tbf rate "${wire}kbit" \
		burst "$(python3 -c "print(max(int($wire * 1000 / 8 * 0.025), 262144))")" latency 50ms
}
uncap() { ip netns exec "$dut" tc qdisc del dev "$1" root 2>/dev/null || true; }
echo "$percent % caps, $pairs pairs per direction, iperf3 -t $secs -O 1; $(uptime | sed 's/.*load average: /load /')"
for dir in up down; do
	iface=$wanif flag=()
	if [[ $dir == down ]]; then iface=$lanif flag=(-R); fi
	ratios=()
	for ((i = 0; i < pairs; i++)); do
		uncap "$iface"
		u=$(run "${flag[@]}")
		cap "$iface" "$u"
		c=$(run "${flag[@]}")
		uncap "$iface"
		ratios+=("$(python3 -c "print(round($c / $u, 3))")")
		echo "$dir: uncapped $u, capped $c (cap for $(python3 -c "print(round($u * (100 - $percent) / 100))") goodput): ${ratios[-1]}"
	done
	echo "$dir: median ratio $(printf '%s\n' "${ratios[@]}" | sort -n | awk '{a[NR] = $1} END {print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2)}') (want $(python3 -c "print(1 - $percent / 100)"))"
done
echo "$(uptime | sed 's/.*load average: /load /')"
