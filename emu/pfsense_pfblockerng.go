package emu

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/beevik/etree"

	"github.com/fwab/fwab/configxml"
)

// What pfBlockerNG's CLI does (pfblockerng.php update, updateip, cron), as
// the lab emulates it: the package rebuilds its pfB_ aliases and the rules
// it owns, sets pf's table limit when none is set, keeps its cron job, and
// saves all of that with write_config() (so config.xml changes under
// fwab: a new <revision>, the old file backed up); then it reloads the
// filter and loads its tables. Disabled, it removes its aliases, rules
// and job, and saves too.
//
// upstream: pfsense/FreeBSD-ports@70469728f9e1f7d75dbb7dbad220173cb3d450bb net/pfSense-pkg-pfBlockerNG/files/usr/local/www/pfblockerng/pfblockerng.php:176 — `case 'updateip':` (fwab's verb) then sync_package_pfblockerng; `update` at 180
// upstream: not settled — pfblockerng.inc's write_config() calls (aliases, pfB_ rules, maximumtableentries, cron items) are read in pfsense/FreeBSD-ports@a5d60b052f64fb576e94286a563fd872091351df without line numbers (the file is not in the upstream copy); checked at run time by fwapi's package-write adoption, which accepts only pfB_-owned changes

// Names the emulated package uses.
const (
	pfbAlias      = "pfB_PRI1_v4"
	pfbRuleDescr  = "pfB_PRI1_v4 auto rule"
	pfbRuleTrack  = "1770000000"
	pfbCronCmd    = "/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php cron >> /var/log/pfblockerng/pfblockerng.log 2>&1"
	pfbTableLimit = "2000000"
)

// pfBlockerNG runs pfblockerng.php VERB.
func (e *Emulator) pfBlockerNG(ctx context.Context, c *call, verb string) error {
	switch verb {
	case "update", "updateip", "cron":
	default:
		return c.errorf(1, "pfblockerng.php: %s is not emulated (update, updateip, cron)", verb)
	}
	e.did(configxml.ActionBlocklistUpdate)
	e.mu.Lock()
	defer e.mu.Unlock()
	root, err := e.configForApply()
	if err != nil {
		return c.errorf(1, "pfblockerng.php: %v", err)
	}
	e.blocklist = BlocklistEnabled(root)
	fmt.Fprintf(c.stdout, "\n UPDATE PROCESS START [ %s ]\n\n", time.Now().UTC().Format("01/02/06 15:04:05"))
	desc := "pfBlockerNG: saving Firewall rules"
	if !e.blocklist {
		desc = "pfBlockerNG: removing Firewall rules"
	}
	if err := e.pfWriteConfigLocked(desc, func(doc *etree.Document) { pfbOwnedEdit(doc, e.blocklist) }); err != nil {
		return c.errorf(1, "pfblockerng.php: write_config: %v", err)
	}
	if root, err = e.configForApply(); err != nil {
		return c.errorf(1, "pfblockerng.php: %v", err)
	}
	if err := e.applyFilter(ctx, root); err != nil {
		return c.errorf(1, "pfblockerng.php: filter reload: %v", err)
	}
	if err := e.applySlowdown(ctx); err != nil {
		return c.errorf(1, "pfblockerng.php: %v", err)
	}
	if e.blocklist {
		size := e.BlocklistSize
		if size == 0 {
			size = DefaultBlocklistSize
		}
		fmt.Fprintf(c.stdout, "===[  Aliastables / Rules  ]================================\n\n %s\t\t[ %d ] entries\n\n", BlocklistSet, size)
	} else {
		fmt.Fprintln(c.stdout, " pfBlockerNG is disabled: removing its tables and rules.")
	}
	fmt.Fprintf(c.stdout, "\n UPDATE PROCESS ENDED [ %s ]\n", time.Now().UTC().Format("01/02/06 15:04:05"))
	return nil
}

// pfbOwnedEdit is the package's own part of config.xml, made to match
// on (its alias first among the aliases, its block rule first on the
// WAN, the table limit, its cron job) or removed.
func pfbOwnedEdit(doc *etree.Document, on bool) {
	root := doc.Root()
	if aliases := root.SelectElement("aliases"); aliases != nil {
		for _, a := range aliases.SelectElements("alias") {
			if strings.HasPrefix(text(a, "name"), "pfB_") {
				aliases.RemoveChild(a)
			}
		}
	}
	if filter := root.SelectElement("filter"); filter != nil {
		for _, r := range filter.SelectElements("rule") {
			if strings.HasPrefix(text(r, "descr"), "pfB_") {
				filter.RemoveChild(r)
			}
		}
	}
	removeCronItems(doc, "pfblockerng.php cron")
	if !on {
		return
	}
	aliases := ensurePath(root, "aliases")
	a := etree.NewElement("alias")
	for _, kv := range [][2]string{{"name", pfbAlias}, {"type", "urltable"}, {"url", "https://127.0.0.1/pfB_PRI1_v4.txt"}, {"updatefreq", "32"}, {"descr", "pfBlockerNG auto alias"}} {
		a.CreateElement(kv[0]).SetText(kv[1])
	}
	aliases.InsertChildAt(0, a)
	filter := ensurePath(root, "filter")
	r := etree.NewElement("rule")
	for _, kv := range [][2]string{{"type", "block"}, {"interface", "wan"}, {"ipprotocol", "inet"}, {"tracker", pfbRuleTrack}, {"descr", pfbRuleDescr}} {
		r.CreateElement(kv[0]).SetText(kv[1])
	}
	r.CreateElement("source").CreateElement("address").SetText(pfbAlias)
	r.CreateElement("destination").CreateElement("any")
	r.CreateElement("created").CreateElement("username").SetText("Auto")
	first := 0
	if rules := filter.SelectElements("rule"); len(rules) > 0 {
		first = rules[0].Index()
	}
	filter.InsertChildAt(first, r)
	if t := ensurePath(root, "system/maximumtableentries"); strings.TrimSpace(t.Text()) == "" {
		t.SetText(pfbTableLimit)
	}
	ensureCronItem(doc, cronItem{minute: "0", hour: "*", mday: "*", month: "*", wday: "*", who: "root", command: pfbCronCmd})
}
