#!/usr/bin/env bash
# config.xml and plans at scale, timed as users run them: each fwab command
# is its own process (read, parse, edit, lint, write), beside Python's
# xml.etree.ElementTree doing load + one change + save on the same
# generated config (20k rules, a large rrddata blob), in one run. The
# library alone (load + set + save in one process, bench/xmlbench) is
# kept beside them. Prints a Markdown table: median wall time of RUNS,
# the highest peak RSS over the runs, and both against ElementTree and
# the file's size.
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${RUNS:-5}
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

go build -o "$work/xmlbench" ./bench/xmlbench
go build -o "$work/fwab" ./cmd/fwab
"$work/xmlbench" -generate "$work/config.xml" -rules 20000 -rrd-mb 37
size=$(stat -c %s "$work/config.xml")
"$work/fwab" config set "$work/config.xml" offload.tso=on rules@lan=10 -o "$work/other.xml" 2>/dev/null

# Specs for matrix check: 10,000 points (625 rules counts up to 9,984
# crossed with three offloads and outbound NAT), and two points of up to
# 200,000 rules.
counts=$(seq -s ', ' 0 16 9984)
cat >"$work/points-10k.yaml" <<EOF
name: points-10k
target: lab
axes:
  rules@lan: [$counts]
  offload.checksum: [on, off]
  offload.tso: [on, off]
  offload.lro: [on, off]
  nat.outbound: [disabled, automatic]
probes:
  - {name: up, direction: up, duration: 5s}
repeats: 1
EOF
cat >"$work/rules-200k.yaml" <<'EOF'
name: rules-200k
target: lab
axes:
  rules@lan: [0, 200000]
probes:
  - {name: up, direction: up, duration: 5s}
repeats: 1
EOF

# once CMD...: one run in its own process; prints "seconds peak-RSS-KiB".
once() {
	python3 - "$@" <<'EOF'
import resource, subprocess, sys, time
start = time.perf_counter()
subprocess.run(sys.argv[1:], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
print(f"{time.perf_counter() - start:.3f} {resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss}")
EOF
}
median() { sort -n | awk '{a[NR]=$1} END {print a[int((NR+1)/2)]}'; }
# measure NAME CMD...: prints "NAME median-seconds max-RSS-KiB".
measure() {
	local name=$1; shift
	local times=() rss=()
	for _ in $(seq "$RUNS"); do
		read -r t r < <(once "$@")
		times+=("$t"); rss+=("$r")
	done
	printf '%s %s %s\n' "$name" "$(printf '%s\n' "${times[@]}" | median)" "$(printf '%s\n' "${rss[@]}" | sort -n | tail -1)"
}

py=$(measure python3 python3 bench/xmlbench.py "$work/config.xml" "$work/py.xml")
read -r _ pt _ <<<"$py"
lines=(
	"$py"
	"$(measure set "$work/fwab" config set "$work/config.xml" offload.tso=on -o "$work/set.xml")"
	"$(measure lint "$work/fwab" config lint "$work/config.xml")"
	"$(measure diff "$work/fwab" config diff "$work/config.xml" "$work/other.xml")"
	"$(measure check-10k "$work/fwab" matrix check "$work/points-10k.yaml" --config "$work/config.xml")"
	"$(measure check-200k "$work/fwab" matrix check "$work/rules-200k.yaml" --config "$work/config.xml")"
	"$(measure library "$work/xmlbench" -in "$work/config.xml" -out "$work/go.xml")"
)

# The edit changes the knob's line and <revision> only.
changed=$(diff "$work/config.xml" "$work/set.xml" | grep -c '^[<>]' || true)

label() {
	case $1 in
	python3) echo "Python ElementTree: load, set, save" ;;
	set) echo "\`fwab config set FILE offload.tso=on -o OUT\`" ;;
	lint) echo "\`fwab config lint FILE\`" ;;
	diff) echo "\`fwab config diff FILE OTHER\`" ;;
	check-10k) echo "\`fwab matrix check\`, 10,000 points" ;;
	check-200k) echo "\`fwab matrix check\`, rules@lan: [0, 200000]" ;;
	library) echo "configxml library: load, set, save (bench/xmlbench)" ;;
	esac
}
mb=$(awk -v s="$size" 'BEGIN {printf "%.1f", s/1048576}')
echo "config: ${mb} MiB, 20000 rules; median of $RUNS runs; peak RSS is the maximum over the runs"
echo
# An edit is held against ElementTree's; lint and diff against config set.
read -r _ st _ <<<"${lines[1]}"
echo "| command | time | against | peak RSS | RSS / file size |"
echo "| --- | ---: | ---: | ---: | ---: |"
for l in "${lines[@]}"; do
	read -r name t r <<<"$l"
	awk -v n="$(label "$name")" -v name="$name" -v t="$t" -v pt="$pt" -v st="$st" -v r="$r" -v s="$size" 'BEGIN {
		vs = "–"
		if (name == "set" || name == "library") vs = sprintf("%.1fx faster than ElementTree", pt/t)
		if (name == "lint" || name == "diff") vs = sprintf("%.2fx config set'"'"'s time", t/st)
		printf "| %s | %.2f s | %s | %.0f MiB | %.2fx |\n", n, t, vs, r/1024, r*1024/s
	}'
done
echo
echo "lines changed by \`config set\`: $changed (the knob and <revision>)"
