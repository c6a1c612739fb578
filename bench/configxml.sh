#!/usr/bin/env bash
# Load + one knob change + save on a generated 50 MB config (20k rules, large
# rrddata): fwab's configxml beside Python's xml.etree.ElementTree, on the
# same file, in one run. Prints a Markdown table (median of RUNS).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/xmlbench" ./bench/xmlbench
"$work/xmlbench" -generate "$work/config.xml" -rules 20000 -rrd-mb 37
size=$(stat -c %s "$work/config.xml")

median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
measure() { # name, command...
	local name=$1; shift
	local times=() rss=()
	for _ in $(seq "$RUNS"); do
		read -r t r < <("$@")
		times+=("$t"); rss+=("$r")
	done
	local mt mr
	mt=$(printf '%s\n' "${times[@]}" | median)
	mr=$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)
	printf '%s %s %s\n' "$name" "$mt" "$mr"
}

go_line=$(measure fwab "$work/xmlbench" -in "$work/config.xml" -out "$work/go.xml")
py_line=$(measure python3 python3 bench/xmlbench.py "$work/config.xml" "$work/py.xml")

# The Go output differs from the input in the one removed line and <revision> only.
changed=$(diff "$work/config.xml" "$work/go.xml" | grep -c '^[<>]' || true)

read -r _ gt gr <<<"$go_line"
read -r _ pt pr <<<"$py_line"
mb=$(awk -v s="$size" 'BEGIN {printf "%.1f", s/1048576}')
echo "config: ${mb} MiB, 20000 rules; median of $RUNS runs; peak RSS is the maximum over the runs"
echo
echo "| implementation | load + set + save | peak RSS | RSS / file size |"
echo "| --- | ---: | ---: | ---: |"
awk -v gt="$gt" -v gr="$gr" -v s="$size" 'BEGIN {printf "| fwab configxml (Go) | %.3f s | %.0f MiB | %.2fx |\n", gt, gr/1024, gr*1024/s}'
awk -v pt="$pt" -v pr="$pr" -v s="$size" 'BEGIN {printf "| Python xml.etree.ElementTree | %.3f s | %.0f MiB | %.2fx |\n", pt, pr/1024, pr*1024/s}'
echo
awk -v gt="$gt" -v pt="$pt" 'BEGIN {printf "speed-up: %.1fx; lines changed by the Go edit: '"$changed"' (the knob and <revision>)\n", pt/gt}'
