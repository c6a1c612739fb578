package fwapi

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/probe"
)

// RuntimeState reads what the firewall is really doing. Through the API:
// the version, Suricata (IDS settings plus service status) and IPsec SAs.
// Through SSH, when a Runner is set: interface offload flags (ifconfig), loaded
// filter and NAT rules and pf tables (pfctl). Without SSH those fields stay
// empty.
func (o *OPNsense) RuntimeState(ctx context.Context) (RuntimeState, error) {
	v, err := o.detectVersion(ctx)
	if err != nil {
		return RuntimeState{}, err
	}
	st := RuntimeState{Version: v.Raw}
	cfg, err := o.ReadConfig(ctx)
	if err != nil {
		return RuntimeState{}, err
	}
	devs, _, err := opnConfigFacts(cfg)
	if err != nil {
		return RuntimeState{}, err
	}
	if st.IDS, err = o.idsState(ctx, v, devs); err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
	}
	if st.IPsec, err = o.ipsecState(ctx); err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
	}
	if o.ssh == nil {
		return st, nil
	}
	wrap := func(err error) error { return fmt.Errorf("opnsense: runtime state: %w", err) }
	out, err := o.shell(ctx, "ifconfig -a", nil)
	if err != nil {
		return RuntimeState{}, wrap(err)
	}
	ifs, err := ParseIfconfig(string(out))
	if err != nil {
		return RuntimeState{}, wrap(err)
	}
	st.Interfaces = make(map[string]IfaceState, len(ifs))
	for _, i := range ifs {
		st.Interfaces[i.Name] = i
	}
	if !o.opts.OffloadSSHInterface && !v.hasInterfaceSettings() {
		if st.Management, err = managementDevices(ctx, o.shellString, nil); err != nil {
			return RuntimeState{}, wrap(err)
		}
	}
	if out, err = o.shell(ctx, "pfctl -si", nil); err != nil {
		return RuntimeState{}, wrap(err)
	}
	if st.PF, err = ParsePfctlStatus(string(out)); err != nil {
		return RuntimeState{}, wrap(err)
	}
	if out, err = o.shell(ctx, "pfctl -sr", nil); err != nil {
		return RuntimeState{}, wrap(err)
	}
	rules, err := ParsePfctlRules(string(out))
	if err != nil {
		return RuntimeState{}, wrap(err)
	}
	st.FilterRules = rules.Rules
	debug, err := o.shell(ctx, "cat "+opnRulesDebug, nil)
	if err != nil {
		return RuntimeState{}, wrap(err)
	}
	st.GeneratedRules = countDescribedRules(string(out), parseRulesDebug(string(debug)), generatedRuleLabel)
	if out, err = o.shell(ctx, "pfctl -sn", nil); err != nil {
		return RuntimeState{}, wrap(err)
	}
	nat, err := ParsePfctlNAT(string(out))
	if err != nil {
		return RuntimeState{}, wrap(err)
	}
	st.NATRules, st.NATOutbound = nat.Rules, nat.Outbound
	if out, err = o.shell(ctx, tableCountCmd, nil); err != nil {
		return RuntimeState{}, wrap(err)
	}
	if st.Tables, err = ParsePfctlTableCounts(string(out)); err != nil {
		return RuntimeState{}, wrap(err)
	}
	if out, err = o.shell(ctx, cryptoModulesCmd(configxml.OPNsense), nil); err != nil {
		return RuntimeState{}, wrap(err)
	}
	if st.CryptoModules, err = ParseCryptoModules(configxml.OPNsense, string(out)); err != nil {
		return RuntimeState{}, wrap(err)
	}
	return st, nil
}

