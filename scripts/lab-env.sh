# Sourced by the lab scripts: the lab's namespaces, folder and targets file
# from the environment, so several labs can run on one machine.
#   FWAB_LAB_PREFIX  namespace prefix (fwab-lab default: fwab)
#   FWAB_LAB_DIR     lab folder
#   FWAB_TARGETS     targets file the lab writes and fwab reads
#   FWAB_LAB_PROFILE lab profile for 'fwab lab up' (default unlimited; 1g-small)
# Sets labflags (for 'fwab lab ...'), upflags (for 'fwab lab up' only) and
# tflags (for commands that open the target). XDG_STATE_HOME keys fwab's local journal; set it per lab too.
labflags=()
upflags=()
tflags=(--target lab)
if [[ -n ${FWAB_LAB_PROFILE:-} ]]; then upflags+=(--profile "$FWAB_LAB_PROFILE"); fi
if [[ -n ${FWAB_LAB_PREFIX:-} ]]; then labflags+=(--prefix "$FWAB_LAB_PREFIX"); fi
if [[ -n ${FWAB_LAB_DIR:-} ]]; then labflags+=(--dir "$FWAB_LAB_DIR"); fi
if [[ -n ${FWAB_TARGETS:-} ]]; then
	labflags+=(--targets "$FWAB_TARGETS")
	tflags+=(--targets "$FWAB_TARGETS")
fi
# lastrun prints the newest run's number in the database $db.
lastrun() { $fwab runs list --db "$db" | awk -F'\t' 'NR > 1 && $1 ~ /^[0-9]+$/ && $1 + 0 > id + 0 {id = $1} END {print id}'; }
# load prints the machine's load averages (other jobs share the 2 cores).
load() { uptime | sed 's/.*load average: /load /'; }
# gaterows PREFIX FILE prints one line per throughput row of a fwab compare
# output: PREFIX, the probe and point, the change (~ when not shown), and
# the gate (REGRESSION or ok), separated by tabs.
gaterows() {
	awk -v prefix="$1" '
		/^Mbit\/s/ { inside = 1; next }
		inside && NF == 0 { inside = 0 }
		inside && ($1 == "up" || $1 == "down") {
			change = "~"
			for (i = 1; i <= NF; i++) if ($i ~ /^[-+][0-9.]+%$/) change = $i
			gate = ($NF == "REGRESSION") ? "REGRESSION" : "ok"
			print prefix "\t" $1 " " $2 "\t" change "\t" gate
		}' "$2"
}
