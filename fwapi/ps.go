package fwapi

import (
	"fmt"
	"strconv"
	"strings"
)

// ParseSuricataProcesses finds the Suricata processes in
// `ps ax -o pid,command` output. --netmap IF is inline IPS; -i IF is pcap,
// which serves both IDS and legacy IPS (the process cannot tell which: the
// config's blockoffenders can), reported as "ids".
func ParseSuricataProcesses(out string) ([]IDSInstance, error) {
	var ids []IDSInstance
	for i, l := range strings.Split(out, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 || f[0] == "PID" {
			continue
		}
		if !strings.HasSuffix(f[1], "/suricata") && f[1] != "suricata" {
			continue
		}
		pid, err := strconv.Atoi(f[0])
		if err != nil {
			return nil, fmt.Errorf("ps line %d: pid %q is not a number", i+1, f[0])
		}
		inst := IDSInstance{PID: pid, Mode: "ids"}
		cfgIf := ""
		for j := 2; j < len(f); j++ {
			next := ""
			if j+1 < len(f) && !strings.HasPrefix(f[j+1], "-") {
				next = f[j+1]
			}
			switch {
			case f[j] == "--netmap":
				inst.Mode = "ips-inline"
				inst.Interface = next
			case strings.HasPrefix(f[j], "--netmap="):
				inst.Mode = "ips-inline"
				inst.Interface = strings.TrimPrefix(f[j], "--netmap=")
			case f[j] == "-i" || f[j] == "--pcap":
				inst.Interface = next
			case f[j] == "-c":
				cfgIf = suricataConfigInterface(next)
			}
		}
		if inst.Interface == "" {
			// pfSense's inline mode names the interface only in the yaml:
			// -c /usr/local/etc/suricata/suricata_<uuid>_<if>/suricata.yaml
			inst.Interface = cfgIf
		}
		if inst.Interface == "" {
			return nil, fmt.Errorf("ps line %d: suricata without -i or --netmap: %q", i+1, strings.Join(f[1:], " "))
		}
		ids = append(ids, inst)
	}
	return ids, nil
}

// suricataConfigInterface takes the interface from pfSense's per-instance
// config folder name, suricata_<uuid>_<if>.
func suricataConfigInterface(path string) string {
	for _, part := range strings.Split(path, "/") {
		if rest, ok := strings.CutPrefix(part, "suricata_"); ok {
			if _, ifname, ok := strings.Cut(rest, "_"); ok {
				return ifname
			}
		}
	}
	return ""
}