// idsState reads Suricata's settings and service status. The settings answer
// is the model as OPNsense's getAction prints it: option fields are maps of
// {value, selected}; plain strings are accepted too. UNVERIFIED: the
// option-map form is how OPNsense's model getters print option fields in
// general; the reference notes document only {"ids":{"general":{...}}}.
func (o *OPNsense) idsState(ctx context.Context, v opnVersion, devs map[string]string) ([]IDSInstance, error) {
	var settings struct {
		IDS struct {
			General map[string]json.RawMessage `json:"general"`
		} `json:"ids"`
	}
	if err := o.api.callJSON(ctx, http.MethodGet, "/api/ids/settings/get", nil, &settings); err != nil {
		return nil, err
	}
	g := settings.IDS.General
	if !slices.Contains(selectedValues(g["enabled"]), "1") {
		return nil, nil
	}
	var status struct {
		Status string `json:"status"`
	}
	if err := o.api.callJSON(ctx, http.MethodGet, "/api/ids/service/status", nil, &status); err != nil {
		return nil, err
	}
	if strings.ToLower(status.Status) != "running" {
		return nil, nil
	}
	mode := "ids"
	if v.idsUsesModeField() {
		// pcap = IDS; netmap = inline IPS; divert = IPS through pf divert-to,
		// also inline (the packet waits for the verdict).
		switch m := firstOf(selectedValues(g["mode"])); m {
		case "netmap", "divert":
			mode = "ips-inline"
		case "pcap", "":
		default:
			return nil, fmt.Errorf("ids settings: unknown mode %q", m)
		}
	} else if slices.Contains(selectedValues(g["ips"]), "1") {
		mode = "ips-inline" // ≤25.7: ips=1 is netmap
	}
	rules := RulesUnknown
	if o.ssh != nil {
		if n, err := o.idsRules(ctx); err == nil {
			rules = n
		} else {
			o.log.Warn("ids rules not counted", "err", err)
		}
	}
	var out []IDSInstance
	for _, key := range selectedValues(g["interfaces"]) {
		dev := devs[key]
		if dev == "" {
			dev = key
		}
		out = append(out, IDSInstance{Interface: dev, Mode: mode, Rules: rules})
	}
	return out, nil
}

// opnInstalledRulesCmd counts the rules in force: OPNsense's Suricata (one
// for every interface) loads every file `ids install rules` wrote into
// opnsense.rules, and a rule is a line that starts with an action
// (disabled rules are written commented out). Each file is counted on its
// own: installRules.py ends none with a newline, so files run together
// would join one file's last rule to the next one's first. Without the
// folder, nothing was ever installed: no count, 0.
//
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/service/templates/OPNsense/IDS/suricata.yaml:419 — `default-rule-path: /usr/local/etc/suricata/opnsense.rules`, with installed_rules.yaml (every installed file) included at 428
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/scripts/suricata/installRules.py:70 — a disabled rule is written `rule = ('#%s' % rule[i:])`
// upstream: opnsense/core@f95e81516ee0e2fb184f06bb7f858d3dd45da9cc src/opnsense/scripts/suricata/installRules.py:89 — each file written `'\n'.join(output_data)`, without a last newline
const opnInstalledRulesCmd = "for f in /usr/local/etc/suricata/opnsense.rules/*.rules; do [ -f \"$f\" ] && grep -cE '^(alert|drop|reject|rejectsrc|rejectdst|rejectboth|pass)[[:space:]]' \"$f\"; done; true"

// idsRules reads how many rules OPNsense's Suricata has in force.
func (o *OPNsense) idsRules(ctx context.Context) (int, error) {
	out, err := o.shellString(ctx, opnInstalledRulesCmd)
	if err != nil {
		return 0, fmt.Errorf("ids rules: %w", err)
	}
	total := 0
	for _, f := range strings.Fields(out) {
		n, err := strconv.Atoi(f)
		if err != nil {
			return 0, fmt.Errorf("ids rules: %q is not a count", f)
		}
		total += n
	}
	return total, nil
}

