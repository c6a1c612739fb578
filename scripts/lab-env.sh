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
