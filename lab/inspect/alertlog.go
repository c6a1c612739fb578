package inspect

import (
	"fmt"
	"os"
	"sync"
	"time"
)

// alertLog is one interface's fast log, as Suricata's fast output writes
// it (pfSense's alerts.log): a line per alert, appended, written as it
// happens.
//
// upstream: not settled — Suricata's src/alert-fastlog.c writes "%s  %s[**] [%u:%u:%u] %s [**] [Classification: %s] [Priority: %u] {%s} %s:%u -> %s:%u" with action "[Drop] " in IPS mode and "[wDrop] " otherwise for a drop rule (read in the file index; Suricata's source is not in the upstream copy); checked at run time: fwab counts the lines by their "[1:SID:" alone
type alertLog struct {
	mu sync.Mutex
	f  *os.File
}

func openAlertLog(path string) (*alertLog, error) {
	f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		return nil, fmt.Errorf("alert log: %w", err)
	}
	return &alertLog{f: f}, nil
}

// write logs one alert of rule r on the packet info at now; ips is
// whether the engine drops (inline), which a drop rule's line says.
func (l *alertLog) write(now time.Time, ips bool, r Rule, info packetInfo) error {
	action := ""
	switch {
	case r.Action == Drop && ips:
		action = "[Drop] "
	case r.Action == Drop:
		action = "[wDrop] "
	}
	proto := "UDP"
	if info.tcp {
		proto = "TCP"
	}
	line := fmt.Sprintf("%s  %s[**] [1:%d:1] fwab lab rule %d [**] [Classification: (null)] [Priority: 3] {%s} %s:%d -> %s:%d\n",
		now.Format("01/02/2006-15:04:05.000000"), action, r.SID, r.SID, proto, info.src, info.sport, info.dst, info.dport)
	l.mu.Lock()
	defer l.mu.Unlock()
	_, err := l.f.WriteString(line)
	return err
}

func (l *alertLog) Close() error { return l.f.Close() }