// selectedValues reads an OPNsense model field: "a,b" as a plain string, or
// {"a":{"value":..,"selected":1},...} as getAction prints option fields.
func selectedValues(raw json.RawMessage) []string {
	if len(raw) == 0 {
		return nil
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		var out []string
		for _, p := range strings.Split(s, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		return out
	}
	var m map[string]struct {
		Selected json.RawMessage `json:"selected"`
	}
	if json.Unmarshal(raw, &m) != nil {
		return nil
	}
	var out []string
	for k, v := range m {
		if k == "" {
			continue
		}
		switch strings.Trim(string(v.Selected), `"`) {
		case "1", "true":
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func firstOf(s []string) string {
	if len(s) == 0 {
		return ""
	}
	return s[0]
}

// ipsecState lists established child SAs through the sessions API: a row
// per connection, named as swanctl.conf names it (a uuid, or con<ikeid> for
// a legacy tunnel), then its child SAs by that name.
//
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:76 — `$record['name'] = $conn;`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:80 — `$record['connected'] = !empty($record['sas']);`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:115 — search_phase2 reads the posted `id`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/controllers/OPNsense/IPsec/Api/SessionsController.php:141 — a child row is vici's child-sa as it is (`$record = $csa;`): name, state, encr-alg, encr-keysize, integ-alg, bytes-in, bytes-out
func (o *OPNsense) ipsecState(ctx context.Context) ([]IPsecSA, error) {
	var p1 struct {
		Rows []struct {
			Name      string `json:"name"`
			Connected bool   `json:"connected"`
		} `json:"rows"`
	}
	err := o.api.callJSON(ctx, http.MethodGet, "/api/ipsec/sessions/search_phase1", nil, &p1)
	var ae *APIError
	if errors.As(err, &ae) && ae.StatusCode == http.StatusNotFound {
		return nil, nil // no IPsec sessions API in this release
	}
	if err != nil {
		return nil, err
	}
	var out []IPsecSA
	for _, r := range p1.Rows {
		if !r.Connected {
			continue
		}
		var p2 struct {
			Rows []map[string]any `json:"rows"`
		}
		if err := o.api.callJSON(ctx, http.MethodPost, "/api/ipsec/sessions/search_phase2", map[string]string{"id": r.Name}, &p2); err != nil {
			return nil, err
		}
		for _, c := range p2.Rows {
			sa := IPsecSA{IKE: r.Name, Name: anyString(c["name"]), State: anyString(c["state"])}
			sa.Encr = anyString(c["encr-alg"])
			if ks := anyString(c["encr-keysize"]); ks != "" && sa.Encr != "" {
				sa.Encr += "-" + ks
			}
			sa.Integ = anyString(c["integ-alg"])
			sa.BytesIn, _ = strconv.ParseUint(anyString(c["bytes-in"]), 10, 64)
			sa.BytesOut, _ = strconv.ParseUint(anyString(c["bytes-out"]), 10, 64)
			sa.Proposals = strings.Trim(strings.Join([]string{sa.Encr, sa.Integ}, "/"), "/")
			out = append(out, sa)
		}
	}
	return out, nil
}

func anyString(v any) string {
	switch x := v.(type) {
	case string:
		return x
	case float64:
		return strconv.FormatFloat(x, 'f', -1, 64)
	case bool:
		return strconv.FormatBool(x)
	}
	return ""
}

// Metrics samples CPU (kern.cp_times one second apart), memory, temperature
// and mbufs with sysctl and netstat over SSH: the OPNsense API has no
// one-shot equivalent for CPU load.
func (o *OPNsense) Metrics(ctx context.Context) (probe.DUTMetrics, error) {
	if o.ssh == nil {
		return probe.DUTMetrics{}, errors.New("opnsense: metrics: need a shell on the firewall (sysctl): add an ssh section to the target")
	}
	wrap := func(err error) error { return fmt.Errorf("opnsense: metrics: %w", err) }
	m := probe.DUTMetrics{Time: o.opts.Now()}
	out, err := o.shell(ctx, "sysctl -n kern.cp_times && sleep 1 && sysctl -n kern.cp_times", nil)
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	lines := strings.Split(strings.TrimSpace(string(out)), "\n")
	if len(lines) != 2 {
		return probe.DUTMetrics{}, wrap(fmt.Errorf("kern.cp_times: want two samples, got %q", clip(out, 200)))
	}
	before, err := ParseCPUTimes(lines[0])
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	after, err := ParseCPUTimes(lines[1])
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	if m.PerCPU, m.CPUPercent, err = CPUBusy(before, after); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	names := []string{"vm.stats.vm.v_page_count", "vm.stats.vm.v_free_count"}
	if out, err = o.shell(ctx, "sysctl -n "+strings.Join(names, " "), nil); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	vals, err := ParseSysctlValues(string(out), names...)
	if err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	total, e1 := strconv.ParseFloat(vals[names[0]], 64)
	free, e2 := strconv.ParseFloat(vals[names[1]], 64)
	if e1 != nil || e2 != nil || total <= 0 || free > total {
		return probe.DUTMetrics{}, wrap(fmt.Errorf("page counts %q/%q are not usable", vals[names[1]], vals[names[0]]))
	}
	m.MemUsedPct = 100 * (total - free) / total
	// Not every board has a sensor: a failure leaves the temperature unknown.
	if out, err := o.shell(ctx, "sysctl -n dev.cpu.0.temperature", nil); err == nil {
		m.TempCelsius, _ = ParseTemperature(string(out))
	}
	if out, err = o.shell(ctx, "netstat -m", nil); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	if m.MbufsInUse, err = ParseNetstatMbufs(string(out)); err != nil {
		return probe.DUTMetrics{}, wrap(err)
	}
	return m, nil
}

// opnRulesDebug is the ruleset OPNsense generates and loads.
// upstream: opnsense-core 26.1 src/etc/inc/filter.inc:172 — `new \OPNsense\Core\FileObject('/tmp/rules.debug'`; loaded at :420 (24.7: 161; 26.7: 172)
const opnRulesDebug = "/tmp/rules.debug"

// parseRulesDebug maps each pf label in OPNsense's generated ruleset to the
// rule's description: a legacy rule's label is a hash of the rule without
// its description (Util::calcRuleHash), an MVC rule's its uuid, and the
// description follows the rule on its line as a comment. This is how
// upstream's own tools read it.
//
// upstream: opnsense-core 26.1 src/etc/inc/filter.lib.inc:692 — `$rule['label'] = OPNsense\Firewall\Util::calcRuleHash($rule);`
// upstream: opnsense-core 26.1 src/opnsense/mvc/app/library/OPNsense/Firewall/FilterRule.php:70 — `'descr' => 'parseComment'` after the label
// upstream: opnsense/core@559d8f31c24271a48d8a06bbde7b6ea8a4fd5a6a src/opnsense/scripts/filter/lib/states.py:70 — fetch_rule_labels: `line.split(' label ')[-1]`, label between the first quotes, the rest stripped of `# : ` is the description
func parseRulesDebug(text string) map[string]string {
	out := map[string]string{}
	for _, line := range strings.Split(text, "\n") {
		i := strings.LastIndex(line, " label ")
		if i < 0 {
			continue
		}
		rest := line[i+len(" label "):]
		first := strings.IndexByte(rest, '"')
		if first < 0 {
			continue
		}
		end := strings.IndexByte(rest[first+1:], '"')
		if end < 0 {
			continue
		}
		label := rest[first+1 : first+1+end]
		descr := strings.Trim(strings.TrimSpace(rest[first+1+end+1:]), "# :")
		if _, seen := out[label]; !seen || descr != "" {
			out[label] = descr
		}
	}
	return out
}

// countDescribedRules counts the loaded rules (pfctl -sr) whose label the
// generated ruleset describes with a description starting with prefix.
// upstream: not settled — pfctl's output format (FreeBSD base); checked at run time by matching only the `label "…"` of each pass/block line
func countDescribedRules(pfctl string, descr map[string]string, prefix string) int {
	n := 0
	for _, line := range strings.Split(pfctl, "\n") {
		line = strings.TrimSpace(line)
		word, _, _ := strings.Cut(line, " ")
		if word != "pass" && word != "block" && word != "match" {
			continue
		}
		i := strings.Index(line, ` label "`)
		if i < 0 {
			continue
		}
		rest := line[i+len(` label "`):]
		j := strings.IndexByte(rest, '"')
		if j < 0 {
			continue
		}
		if d, ok := descr[rest[:j]]; ok && strings.HasPrefix(d, prefix) {
			n++
		}
	}
	return n
}
