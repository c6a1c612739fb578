package lab

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// pfWriteConfigLocked is pfSense's write_config() as package code calls it
// (the caller holds e.mu): the old file is backed up under its own
// revision time, the edit is applied, <revision> records the system as
// the writer, and the new file replaces config.xml; the config cache is
// dropped so the next apply reads the new file. It writes even when the
// edit changes nothing but <revision>, as the packages sometimes do.
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:660 — `backup_config();` before the write
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1046 — backup_config: `'/backup/config-' . $baktime . '.xml'`, the OLD file under its own revision time
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:667 — `$config['revision'] = make_config_revision_entry($desc);`
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:669 — `$lockkey = lock('config', LOCK_EX);` around the write
// upstream: not settled — backup.cache (a PHP serialize() of the backups) is not emulated: fwab never reads it; checked at run time by nothing, as fwab does not depend on it
func (e *Emulator) pfWriteConfigLocked(desc string, edit func(doc *etree.Document)) error {
	if e.opnsense() {
		return errors.New("pfWriteConfig: not a pfSense")
	}
	path := e.path("/conf/config.xml")
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(old); err != nil {
		return fmt.Errorf("config.xml: %w", err)
	}
	baktime := "0"
	if t := doc.FindElement("/pfsense/revision/time"); t != nil && strings.TrimSpace(t.Text()) != "" {
		baktime = strings.TrimSpace(t.Text())
	}
	if err := os.MkdirAll(e.path("/conf/backup"), 0o755); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(e.path("/conf/backup/config-"+baktime+".xml"), old, 0o644); err != nil {
		return err
	}
	edit(doc)
	rev := ensurePath(doc.Root(), "revision")
	for _, kv := range [][2]string{{"time", strconv.FormatInt(time.Now().Unix(), 10)}, {"description", "(system): " + desc}, {"username", "(system)"}} {
		ensurePath(rev, kv[0]).SetText(kv[1])
	}
	doc.Indent(2)
	out, err := doc.WriteToBytes()
	if err != nil {
		return err
	}
	if _, err := parseConfig(out, configxml.PfSense); err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, out, 0o644); err != nil {
		return err
	}
	e.logger().Info("package saved config.xml", "description", desc)
	if err := os.Remove(e.path("/tmp/config.cache")); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	return nil
}

// cronItem is one <cron><item> as pfSense's install_cron_job() writes it.
type cronItem struct{ minute, hour, mday, month, wday, who, command string }

// ensureCronItem adds item at the end of <cron> unless an item with its
// command exists already: what install_cron_job() does for a new job.
//
// upstream: pfsense 2.7.2 src/etc/inc/services.inc:5064 — install_cron_job: `$cron_items[] = $cron_item;` appended at the end
func ensureCronItem(doc *etree.Document, item cronItem) {
	cron := ensurePath(doc.Root(), "cron")
	for _, it := range cron.SelectElements("item") {
		if c := it.SelectElement("command"); c != nil && strings.TrimSpace(c.Text()) == item.command {
			return
		}
	}
	it := cron.CreateElement("item")
	for _, kv := range [][2]string{{"minute", item.minute}, {"hour", item.hour}, {"mday", item.mday}, {"month", item.month}, {"wday", item.wday}, {"who", item.who}, {"command", item.command}} {
		it.CreateElement(kv[0]).SetText(kv[1])
	}
}

// removeCronItems removes the <cron><item>s whose command contains s:
// install_cron_job($s, false).
func removeCronItems(doc *etree.Document, s string) {
	cron := doc.FindElement("/pfsense/cron")
	if cron == nil {
		return
	}
	for _, it := range cron.SelectElements("item") {
		if c := it.SelectElement("command"); c != nil && strings.Contains(c.Text(), s) {
			cron.RemoveChild(it)
		}
	}
}
