package emu

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"regexp"
	"slices"
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
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:686 — `cleanup_backupcache(true);`: backup.cache written anew, old backups trimmed
//
// When lock() returns no handle (a directory in the lock file's place),
// 2.6 and 2.7 write unlocked; master backs up, then refuses the write with
// a notice its callers do not check, and so does the emulated 2.8.
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:675 — `if (!safe_write_file(` follows lock() whatever it returned
// upstream: pfsense/pfsense@9363ac5b8651a1c7a333180425ce7719070f95f9 src/etc/inc/config.lib.inc:1255 — `if (!isset($lockkey)) { return gettext("Config contents could not be saved. Could not create temporary file!"); }`, after backup_config() at :615
// upstream: not settled — whether 2.8.0 has it (pfsense/pfsense 735b76815b, 2024-08-08, is on master; no RELENG_2_8 branch is mirrored); checked at run time: fwab's own install refuses an unlocked write on every version
func (e *Emulator) pfWriteConfigLocked(desc string, edit func(doc *etree.Document)) error {
	if e.opnsense() {
		return errors.New("pfWriteConfig: not a pfSense")
	}
	path := e.path("/conf/config.xml")
	if e.pfLockUnopenable() {
		if e.atLeast(2, 8) {
			old, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			e.logger().Warn("package save refused: Config contents could not be saved. Could not create temporary file!", "description", desc)
			return e.pfBackupConfigLocked(old)
		}
	} else {
		unlock, err := e.flocks.lock(context.Background(), pfConfigLock, -1)
		if err != nil {
			return err
		}
		defer unlock()
	}
	old, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(old); err != nil {
		return fmt.Errorf("config.xml: %w", err)
	}
	if err := e.pfBackupConfigLocked(old); err != nil {
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
	return e.pfCleanupBackupsLocked()
}

// pfBackupConfigLocked is backup_config(): the config about to be
// replaced, old, is copied to /conf/backup/config-<its revision time>.xml
// (0 without one).
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1046 — `$bakfilename = g_get('cf_conf_path') . '/backup/config-' . $baktime . '.xml';`
func (e *Emulator) pfBackupConfigLocked(old []byte) error {
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
	return atomicfile.WriteFile(e.path("/conf/backup/config-"+baktime+".xml"), old, 0o644)
}

// pfCleanupBackupsLocked is cleanup_backupcache(): the newest backups,
// as many as <system><backupcount> says (30 by default), stay and the
// others go; backup.cache, a PHP serialize() of each kept backup's time,
// description, version and size, newest first, is written anew.
//
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:920 — `$revisions = intval(is_numericint($config['system']['backupcount']) ? $config['system']['backupcount'] : g_get('default_config_backup_count'));`
// upstream: pfsense/pfsense@9363ac5b8651a1c7a333180425ce7719070f95f9 src/etc/inc/globals.inc:104 — `'default_config_backup_count' => 30,`
// upstream: pfsense 2.7.2 src/etc/inc/config.lib.inc:1000 — `fwrite($bakout, serialize($tocache));`
func (e *Emulator) pfCleanupBackupsLocked() error {
	dir := e.path("/conf/backup")
	names, err := filepath.Glob(dir + "/config-*.xml")
	if err != nil {
		return err
	}
	var baks []backupMeta
	seen := map[string]bool{}
	for _, n := range names {
		t, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimPrefix(filepath.Base(n), "config-"), ".xml"), 10, 64)
		if err != nil {
			continue
		}
		fi, err := os.Stat(n)
		if err != nil {
			return err
		}
		b, ok := e.pfBackups[n]
		if !ok || b.size != fi.Size() || !b.mod.Equal(fi.ModTime()) {
			// Read once per file: a sweep's configs run to megabytes.
			data, err := os.ReadFile(n)
			if err != nil {
				return err
			}
			b = backupMeta{time: t, name: n, descr: "Unknown", ver: "?", size: fi.Size(), mod: fi.ModTime()}
			if m := backupDescr.FindSubmatch(data); m != nil && len(bytes.TrimSpace(m[1])) > 0 {
				b.descr = string(bytes.TrimSpace(m[1]))
			}
			if m := backupVersion.FindSubmatch(data); m != nil && len(bytes.TrimSpace(m[1])) > 0 {
				b.ver = string(bytes.TrimSpace(m[1]))
			}
			if e.pfBackups == nil {
				e.pfBackups = map[string]backupMeta{}
			}
			e.pfBackups[n] = b
		}
		seen[n] = true
		baks = append(baks, b)
	}
	maps.DeleteFunc(e.pfBackups, func(n string, _ backupMeta) bool { return !seen[n] })
	slices.SortFunc(baks, func(a, b backupMeta) int { return cmp.Compare(b.time, a.time) })
	keep := 30
	if c, err := os.ReadFile(e.path("/conf/config.xml")); err == nil {
		if m := backupCount.FindSubmatch(c); m != nil {
			if n, err := strconv.Atoi(string(m[1])); err == nil && n >= 0 {
				keep = n
			}
		}
	}
	if len(baks) > keep {
		for _, b := range baks[keep:] {
			if err := os.Remove(b.name); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		}
		baks = baks[:keep]
	}
	var out strings.Builder
	fmt.Fprintf(&out, "a:%d:{", len(baks))
	for _, b := range baks {
		fmt.Fprintf(&out, "i:%d;a:3:{s:11:\"description\";%ss:7:\"version\";%ss:8:\"filesize\";i:%d;}", b.time, phpString(b.descr), phpString(b.ver), b.size)
	}
	out.WriteString("}")
	return atomicfile.WriteFile(dir+"/backup.cache", []byte(out.String()), 0o644)
}

