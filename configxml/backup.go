package configxml

import (
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
	el := c.Root().FindElement("system/backupcount")
	if el == nil {
		return 100
	}
	if n := phpIntval(el.Text()); n >= 0 {
		return n
	}
	return 100
}

// phpIntval is PHP's intval of a string: leading whitespace, an optional
// sign and the digits that follow; 0 when there are none.
func phpIntval(s string) int {
	s = strings.TrimLeft(s, " \t\n\r\v\f")
	end := 0
	if end < len(s) && (s[end] == '-' || s[end] == '+') {
		end++
	}
	for end < len(s) && s[end] >= '0' && s[end] <= '9' {
		end++
	}
	n, err := strconv.Atoi(s[:end])
	if err != nil {
		return 0
	}
	return n
}
