package fwapi

import (
	"errors"
	"fmt"
	"strings"

	"github.com/beevik/etree"
)

// Package services on pfSense save config.xml themselves while fwab
// applies a step: pfBlockerNG rebuilds its aliases, rules, table limit and
// cron job (write_config after each), and Suricata's sync installs its
// cron jobs through install_cron_job(). The driver reads config.xml
// around the service action and adopts the new file only when every
// difference lies in what the package owns; anything else fails the step.
//
// upstream: pfsense/FreeBSD-ports@70469728f9e1f7d75dbb7dbad220173cb3d450bb net/pfSense-pkg-pfBlockerNG/files/usr/local/www/pfblockerng/pfblockerng.php:176 — `case 'updateip':` re-parses the downloaded lists (update at 180 downloads only new or flagged feeds and re-parses nothing else)
// upstream: pfsense/FreeBSD-ports@c3bbacb4898b283ed1cb5cec5ea4885fff4f5f80 security/pfSense-pkg-suricata/files/usr/local/pkg/suricata/suricata.inc:804 — install_cron_job for the log-limit job on every sync where it differs
// upstream: not settled — the full list of pfBlockerNG's writes (pfblockerng.inc, read at pfsense/FreeBSD-ports@a5d60b052f64fb576e94286a563fd872091351df without line numbers); checked at run time: a write outside the owned parts is refused naming the first difference

// packageOwned says whether an element of config.xml belongs to a package
// (its changes are the package's own); before is the file as fwab left it.
type packageOwned func(e *etree.Element, before *etree.Document) bool

// pfBlockerNGOwns: the pfB_ aliases, the rules the package made (a pfB_
// description, created by "Auto"), the pfblockerng.php cron items, and
// the table limit it sets where none was set.
func pfBlockerNGOwns(e *etree.Element, before *etree.Document) bool {
	switch path := elementPath(e); path {
	case "aliases/alias":
		return strings.HasPrefix(childText(e, "name"), "pfB_")
	case "filter/rule":
		return strings.HasPrefix(childText(e, "descr"), "pfB_") && e.FindElement("created/username") != nil &&
			strings.TrimSpace(e.FindElement("created/username").Text()) == "Auto"
	case "cron/item":
		return strings.Contains(childText(e, "command"), "/usr/local/www/pfblockerng/pfblockerng.php ")
	case "system/maximumtableentries":
		prev := before.FindElement("/*/system/maximumtableentries")
		v := strings.TrimSpace(e.Text())
		return (prev == nil || strings.TrimSpace(prev.Text()) == "") && (v == "" || v == pfBlockerNGTableLimit)
	}
	return false
}

// pfBlockerNGTableLimit is the table limit pfBlockerNG sets where none is.
//
// upstream: not settled — pfblockerng.inc sets `maximumtableentries` to 2000000 when it is empty (pfsense/FreeBSD-ports@a5d60b052f64fb576e94286a563fd872091351df, read in the file index without line numbers); checked at run time: any other value, or a change of a set one, is refused
const pfBlockerNGTableLimit = "2000000"

// suricataOwns: the package's three cron jobs (log limit, rule updates,
// expiry of blocked hosts).
func suricataOwns(e *etree.Element, _ *etree.Document) bool {
	if elementPath(e) != "cron/item" {
		return false
	}
	cmd := childText(e, "command")
	return strings.Contains(cmd, "/usr/local/pkg/suricata/suricata_check_cron_misc.inc") ||
		strings.Contains(cmd, "/usr/local/pkg/suricata/suricata_check_for_rule_updates.php") ||
		strings.Contains(cmd, "pfctl -q -t snort2c -T expire")
}

// packageWriteAdoption checks that after differs from before only in what
// owns marks (and <revision>, and layout): both trees with the owned
// elements removed must be the same, in order, empty elements included
// (pfSense reads <disabled/>, <disablefilter/> by their presence).
func packageWriteAdoption(before, after []byte, owns packageOwned) error {
	ref, b, a := etree.NewDocument(), etree.NewDocument(), etree.NewDocument()
	if err := ref.ReadFromBytes(before); err != nil {
		return err
	}
	if err := b.ReadFromBytes(before); err != nil {
		return err
	}
	if err := a.ReadFromBytes(after); err != nil {
		return fmt.Errorf("the file the package saved does not parse: %w", err)
	}
	if b.Root() == nil || a.Root() == nil {
		return errors.New("config.xml has no root element")
	}
	dropOwned(b.Root(), ref, owns)
	dropOwned(a.Root(), ref, owns)
	if x, y := xmlCanonStrict(b.Root()), xmlCanonStrict(a.Root()); x != y {
		return fmt.Errorf("it changed more than the package's own elements (first difference near %q)", firstDifference(x, y))
	}
	return nil
}

// dropOwned removes every element under root that owns marks.
func dropOwned(root *etree.Element, before *etree.Document, owns packageOwned) {
	for _, c := range root.ChildElements() {
		if owns(c, before) {
			root.RemoveChild(c)
			continue
		}
		dropOwned(c, before, owns)
	}
}

// elementPath is e's path below the document's root element, "a/b".
func elementPath(e *etree.Element) string {
	var parts []string
	for x := e; x != nil && x.Parent() != nil && x.Parent().Parent() != nil; x = x.Parent() {
		parts = append([]string{x.Tag}, parts...)
	}
	return strings.Join(parts, "/")
}

func childText(e *etree.Element, tag string) string {
	if c := e.SelectElement(tag); c != nil {
		return strings.TrimSpace(c.Text())
	}
	return ""
}

// firstDifference is a short excerpt of y where it first departs from x.
func firstDifference(x, y string) string {
	i := 0
	for i < len(x) && i < len(y) && x[i] == y[i] {
		i++
	}
	start := max(0, i-40)
	end := min(len(y), i+40)
	return y[start:end]
}
