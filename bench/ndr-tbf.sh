#!/usr/bin/env bash
# ndr-tbf.sh (root): the NDR/PDR search (kind: ndr) on a lab of its own
# whose DUT's WAN egress is capped with tc tbf (or htb, SHAPER=htb) at RATE: one sweep, its
# report, and per frame size and probe the found rate against the cap (tbf
# counts frames without FCS, preamble or gap), the final width, the trials
# and their time. Run it under the lab lock:
#
#   flock -o /tmp/fwab-lab.lock bench/ndr-tbf.sh [RATE_MBIT] [BURST] [SIZES] [DURATION]
#   e.g. bench/ndr-tbf.sh 100 256k "512, 1518" 4s
#
# PING=true adds ping: true to the PDR probe: latency at 10, 50 and 90 %
# of each rate found, printed after the table. DIRECTION=bidir searches
# both ways at once (the LAN egress capped too, the cap counted twice);
# SIZES may name imix. WINDOW=4M asks iperf3 for that socket buffer
# (window:), the receiver's room; REPEATS=5 measures each search five
# times and prints each one's coefficient of variation; PDR=false leaves
# the PDR probe out (the NDR's reruns alone). GENERATOR=trafgen sends the
# trials with trafgen instead of iperf3. LRO=off turns the DUT's LRO (its
# veths' GRO) off as well. KEEP=FILE keeps the results
# database. A flagged search prints its generator-limited trials.
#
# SHAPER=htb caps with an htb class (rate RATE, burst and cburst BURST,
# a bfifo of twice BURST; give a BURST of 16k, as a 256k burst lets 21 ms
# through at once) instead of tbf, with sch_htb's htb_hysteresis set for
# the run and put back on exit (it is the machine's, for every htb): the
# class then sends until its tokens fall below -cbuffer and -buffer, up to
# its cburst at each wake-up. A throttled tbf (or htb without hysteresis)
# lets each frame out by a timer; at 64 and 128 bytes that is 100,000 to
# 200,000 timer events a second, and on this VM their softirq work runs
# in the sender's system call (100 % si), holding trafgen at the cap's
# rate with nothing dropped where a wire would drop. Both count frames
# without FCS, so the cap in frames a second is the same.
#
# upstream: not settled — sch_htb's htb_hysteresis module parameter (net/sched/sch_htb.c: htb_lowater is -cbuffer while the class may send, module_param(htb_hysteresis, int, 0640)); checked at run time: the script stops if /sys/module/sch_htb/parameters/htb_hysteresis is not there
#
# Only 198.18.0.0/15, in namespaces fwnb-* it creates and deletes.
set -euo pipefail
cd "$(dirname "$0")/.."
RATE=${1:-100} BURST=${2:-256k} SIZES=${3:-64, 128, 256, 512, 1024, 1280, 1518} DURATION=${4:-4s} PING=${PING:-false} DIRECTION=${DIRECTION:-up} WINDOW=${WINDOW:-} REPEATS=${REPEATS:-1} PDR=${PDR:-true} GENERATOR=${GENERATOR:-iperf3} LRO=${LRO:-} SHAPER=${SHAPER:-tbf}
case $SHAPER in
tbf | htb) ;;
*) echo "ndr-tbf.sh: SHAPER=$SHAPER: give tbf or htb" >&2; exit 2 ;;
esac
W=$(mktemp -d)
export XDG_STATE_HOME=$W/state XDG_CONFIG_HOME=$W/config XDG_DATA_HOME=$W/data
go build -o "$W/fwab" ./cmd/fwab
fwab=$W/fwab
lab=(--prefix fwnb --dir "$W/lab" --targets "$W/targets.yaml")
$fwab lab up "${lab[@]}" >/dev/null
hyst=/sys/module/sch_htb/parameters/htb_hysteresis hyst0=
trap 'set +e; if [[ -n $hyst0 ]]; then echo "$hyst0" >"$hyst"; fi; $fwab lab down "${lab[@]}" >/dev/null; if [[ -n ${KEEP:-} ]]; then cp "$W/results.db" "$KEEP"; fi; rm -rf "$W"' EXIT
ports=(fwnbd1)
if [[ $DIRECTION == bidir ]]; then ports+=(fwnbd0); fi
for dev in "${ports[@]}"; do
	if [[ $SHAPER == tbf ]]; then
		ip netns exec fwnb-dut tc qdisc add dev "$dev" root tbf rate "${RATE}mbit" burst "$BURST" limit "$((2 * ${BURST%k}))k"
		continue
	fi
	ip netns exec fwnb-dut tc qdisc add dev "$dev" root handle 1: htb default 1
	ip netns exec fwnb-dut tc class add dev "$dev" parent 1: classid 1:1 htb rate "${RATE}mbit" burst "$BURST" cburst "$BURST" quantum 1514
	ip netns exec fwnb-dut tc qdisc add dev "$dev" parent 1:1 handle 10: bfifo limit "$((2 * ${BURST%k}))k"
