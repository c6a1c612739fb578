#!/usr/bin/env python3
"""How much slower were a slowed run's probes than the uncapped runs the lab
measured during the same run? The lab's tracking slowdown removes its caps
and measures the running configuration after every apply (serve.log,
"firmware slowdown" lines), so within one sweep uncapped runs and capped
probes alternate minutes apart: a within-run comparison that load drift
between two separate runs does not reach.

Usage: bench/slowdown-fidelity.py SERVE_LOG RESULTS_DB RUN_ID
Prints per point and direction: median probe Mbit/s, median uncapped run
Mbit/s (iperf3 -t 1 -O 1 through the DUT with the caps removed), and the
ratio, which should be near 1 - P/100.
"""
import json
import re
import sqlite3
import statistics
import sys
from datetime import datetime


def ts(s):
    return datetime.fromisoformat(s.replace("Z", "+00:00"))


def main():
    log, dbfile, run = sys.argv[1], sys.argv[2], int(sys.argv[3])
    db = sqlite3.connect(dbfile)
    created, finished = db.execute("select created, finished from runs where id = ?", (run,)).fetchone()
    start, end = ts(created), ts(finished)
    rules = None
    uncapped = {}  # (rules, direction) -> runs
    percent = None
    for line in open(log):
        m = re.match(r"time=(\S+) ", line)
        if not m or not (start <= ts(m.group(1)) <= end):
            continue
        if 'msg="filter loaded"' in line:
            rules = int(re.search(r" rules=(\d+)", line).group(1))
        elif 'msg="firmware slowdown"' in line and rules is not None:
            percent = float(re.search(r" percent=([\d.]+)", line).group(1))
            for d, key in (("up", "up_samples"), ("down", "down_samples")):
                m = re.search(key + r'="?\[([^\]]*)\]', line)
                if m:
                    # each apply appends two runs per direction
                    uncapped.setdefault((rules, d), []).extend(float(v) for v in m.group(1).split()[-2:])
    probes = {}
    for knobs, direction, bps in db.execute(
        "select p.knobs, s.direction, s.bits_per_second from samples s join points p "
        "on p.run_id = s.run_id and p.idx = s.point_idx where s.run_id = ? and s.bits_per_second is not null", (run,)):
        n = int(json.loads(knobs).get("rules@lan", "0"))
        probes.setdefault((n, direction), []).append(bps / 1e6)
    print(f"run {run}: slowdown {percent} %; uncapped runs measured by the lab during the run vs the run's probes")
    print("| point | direction | probes (median Mbit/s, n) | uncapped runs (median, n) | ratio |")
    print("| --- | --- | ---: | ---: | ---: |")
    for (n, d), p in sorted(probes.items()):
        u = uncapped.get((n + 5, d), [])  # the filter holds 5 rules of its own
        if not u:
            continue
        mp, mu = statistics.median(p), statistics.median(u)
        print(f"| rules@lan={n} | {d} | {mp:.0f} ({len(p)}) | {mu:.0f} ({len(u)}) | {mp / mu:.2f} |")


if __name__ == "__main__":
    main()
