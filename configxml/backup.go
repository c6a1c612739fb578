package configxml

import (
	"errors"
	"math"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// OPNsenseBackupCount is how many backups OPNsense's Config::save keeps in
// /conf/backup after saving c: <system><backupcount> read as PHP's intval
// reads it (its leading digits; "" or text is 0, which keeps none), and 100
// without the element or for a negative count.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:688 — `$this->statusIsValid && isset($this->simplexml->system->backupcount)`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:693 — `return 100;`
func (c *Config) OPNsenseBackupCount() int {
	el := c.find("system/backupcount")
	if el == nil {
		return 100
	}
	if n := phpIntval(el.Text()); n >= 0 {
		return n
	}
	return 100
}

// phpNumeric is the leading numeric string PHP 7.1+ reads: an optional
// sign, digits with an optional fraction, an optional exponent.
var phpNumeric = regexp.MustCompile(`^[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?`)

// phpIntval is PHP's intval of a string: leading whitespace skipped, the
// leading numeric string read (an exponent included: "1e3" is 1000) and
// cut toward zero, capped at the int's range; 0 when there is none.
func phpIntval(s string) int {
	m := phpNumeric.FindString(strings.TrimLeft(s, " \t\n\r\v\f"))
	if m == "" {
		return 0
	}
	if n, err := strconv.ParseInt(m, 10, 64); err == nil {
		return int(n)
	}
	f, err := strconv.ParseFloat(m, 64)
	switch {
	case err != nil && !errors.Is(err, strconv.ErrRange):
		return 0
	case math.IsNaN(f):
		return 0
	case f >= math.MaxInt64:
		return math.MaxInt64
	case f <= math.MinInt64:
		return math.MinInt64
	}
	return int(f)
}

// OPNsenseBackups is what OPNsense's Config::getBackups() lists of the file
// names in /conf/backup, newest first (by name): from 26.1 (dated) the
// config-<time>.xml files whose time is not after now; before, every
// config*.xml file.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:605 — `if ($bck_timestamp <= $now) {`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:610 — `rsort($backups);`
// upstream: opnsense-core 24.7 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:599 — `$backups = glob($target_dir . "config*.xml");` (25.7: 600), with no date filter
func OPNsenseBackups(names []string, now float64, dated bool) []string {
	var out []string
	for _, n := range names {
		if !dated {
			if strings.HasPrefix(n, "config") && strings.HasSuffix(n, ".xml") {
				out = append(out, n)
			}
			continue
		}
		ts, ok := strings.CutPrefix(n, "config-")
		if !ok || !strings.HasSuffix(ts, ".xml") {
			continue
		}
		// PHP's (float) of the name's middle: its leading number, else 0.
		v, _ := strconv.ParseFloat(phpNumeric.FindString(strings.TrimSuffix(ts, ".xml")), 64)
		if v <= now {
			out = append(out, n)
		}
	}
	slices.Sort(out)
	slices.Reverse(out)
	return out
}
