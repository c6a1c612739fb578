package fwapi_test

import (
	"strings"
	"testing"

	"github.com/fwab/fwab/fwapi"
)

func FuzzParseIfconfig(f *testing.F) {
	f.Add(transcript(f, "ifconfig -a"))
	f.Add("em0: flags=0\n\toptions=3<RXCSUM,TXCSUM>\n")
	f.Fuzz(func(t *testing.T, in string) {
		ifs, err := fwapi.ParseIfconfig(in)
		if err != nil {
			return
		}
		for _, s := range ifs {
			if s.Name == "" {
				t.Errorf("ParseIfconfig(%q) returned an unnamed interface", in)
			}
			for _, o := range s.Options {
				if o == "" || strings.ContainsAny(o, ",<>") {
					t.Errorf("ParseIfconfig(%q) option %q", in, o)
				}
			}
		}
	})
}

func FuzzParsePfctl(f *testing.F) {
	f.Add(transcript(f, "pfctl -sr"))
	f.Add(transcript(f, "pfctl -sn"))
	f.Fuzz(func(t *testing.T, in string) {
		if r, err := fwapi.ParsePfctlRules(in); err == nil && (r.Generated > r.Rules || r.Rules > strings.Count(in, "\n")+1) {
			t.Errorf("ParsePfctlRules(%q) = %+v", in, r)
		}
		if n, err := fwapi.ParsePfctlNAT(in); err == nil && len(n.Outbound) > n.Rules {
			t.Errorf("ParsePfctlNAT(%q) = %+v", in, n)
		}
		fwapi.ParsePfctlTableCounts(in)
	})
}

func FuzzParseSwanctlSAs(f *testing.F) {
	f.Add(transcript(f, "swanctl --list-sas"))
	f.Fuzz(func(t *testing.T, in string) {
		sas, err := fwapi.ParseSwanctlSAs(in)
		if err != nil {
			return
		}
		for _, sa := range sas {
			if sa.State == "" {
				t.Errorf("ParseSwanctlSAs(%q): SA %q without state", in, sa.Name)
			}
		}
	})
}

func FuzzCPUTimes(f *testing.F) {
	f.Add("100 0 50 10 840", "160 0 70 20 850")
	f.Add("0 0 0 0 0 1 1 1 1 1", "0 0 0 0 0 1 1 1 1 1")
	f.Fuzz(func(t *testing.T, a, b string) {
		before, err1 := fwapi.ParseCPUTimes(a)
		after, err2 := fwapi.ParseCPUTimes(b)
		if err1 != nil || err2 != nil {
			return
		}
		per, total, err := fwapi.CPUBusy(before, after)
		if err != nil {
			return
		}
		for _, p := range append(per, total) {
			if p < 0 || p > 100 || p != p {
				t.Errorf("CPUBusy(%q, %q) = %v, %v: outside 0..100", a, b, per, total)
			}
		}
	})
}

func FuzzParseNetstatAndPs(f *testing.F) {
	f.Add(transcript(f, "netstat -m"))
	f.Add(transcript(f, "ps ax -o pid,command"))
	f.Fuzz(func(t *testing.T, in string) {
		if n, err := fwapi.ParseNetstatMbufs(in); err == nil && n < 0 {
			t.Errorf("ParseNetstatMbufs(%q) = %d", in, n)
		}
		if ids, err := fwapi.ParseSuricataProcesses(in); err == nil {
			for _, i := range ids {
				if i.Interface == "" || (i.Mode != "ids" && i.Mode != "ips-inline") {
					t.Errorf("ParseSuricataProcesses(%q) = %+v", in, i)
				}
			}
		}
	})
}