done
if [[ $SHAPER == htb ]]; then
	[[ -w $hyst ]] || { echo "ndr-tbf.sh: SHAPER=htb needs $hyst (sch_htb's htb_hysteresis)" >&2; exit 1; }
	hyst0=$(cat $hyst)
	echo 1 >$hyst
fi
extra=", generator: $GENERATOR"
if [[ -n $WINDOW ]]; then extra+=", window: $WINDOW"; fi
pdr=
if [[ $PDR == true ]]; then
	pdr="  - {name: pdr, kind: ndr, bitrate: 1G, frame_sizes: [$SIZES], duration: $DURATION, direction: $DIRECTION, loss_tolerance: 0.5%, ping: $PING$extra}"
fi
cat >"$W/spec.yaml" <<YAML
name: ndr-tbf
target: lab
axes:
  offload.tso: ["off"]
${LRO:+  offload.lro: ["$LRO"]
}probes:
  - {name: ndr, kind: ndr, bitrate: 1G, frame_sizes: [$SIZES], duration: $DURATION, direction: $DIRECTION$extra}
${pdr:+$pdr
}repeats: $REPEATS
idle: 2s
YAML
$fwab sweep "$W/spec.yaml" --targets "$W/targets.yaml" --db "$W/results.db" --progress=false >/dev/null
ip netns exec fwnb-dut tc -s qdisc show dev fwnbd1 | grep -E "^qdisc|Sent"
python3 - "$W/results.db" "$RATE" "${#ports[@]}" <<'PY'
import json, sqlite3, statistics, sys
db, cap = sqlite3.connect(sys.argv[1]), float(sys.argv[2]) * 1e6 * int(sys.argv[3])
print("probe     frame  found fps      cap fps  found/cap  Mbit/s wire  width   trials  time  generator-limited")
for probe, raw in db.execute("SELECT probe, raw FROM samples WHERE probe != 'idle' ORDER BY id"):
    n = json.loads(raw).get("ndr")
    if not n:
        continue
    capfps = cap / (8 * (n["mean_frame"] - 4))
    print(f"{probe:9} {n['frame'] or 'imix':5}  {n['frames_per_second']:9.0f}  {capfps:11.0f}  {n['frames_per_second'] / capfps:9.3f}  "
          f"{n['wire_bps'] / 1e6:11.1f}  {n['width'] * 100:5.2f}%  {len(n['trials']):6}  {n['trials_time']:>5}  {n['generator_limited']}")
    if n["generator_limited"]:
        for t in n["trials"]:
            if t.get("generator_limited"):
                print(f"          limited trial: {t['payload_bps'] / 1e6:.2f} Mbit/s payload asked, {t['offered_payload_bps'] / 1e6:.2f} offered, loss {t['loss_percent']:.3f}%, receiver drops {t.get('receiver_drops', 0)}")
runs = {}
for probe, raw in db.execute("SELECT probe, raw FROM samples WHERE probe != 'idle' ORDER BY id"):
    n = json.loads(raw).get("ndr")
    if n:
        runs.setdefault(probe, []).append(n["frames_per_second"] / (cap / (8 * (n["mean_frame"] - 4))))
for probe, r in runs.items():
    if len(r) > 1:
        print(f"{probe:15} {len(r)} searches: found/cap mean {statistics.mean(r):.3f}, min {min(r):.3f}, max {max(r):.3f}, CV {100 * statistics.stdev(r) / statistics.mean(r):.2f}%")
for probe, raw in db.execute("SELECT probe, raw FROM samples WHERE probe != 'idle' ORDER BY id"):
    n = json.loads(raw).get("ndr") or {}
    for l in n.get("latency", []):
        print(f"latency {probe:9} {n['frame'] or 'imix':5}  at {l['fraction'] * 100:3.0f}% ({l['payload_bps'] / 1e6:7.2f} Mbit/s payload): "
              f"ping avg {l['ping_avg_ms']:.3f} ms, min {l['ping_min_ms']:.3f}, max {l['ping_max_ms']:.3f}, ping loss {l['ping_loss_percent']:.1f}%, UDP loss {l['udp_loss_percent']:.3f}%")
PY