// backupMeta is what backup.cache records of one backup, and the file's
// size and time, so that a backup is read once.
type backupMeta struct {
	time             int64
	name, descr, ver string
	size             int64
	mod              time.Time
}

// What cleanup_backupcache reads of a backup and of the running config,
// found without parsing files that run to megabytes.
var (
	backupDescr   = regexp.MustCompile(`(?s)<revision>.*?<description>(?:<!\[CDATA\[)?([^<\]]*)`)
	backupVersion = regexp.MustCompile(`<version>([^<]*)</version>`)
	backupCount   = regexp.MustCompile(`<backupcount>\s*(\d+)\s*</backupcount>`)
)

// phpString is a string as PHP's serialize() writes it (its length in
// bytes), with the closing semicolon.
func phpString(s string) string {
	return fmt.Sprintf("s:%d:\"%s\";", len(s), s)
}

// pfInstallConfigPHP is fwab's install of a staged config (fwapi
// pfInstallConfig): write_config()'s steps with pfSense's own functions.
var pfInstallConfigPHP = regexp.MustCompile(`^require_once\("config\.inc"\); \$l = lock\("config", LOCK_EX\); if \(!is_resource\(\$l\)\) \{ fwrite\(STDERR, "([^"]*)"\); exit\(([0-9]+)\); \} \$h = @file_get_contents\("([^"]+)"\); if \(is_string\(\$h\) && strncmp\(\$h, "rollback", 8\) == 0\) \{ unlock\(\$l\); fwrite\(STDERR, \$h\); exit\(([0-9]+)\); \} \$c = parse_xml_config\("/conf/config\.xml", array\(\$g\["xml_rootobj"\], "pfsense"\)\); if \(is_array\(\$c\)\) \{ \$config = \$c; \} backup_config\(\); \$ok = rename\("([^"]+)", "([^"]+)"\); @unlink\("([^"]+)"\); cleanup_backupcache\(true\); unlock\(\$l\); exit\(\$ok \? 0 : 1\);$`)

// pfLockUnopenable says pfSense's lock("config") would return no handle:
// it cannot open its lock file, a directory in its place here.
//
// upstream: pfsense/pfsense@9363ac5b86 src/etc/inc/util.inc:792 — `if ($fp = fopen("{$g['tmp_path']}/{$lock}.lock", "w")) {`, with no else: lock() returns nothing
func (e *Emulator) pfLockUnopenable() bool {
	fi, err := os.Stat(e.path(pfConfigLock))
	return err == nil && fi.IsDir()
}

// phpExit is a script's way out: the line it writes on stderr (with PHP's
// \n escapes as written) and its exit status.
type phpExit struct {
	line string
	exit int
}

// pfInstallConfig runs it: under the emulator's lock and the flock on
// /tmp/config.lock, which the packages' own saves take too
// (pfWriteConfigLocked), as pfSense's lock('config') serialises
// write_config() callers (and fwab's restores take with lockf). With the
// lock held it first reads the rollback's claim file: one that begins
// "rollback" ends the script with its exit status and the line on stderr.
func (e *Emulator) pfInstallConfig(c *call, unlocked phpExit, claim string, refused int, src, dst, cache string) error {
	e.mu.Lock()
	defer e.mu.Unlock()
	// lock() returned no handle: the script ends with unlocked's line and
	// status.
	if e.pfLockUnopenable() {
		fmt.Fprint(c.stderr, strings.ReplaceAll(unlocked.line, `\n`, "\n"))
		return status(uint8(unlocked.exit))
	}
	unlock, err := e.flocks.lock(context.Background(), pfConfigLock, -1)
	if err != nil {
		return c.errorf(255, "php: %v", err)
	}
	defer unlock()
	if h, err := os.ReadFile(e.path(claim)); err == nil && bytes.HasPrefix(h, []byte("rollback")) {
		c.stderr.Write(h)
		return status(uint8(refused))
	}
	old, err := os.ReadFile(e.path(dst))
	if err != nil {
		return c.errorf(255, "php: %v", err)
	}
	if err := e.pfBackupConfigLocked(old); err != nil {
		return c.errorf(255, "php: %v", err)
	}
	if err := os.Rename(e.path(src), e.path(dst)); err != nil {
		fmt.Fprintf(c.stderr, "PHP Warning:  rename(%s,%s): No such file or directory\n", src, dst)
		return c.errorf(1, "")
	}
	if err := os.Remove(e.path(cache)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return c.errorf(255, "php: %v", err)
	}
	if err := e.pfCleanupBackupsLocked(); err != nil {
		return c.errorf(255, "php: %v", err)
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
