package emu

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/fwab/fwab/configxml"
)

func TestPlanIDS(t *testing.T) {
	tests := []struct {
		name    string
		knobs   []string
		want    IDSPlan
		wantErr string
	}{
		{name: "factory config runs nothing", want: IDSPlan{}},
		{name: "ids on lan", knobs: []string{"ids@lan=ids"}, want: IDSPlan{configxml.IDSAlert: {"igb1"}}},
		{name: "inline on lan", knobs: []string{"ids@lan=ips-inline"}, want: IDSPlan{configxml.IDSInlineIPS: {"igb1"}}},
		{name: "legacy on wan", knobs: []string{"ids@wan=ips-legacy"}, want: IDSPlan{configxml.IDSLegacyIPS: {"igb0"}}},
		{name: "one engine per mode", knobs: []string{"ids@lan=ids", "ids@wan=ids"}, want: IDSPlan{configxml.IDSAlert: {"igb0", "igb1"}}},
		{name: "inline and ids", knobs: []string{"ids@lan=ips-inline", "ids@wan=ids"}, want: IDSPlan{configxml.IDSInlineIPS: {"igb1"}, configxml.IDSAlert: {"igb0"}}},
		{name: "back to off", knobs: []string{"ids@lan=ids", "ids@lan=off"}, want: IDSPlan{}},
		{name: "inline and legacy at once", knobs: []string{"ids@lan=ips-inline", "ids@wan=ips-legacy"}, wantErr: "one of the two blocking modes at a time"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := configxml.LoadBytes(DefaultConfig())
			if err != nil {
				t.Fatal(err)
			}
			for _, k := range tt.knobs {
				if err := c.SetAll([]string{k}); err != nil {
					t.Fatalf("SetAll(%s): %v", k, err)
				}
			}
			c, err = configxml.LoadBytes(c.Bytes())
			if err != nil {
				t.Fatal(err)
			}
			got, err := PlanIDS(c, testPorts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("PlanIDS() error = %v, want one containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("PlanIDS(): %v", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PlanIDS() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}
