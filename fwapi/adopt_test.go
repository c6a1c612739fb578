package fwapi

import (
	"strings"
	"testing"
)

const adoptBase = `<pfsense><revision><time>1</time></revision>
<system><hostname>fw</hostname></system>
<aliases><alias><name>office</name></alias></aliases>
<filter><rule><descr>user one</descr></rule><rule><descr>user two</descr></rule></filter>
<cron><item><command>/usr/bin/true</command></item></cron>
</pfsense>`

// TestPackageWriteAdoption: a package's own elements may change, with
// the revision and layout; anything else, the order of the user's rules
// included, is refused.
func TestPackageWriteAdoption(t *testing.T) {
	pfb := strings.NewReplacer(
		"<revision><time>1</time></revision>", "<revision><time>2</time><description>(system): pfBlockerNG</description></revision>",
		"<aliases>", "<aliases><alias><name>pfB_PRI1_v4</name></alias>",
		"<filter>", "<filter><rule><descr>pfB_PRI1_v4 auto rule</descr><created><username>Auto</username></created></rule>",
		"<system>", "<system><maximumtableentries>2000000</maximumtableentries>",
		"</cron>", "<item><command>/usr/local/bin/php /usr/local/www/pfblockerng/pfblockerng.php cron</command></item></cron>",
	).Replace(adoptBase)
	if err := packageWriteAdoption([]byte(adoptBase), []byte(pfb), pfBlockerNGOwns); err != nil {
		t.Errorf("pfBlockerNG's own changes refused: %v", err)
	}
	if err := packageWriteAdoption([]byte(adoptBase), []byte(pfb), suricataOwns); err == nil {
		t.Errorf("pfBlockerNG's changes adopted as Suricata's")
	}
	refused := map[string]string{
		"hostname":       strings.Replace(pfb, "<hostname>fw</hostname>", "<hostname>other</hostname>", 1),
		"user rules":     strings.Replace(pfb, "<rule><descr>user one</descr></rule><rule><descr>user two</descr></rule>", "<rule><descr>user two</descr></rule><rule><descr>user one</descr></rule>", 1),
		"user alias":     strings.Replace(pfb, "<name>office</name>", "<name>office2</name>", 1),
		"someone's cron": strings.Replace(pfb, "/usr/bin/true", "/usr/bin/false", 1),
		"rule disabled":  strings.Replace(pfb, "<descr>user two</descr>", "<descr>user two</descr><disabled/>", 1),
		"filter off":     strings.Replace(pfb, "<hostname>fw</hostname>", "<hostname>fw</hostname><disablefilter></disablefilter>", 1),
		"table limit cut": strings.Replace(strings.Replace(pfb, "<maximumtableentries>2000000</maximumtableentries>", "", 1),
			"<system>", "<system><maximumtableentries>1000</maximumtableentries>", 1),
	}
	for name, after := range refused {
		if err := packageWriteAdoption([]byte(adoptBase), []byte(after), pfBlockerNGOwns); err == nil {
			t.Errorf("%s changed with pfBlockerNG's save: adopted, want a refusal", name)
		}
	}
	sur := strings.Replace(adoptBase, "</cron>", "<item><minute>*/5</minute><command>/usr/bin/nice -n20 /usr/local/bin/php-cgi -f /usr/local/pkg/suricata/suricata_check_cron_misc.inc</command></item></cron>", 1)
	if err := packageWriteAdoption([]byte(adoptBase), []byte(sur), suricataOwns); err != nil {
		t.Errorf("Suricata's cron job refused: %v", err)
	}
}
