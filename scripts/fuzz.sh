#!/usr/bin/env bash
# Runs every fuzz target in the module for FUZZTIME each (default 10s) and
# prints a table: package, target, time, execs. The targets are found with
# `go test -list`, so a new Fuzz function is fuzzed without editing this.
# A failure leaves its input under the package's testdata/fuzz/ (commit it
# as a seed once fixed) and makes the script exit 1.
set -uo pipefail

GO=${GO:-go}
FUZZTIME=${FUZZTIME:-10s}
# Minimizing a new input from a large seed (a whole config.xml) takes up to
# a minute by default, with no executions meanwhile: keep it short.
FUZZMINIMIZETIME=${FUZZMINIMIZETIME:-3s}
pkgs=${FUZZPKGS:-./...}
log=$(mktemp)
trap 'rm -f "$log"' EXIT

summary=()
failed=0
for pkg in $($GO list $pkgs); do
	targets=$($GO test -list '^Fuzz' "$pkg" | grep '^Fuzz' || true)
	for f in $targets; do
		echo "== $pkg $f ($FUZZTIME)"
		start=$(date +%s)
		if $GO test -run '^$' -fuzz "^${f}\$" -fuzztime "$FUZZTIME" -fuzzminimizetime "$FUZZMINIMIZETIME" "$pkg" >"$log" 2>&1; then
			status=ok
		else
			status=FAIL
			failed=1
			cat "$log"
		fi
		execs=$(grep -o 'execs: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
		summary+=("$(printf '%-36s %-24s %5ss %12s %s' "${pkg#github.com/fwab/fwab/}" "$f" "$(($(date +%s) - start))" "${execs:-?}" "$status")")
	done
done

printf '\n%-36s %-24s %6s %12s %s\n' package target time execs status
printf '%s\n' "${summary[@]}"
exit $failed
