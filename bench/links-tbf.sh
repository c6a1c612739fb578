#!/usr/bin/env bash
# links-tbf.sh (root): two links through the lab's DUT at once, each
# capped on the DUT's WAN-side egress with tc tbf at RATE Mbit/s: a lab of
# its own with its second client/server pair (lab up --pairs 2), one sweep
# of each link alone and both together, and per link the TCP goodput
# against the cap's (tbf counts frames without FCS, preamble and gap, so a
# full segment's 1448 payload bytes ride in 1514), the sum and the launch
# skew. Run it under the lab lock:
#
#   flock -o /tmp/fwab-lab.lock bench/links-tbf.sh [RATE_MBIT] [REPEATS]
#   e.g. bench/links-tbf.sh 500 6
#
# Only 198.18.0.0/15, in namespaces fwlb-* it creates and deletes.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-500} REPEATS=${2:-6}
W=$(mktemp -d)
export XDG_STATE_HOME=$W/state XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data
go build -o "$W/fwab" ./cmd/fwab
fwab=$W/fwab
lab=(--prefix fwlb --dir "$W/lab" --targets "$W/targets.yaml")
$fwab lab up "${lab[@]}" --pairs 2 >/dev/null
trap '$fwab lab down "${lab[@]}" >/dev/null; rm -rf "$W"' EXIT
for dev in fwlbd1 fwlbd3; do # the DUT's WAN and WAN2 ports: each link's upload egress
	ip netns exec fwlb-dut tc qdisc add dev "$dev" root tbf rate "${RATE}mbit" burst 256k limit 512k
done
cat >"$W/spec.yaml" <<YAML
name: links-tbf
target: lab
axes:
  offload.tso: ["off"]
probes:
  - {name: up, direction: up, duration: 5s, omit: 1s, links: [link1, link2]}
  - {name: both, direction: up, duration: 5s, omit: 1s, links: [link1, link2], concurrent: true}
repeats: $REPEATS
idle: 0s
YAML
$fwab sweep "$W/spec.yaml" --targets "$W/targets.yaml" --db "$W/results.db" --progress=false >/dev/null
python3 - "$W/results.db" "$RATE" <<'PY'
import json, sqlite3, statistics, sys
db, rate = sqlite3.connect(sys.argv[1]), float(sys.argv[2])
want = rate * 1448 / 1514
per = {}
for probe, bps, raw in db.execute("SELECT probe, bits_per_second, raw FROM samples WHERE probe != 'idle' ORDER BY id"):
    s = json.loads(raw) if raw else {}
    if s.get("links"):
        for l in s["links"]:
            per.setdefault(probe + " " + l["name"], []).append(l["bits_per_second"] / 1e6)
        per.setdefault(probe + " sum", []).append(sum(l["bits_per_second"] for l in s["links"]) / 1e6)
        per.setdefault(probe + " skew ms", []).append(s.get("start_skew_ms", 0))
    else:
        per.setdefault(probe, []).append(bps / 1e6)
print(f"cap {rate:.0f} Mbit/s a link: TCP goodput wanted {want:.1f} a link, {2 * want:.1f} for both")
for k, v in per.items():
    med = statistics.median(v)
    ref = 2 * want if k.endswith(" sum") else want
    tail = "" if k.endswith("skew ms") else f"  {100 * (med - ref) / ref:+.1f} % of the goodput wanted"
    print(f"{k:22} n={len(v)}  median {med:8.2f}  min {min(v):8.2f}  max {max(v):8.2f}{tail}")
PY
