package fwapi

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"
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
	out, err := o.shell(ctx, "ifconfig -a", nil)
	if err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
	}
	st.Interfaces = opnIfconfigOptions(out)
	out, err = o.shell(ctx, "pfctl -sr", nil)
	if err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
	}
	st.FilterRules = len(nonEmptyLines(out))
	out, err = o.shell(ctx, "pfctl -sn", nil)
	if err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
	}
	st.NATOutbound = nonEmptyLines(out)
	st.NATRules = len(st.NATOutbound)
	if st.Tables, err = o.pfTables(ctx); err != nil {
		return RuntimeState{}, fmt.Errorf("opnsense: runtime state: %w", err)
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
	var out []IDSInstance
	for _, key := range selectedValues(g["interfaces"]) {
		dev := devs[key]
		if dev == "" {
			dev = key
		}
		out = append(out, IDSInstance{Interface: dev, Mode: mode})
	}
	return out, nil
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

// ipsecState lists established child SAs through the sessions API.
// UNVERIFIED: the routes /api/ipsec/sessions/search_phase1 and search_phase2
// (with the phase 1 name posted as "id") and the row field names below are
// read from OPNsense's SessionsController as remembered, not from the
// reference notes; check them on a real 24.7+ box.
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
			sa := IPsecSA{Name: anyString(c["name"]), State: anyString(c["state"])}
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

// opnIfconfigOptions reads FreeBSD ifconfig output into offload flags per
// interface: a line "igb0: flags=..." starts an interface, "options=8100b8<A,B>"
// lists its options.
func opnIfconfigOptions(out []byte) map[string]IfaceState {
	res := map[string]IfaceState{}
	var cur string
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		line := sc.Text()
		if line == "" {
			continue
		}
		if line[0] != ' ' && line[0] != '\t' {
			name, _, ok := strings.Cut(line, ":")
			if !ok {
				cur = ""
				continue
			}
			cur = name
			res[cur] = IfaceState{Name: cur}
			continue
		}
		t := strings.TrimSpace(line)
		if cur == "" || !strings.HasPrefix(t, "options=") {
			continue
		}
		open, close := strings.IndexByte(t, '<'), strings.LastIndexByte(t, '>')
		if open < 0 || close < open {
			continue
		}
		s := res[cur]
		for _, w := range strings.Split(t[open+1:close], ",") {
			if w = strings.TrimSpace(w); w != "" && !strings.ContainsAny(w, "<>") {
				s.Options = append(s.Options, w)
			}
		}
		res[cur] = s
	}
	return res
}

func nonEmptyLines(b []byte) []string {
	var out []string
	for _, l := range strings.Split(string(b), "\n") {
		if strings.TrimSpace(l) != "" {
			out = append(out, l)
		}
	}
	return out
}

// pfTableNameRe is what a pf table name looks like; names come from the
// firewall and only names that match reach a command line.
var pfTableNameRe = regexp.MustCompile(`^[A-Za-z0-9_.\-]{1,64}$`)

func (o *OPNsense) pfTables(ctx context.Context) (map[string]int, error) {
	out, err := o.shell(ctx, "pfctl -s Tables", nil)
	if err != nil {
		return nil, err
	}
	tables := map[string]int{}
	for _, name := range nonEmptyLines(out) {
		name = strings.TrimSpace(name)
		if !pfTableNameRe.MatchString(name) {
			return nil, fmt.Errorf("pf table name %q is not a plain name: refusing to put it in a shell command", name)
		}
		n, err := o.shell(ctx, "pfctl -t "+name+" -T show", nil)
		if err != nil {
			return nil, err
		}
		tables[name] = len(nonEmptyLines(n))
	}
	return tables, nil
}

// Metrics samples CPU (kern.cp_times over one second), memory, temperature
// and mbufs with sysctl and netstat over SSH: the OPNsense API has no
// one-shot equivalent for CPU load.
func (o *OPNsense) Metrics(ctx context.Context) (Metrics, error) {
	if o.ssh == nil {
		return Metrics{}, errors.New("opnsense: metrics: need a shell on the firewall (sysctl): add an ssh section to the target")
	}
	m := Metrics{Time: o.opts.Now()}
	out, err := o.shell(ctx, "sysctl -n kern.cp_times && sleep 1 && sysctl -n kern.cp_times", nil)
	if err != nil {
		return Metrics{}, fmt.Errorf("opnsense: metrics: %w", err)
	}
	lines := nonEmptyLines(out)
	if len(lines) != 2 {
		return Metrics{}, fmt.Errorf("opnsense: metrics: kern.cp_times: want two samples, got %q", clip(out, 200))
	}
	if m.CPUPercent, m.PerCPU, err = cpuBusy(lines[0], lines[1]); err != nil {
		return Metrics{}, fmt.Errorf("opnsense: metrics: %w", err)
	}
	out, err = o.shell(ctx, "sysctl -n vm.stats.vm.v_page_count vm.stats.vm.v_free_count", nil)
	if err != nil {
		return Metrics{}, fmt.Errorf("opnsense: metrics: %w", err)
	}
	if f := strings.Fields(string(out)); len(f) == 2 {
		total, e1 := strconv.ParseFloat(f[0], 64)
		free, e2 := strconv.ParseFloat(f[1], 64)
		if e1 == nil && e2 == nil && total > 0 {
			m.MemUsedPct = 100 * (total - free) / total
		}
	}
	// Not every board has a sensor: a failure leaves the temperature unknown.
	if out, err := o.shell(ctx, "sysctl -n dev.cpu.0.temperature", nil); err == nil {
		m.TempCelsius, _ = strconv.ParseFloat(strings.TrimSuffix(strings.TrimSpace(string(out)), "C"), 64)
	}
	if out, err := o.shell(ctx, "netstat -m", nil); err == nil {
		// "1024/2301/3325 mbufs in use (current/cache/total)"
		for _, l := range nonEmptyLines(out) {
			if strings.Contains(l, "mbufs in use") {
				cur, _, _ := strings.Cut(strings.TrimSpace(l), "/")
				m.MbufsInUse, _ = strconv.ParseInt(cur, 10, 64)
				break
			}
		}
	}
	return m, nil
}

// cpuBusy computes busy percentages from two kern.cp_times samples (five
// counters per CPU: user nice sys intr idle).
func cpuBusy(a, b string) (total float64, per []float64, err error) {
	fa, fb := strings.Fields(a), strings.Fields(b)
	if len(fa) == 0 || len(fa)%5 != 0 || len(fa) != len(fb) {
		return 0, nil, fmt.Errorf("kern.cp_times: want 5 counters per CPU in both samples, got %d and %d", len(fa), len(fb))
	}
	var allBusy, allSum float64
	for cpu := 0; cpu < len(fa)/5; cpu++ {
		var busy, sum float64
		for i := 0; i < 5; i++ {
			x, e1 := strconv.ParseUint(fa[cpu*5+i], 10, 64)
			y, e2 := strconv.ParseUint(fb[cpu*5+i], 10, 64)
			if e1 != nil || e2 != nil || y < x {
				return 0, nil, fmt.Errorf("kern.cp_times: bad counter %q -> %q", fa[cpu*5+i], fb[cpu*5+i])
			}
			d := float64(y - x)
			sum += d
			if i != 4 {
				busy += d
			}
		}
		p := 0.0
		if sum > 0 {
			p = 100 * busy / sum
		}
		per = append(per, p)
		allBusy += busy
		allSum += sum
	}
	if allSum > 0 {
		total = 100 * allBusy / allSum
	}
	return total, per, nil
}
