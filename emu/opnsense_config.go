package emu

// What OPNsense's Config::save() does, as the emulator reproduces it for the
// product's own saves (the API's, the IDS cron's, the filter rollback's):
// under the flock on /conf/config.xml, the new file, a backup of it, and then
// the backups past <system><backupcount> removed.

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

// editConfig changes config.xml as OPNsense's Config::save() does: the
// <revision> block records who and when, the new file replaces the old
// atomically, and then the NEW file is copied to
// /conf/backup/config-<time>.xml.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:755 — `fwrite($this->config_file_handle, (string)$this);` first
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:758 — `$backup_filename = $backup ? $this->backup($time) : null;` after
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:586 — backup() copies `file_get_contents($this->config_file)`, the new file
func (e *Emulator) editConfig(who string, edit func(doc *etree.Document) error) error {
	unlock, err := e.flocks.lock(context.Background(), opnConfigFile, -1)
	if err != nil {
		return err
	}
	defer unlock()
	e.mu.Lock()
	defer e.mu.Unlock()
	path := e.path("/conf/config.xml")
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc := etree.NewDocument()
	if err := doc.ReadFromBytes(data); err != nil {
		return fmt.Errorf("config.xml: %w", err)
	}
	if doc.Root() == nil || doc.Root().Tag != "opnsense" {
		return errors.New("config.xml: not an OPNsense config")
	}
	if err := edit(doc); err != nil {
		return err
	}
	now := time.Now()
	rev := ensurePath(doc.Root(), "revision")
	for _, kv := range [][2]string{{"username", who}, {"time", fmt.Sprintf("%d.%02d", now.Unix(), now.Nanosecond()/10000000)}, {"description", "fwab lab: " + who}} {
		ensurePath(rev, kv[0]).SetText(kv[1])
	}
	out, err := doc.WriteToBytes()
	if err != nil {
		return err
	}
	saved, err := parseConfig(out, configxml.OPNsense)
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFile(path, out, 0o640); err != nil {
		return err
	}
	backup := e.path(fmt.Sprintf("/conf/backup/config-%d.%04d.xml", now.Unix(), now.Nanosecond()/100000))
	if err := atomicfile.WriteFile(backup, out, 0o640); err != nil {
		return err
	}
	return e.opnCleanupBackups(saved.OPNsenseBackupCount(), now)
}

// opnCleanupBackups is Config::cleanupBackups(): the backups of
// /conf/backup as the running version lists them (configxml.OPNsenseBackups:
// from 26.1 those dated after now left out), newest first by name, all past
// the first keep removed.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:775 — `$this->cleanupBackups();` after the save, the lock released
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:730 — `if ($cnt > $revisions) {` then `@unlink($filename);`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Core/Config.php:605 — getBackups() takes `if ($bck_timestamp <= $now) {` (configxml.OPNsenseBackups)
func (e *Emulator) opnCleanupBackups(keep int, now time.Time) error {
	paths, err := filepath.Glob(e.path("/conf/backup") + "/config*.xml")
	if err != nil {
		return err
	}
	names := make([]string, len(paths))
	for i, p := range paths {
		names[i] = filepath.Base(p)
	}
	backups := configxml.OPNsenseBackups(names, float64(now.UnixNano())/1e9, e.atLeast(26, 1))
	var errs []error
	for _, n := range backups[min(keep, len(backups)):] {
		if err := os.Remove(filepath.Join(e.path("/conf/backup"), n)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// firstBackup gives a new emulated OPNsense the backup its first save left
// (the installer's or wizard's Config::save()): a copy of config.xml, unless
// /conf/backup holds a config-*.xml already.
// upstream: not settled — whether a fresh install has a backup; checked at run time by OPNsense.ReadConfig, which reads /conf/config.xml over SSH and refuses an empty download
func (e *Emulator) firstBackup() error {
	if !e.opnsense() {
		return nil
	}
	if names, _ := filepath.Glob(e.path("/conf/backup") + "/config-*.xml"); len(names) > 0 {
		return nil
	}
	data, err := os.ReadFile(e.path("/conf/config.xml"))
	if err != nil {
		return err
	}
	now := time.Now()
	return atomicfile.WriteFile(e.path(fmt.Sprintf("/conf/backup/config-%d.%04d.xml", now.Unix(), now.Nanosecond()/100000)), data, 0o640)
}
