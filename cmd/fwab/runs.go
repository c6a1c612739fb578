package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"math"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
	"github.com/spf13/cobra"
)

type runsOptions struct {
	db      string
	json    bool
	testbed string // runs list --testbed
}

func newRunsCmd(io *streams) *cobra.Command {
	opts := &runsOptions{}
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List and show the runs in the results database",
	}
	addDBFlag(cmd.PersistentFlags(), &opts.db, "results `database`")
	cmd.PersistentFlags().BoolVar(&opts.json, "json", false, "print JSON")
	list := &cobra.Command{
		Use:   "list",
		Short: "List runs, newest first",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runRunsList(cmd.Context(), opts, io)
		},
	}
	list.Flags().StringVar(&opts.testbed, "testbed", "", "only the runs on `TESTBED`: a testbed as listed (name@fingerprint), or a target name for all its testbeds")
	cmd.AddCommand(list)
	cmd.AddCommand(&cobra.Command{
		Use:   "show RUN",
		Short: "Show one run: its settings, points, samples and events",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := strconv.ParseInt(args[0], 10, 64)
			if err != nil || id <= 0 {
				return usageErrorf("run %q: give the run's number, as 'fwab runs list' prints it", args[0])
			}
			return runRunsShow(cmd.Context(), opts, id, io)
		},
	})
	return cmd
}

// openResults opens an existing results database for reading: it never
// creates, grows or migrates one, and a file that is missing or is not a
// results database is bad input.
func openResults(ctx context.Context, path string) (*store.Store, error) {
	st, err := store.OpenReadOnly(ctx, path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, usageErrorf("no results database at %s: run a sweep first, or pass --db FILE", path)
	case err != nil:
		return nil, usageError{err}
	}
	return st, nil
}

// outputIsTerminal reports whether w is a terminal, where columns are aligned;
// elsewhere output is tab-separated for other tools.
func outputIsTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// runsTable writes tab-separated rows, aligned on a terminal.
type runsTable struct {
	tw    *tabwriter.Writer
	plain io.Writer
}

func newRunsTable(w io.Writer) *runsTable {
	if outputIsTerminal(w) {
		return &runsTable{tw: tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)}
	}
	return &runsTable{plain: w}
}

func (t *runsTable) row(cells ...string) {
	line := strings.Join(cells, "\t") + "\n"
	if t.tw != nil {
		io.WriteString(t.tw, line)
		return
	}
	io.WriteString(t.plain, line)
}

func (t *runsTable) flush() {
	if t.tw != nil {
		t.tw.Flush()
	}
}

type runJSON struct {
	ID            int64           `json:"id"`
	Created       time.Time       `json:"created"`
	Finished      *time.Time      `json:"finished,omitempty"`
	Status        string          `json:"status"`
	Target        string          `json:"target"`
	Testbed       string          `json:"testbed"`
	TargetInfo    json.RawMessage `json:"target_info"`
	Firmware      string          `json:"firmware"`
	Seed          int64           `json:"seed"`
	FwabVersion   string          `json:"fwab_version"`
	SpecHash      string          `json:"spec_hash"`
	ConfigHash    string          `json:"config_hash"`
	Spec          string          `json:"spec,omitempty"`
	Points        *int            `json:"points,omitempty"`
	Samples       *int            `json:"samples,omitempty"`
	FailedSamples *int            `json:"failed_samples,omitempty"`
}

func toRunJSON(r store.Run) runJSON {
	j := runJSON{ID: r.ID, Created: r.Created, Status: string(r.Status), Target: r.Target, Testbed: r.Testbed, TargetInfo: r.TargetInfo,
		Firmware: r.Firmware, Seed: r.Seed, FwabVersion: r.FwabVersion, SpecHash: r.SpecHash, ConfigHash: r.ConfigHash}
	if !r.Finished.IsZero() {
		f := r.Finished
		j.Finished = &f
	}
	return j
}

func runRunsList(ctx context.Context, opts *runsOptions, io *streams) error {
	s, err := openResults(ctx, opts.db)
	if err != nil {
		return err
	}
	defer s.Close()
	runs, err := s.Runs(ctx)
	if err != nil {
		return err
	}
	if opts.testbed != "" {
		runs = slices.DeleteFunc(runs, func(r store.RunSummary) bool { return !onTestbed(r.Run, opts.testbed) })
	}
	if opts.json {
		out := make([]runJSON, 0, len(runs))
		for _, r := range runs {
			j := toRunJSON(r.Run)
			j.Points, j.Samples, j.FailedSamples = &r.Points, &r.Samples, &r.FailedSamples
			out = append(out, j)
		}
		return writeJSON(io.Out, out)
	}
	if len(runs) == 0 {
		fmt.Fprintf(io.ErrOut, "no runs in %s\n", store.Redact(opts.db))
		return nil
	}
	t := newRunsTable(io.Out)
	t.row("RUN", "CREATED", "STATUS", "TESTBED", "FIRMWARE", "POINTS", "SAMPLES", "FAILED", "SPEC")
	for _, r := range runs {
		t.row(strconv.FormatInt(r.ID, 10), r.Created.UTC().Format(time.RFC3339), string(r.Status), testbedCell(r.Run), cellOrDash(r.Firmware),
			strconv.Itoa(r.Points), strconv.Itoa(r.Samples), strconv.Itoa(r.FailedSamples), shortHash(r.SpecHash))
	}
	t.flush()
	return nil
}

type pointJSON struct {
	Index  int               `json:"index"`
	Knobs  map[string]string `json:"knobs"`
	Status string            `json:"status"`
	Reason string            `json:"reason,omitempty"`
}

type sampleJSON struct {
	Point            int             `json:"point"`
	Probe            string          `json:"probe"`
	Round            int             `json:"round"`
	Repeat           int             `json:"repeat"`
	Direction        string          `json:"direction,omitempty"`
	Started          time.Time       `json:"started"`
	ElapsedMS        int64           `json:"elapsed_ms"`
	BitsPerSecond    *float64        `json:"bits_per_second"`
	Retransmits      *int64          `json:"retransmits"`
	ClientCPU        *float64        `json:"client_cpu"`
	ServerCPU        *float64        `json:"server_cpu"`
	RTTms            *float64        `json:"rtt_ms,omitempty"`
	JitterMS         *float64        `json:"jitter_ms,omitempty"`
	LostPercent      *float64        `json:"lost_percent,omitempty"`
	PingAvgMS        *float64        `json:"ping_avg_ms,omitempty"`
	PowerWatts       *float64        `json:"power_watts,omitempty"`
	EndpointCPUBound bool            `json:"endpoint_cpu_bound"`
	Failed           bool            `json:"failed"`
	Reason           string          `json:"reason,omitempty"`
	Warnings         []string        `json:"warnings,omitempty"`
	DUTSamples       int             `json:"dut_samples"`
	Raw              json.RawMessage `json:"raw,omitempty"`
}

type eventJSON struct {
	Time    time.Time `json:"time"`
	Kind    string    `json:"kind"`
	Point   *int      `json:"point,omitempty"`
	Message string    `json:"message"`
}

func knownFigure(v float64) *float64 {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return &v
}

func runRunsShow(ctx context.Context, opts *runsOptions, id int64, io *streams) error {
	s, err := openResults(ctx, opts.db)
	if err != nil {
		return err
	}
	defer s.Close()
	r, err := s.Run(ctx, id)
	if errors.Is(err, store.ErrNotFound) {
		return usageErrorf("no run %d in %s: 'fwab runs list' shows the runs there", id, store.Redact(opts.db))
	}
	if err != nil {
		return err
	}
	points, err := s.Points(ctx, id)
	if err != nil {
		return err
	}
	samples, err := s.Samples(ctx, id)
	if err != nil {
		return err
	}
	events, err := s.Events(ctx, id)
	if err != nil {
		return err
	}

	if opts.json {
		out := struct {
			Run     runJSON      `json:"run"`
			Points  []pointJSON  `json:"points"`
			Samples []sampleJSON `json:"samples"`
			Events  []eventJSON  `json:"events"`
		}{Run: toRunJSON(r), Points: []pointJSON{}, Samples: []sampleJSON{}, Events: []eventJSON{}}
		out.Run.Spec = r.Spec
		for _, p := range points {
			out.Points = append(out.Points, pointJSON{Index: p.Index, Knobs: p.Knobs, Status: string(p.Status), Reason: p.Reason})
		}
		for _, x := range samples {
			j := sampleJSON{Point: x.Point, Probe: x.Probe, Round: x.Round, Repeat: x.Repeat, Direction: x.Direction,
				Started: x.Started, ElapsedMS: x.Elapsed.Milliseconds(),
				BitsPerSecond: knownFigure(x.BitsPerSecond), ClientCPU: knownFigure(x.ClientCPU), ServerCPU: knownFigure(x.ServerCPU),
				RTTms: knownFigure(x.RTTms), JitterMS: knownFigure(x.JitterMS), LostPercent: knownFigure(x.LostPercent),
				PingAvgMS: knownFigure(x.PingAvgMS), PowerWatts: knownFigure(x.PowerWatts),
				EndpointCPUBound: x.EndpointCPUBound, Failed: x.Failed, Reason: x.Reason, Warnings: x.Warnings,
				DUTSamples: len(x.DUT), Raw: x.Raw}
			if x.Retransmits >= 0 {
				rt := x.Retransmits
				j.Retransmits = &rt
			}
			out.Samples = append(out.Samples, j)
		}
		for _, e := range events {
			j := eventJSON{Time: e.Time, Kind: e.Kind, Message: e.Message}
			if e.Point >= 0 {
				p := e.Point
				j.Point = &p
			}
			out.Events = append(out.Events, j)
		}
		return writeJSON(io.Out, out)
	}

	w := io.Out
	t := newRunsTable(w)
	t.row("run", strconv.FormatInt(r.ID, 10))
	t.row("status", string(r.Status))
	t.row("created", r.Created.UTC().Format(time.RFC3339))
	if !r.Finished.IsZero() {
		t.row("finished", r.Finished.UTC().Format(time.RFC3339))
	}
	t.row("target", r.Target)
	info, inv := splitInventory(r.TargetInfo)
	t.row("target info", string(info))
	if inv != nil {
		t.row("cpu", fmt.Sprintf("%s, %d cores", inv.CPUModel, inv.Cores))
		var pkgs []string
		for _, p := range inv.Packages {
			pkgs = append(pkgs, p.Name+" "+p.Version)
		}
		t.row("packages", cellOrDash(strings.Join(pkgs, ", ")))
		for _, n := range inv.NICs {
			t.row("nic "+n.Name, fmt.Sprintf("%s, %s", n.Driver, cellOrDash(n.Media)))
		}
		if inv.AESNI != nil {
			t.row("aes-ni", map[bool]string{true: "yes (the CPU has it)", false: "no"}[*inv.AESNI])
		}
		if len(inv.CryptoModules) > 0 {
			var mods []string
			for _, m := range slices.Sorted(maps.Keys(inv.CryptoModules)) {
				mods = append(mods, fmt.Sprintf("%s %s", m, map[bool]string{true: "loaded", false: "not loaded"}[inv.CryptoModules[m]]))
			}
			t.row("crypto modules", strings.Join(mods, ", "))
		}
		for _, w := range inv.LinkWarnings() {
			t.row("warning", w)
		}
	}
	t.row("firmware", cellOrDash(r.Firmware))
	t.row("seed", strconv.FormatInt(r.Seed, 10))
	t.row("fwab version", cellOrDash(r.FwabVersion))
	t.row("spec hash", r.SpecHash)
	t.row("config hash", cellOrDash(r.ConfigHash))
	t.flush()

	fmt.Fprintln(w)
	t = newRunsTable(w)
	t.row("POINT", "STATUS", "KNOBS", "REASON")
	for _, p := range points {
		t.row(strconv.Itoa(p.Index), string(p.Status), knobsCell(p.Knobs), cellOrDash(p.Reason))
	}
	t.flush()

	fmt.Fprintln(w)
	t = newRunsTable(w)
	t.row("POINT", "PROBE", "ROUND", "REPEAT", "DIR", "MBIT/S", "RETR", "CLIENT_CPU", "SERVER_CPU", "FLAGS", "REASON")
	for _, x := range samples {
		retr := "-"
		if x.Retransmits >= 0 {
			retr = strconv.FormatInt(x.Retransmits, 10)
		}
		var flags []string
		if x.Failed {
			flags = append(flags, "failed")
		}
		if x.EndpointCPUBound {
			flags = append(flags, "endpoint-cpu")
		}
		if x.Drift() {
			flags = append(flags, "drift-check") // the baseline again at the run's end, round -1
		}
		if len(x.Warnings) > 0 {
			flags = append(flags, fmt.Sprintf("%d-warnings", len(x.Warnings)))
		}
		t.row(strconv.Itoa(x.Point), x.Probe, strconv.Itoa(x.Round), strconv.Itoa(x.Repeat), cellOrDash(x.Direction),
			formatFigure(x.BitsPerSecond/1e6, 1), retr, formatFigure(x.ClientCPU, 0), formatFigure(x.ServerCPU, 0), cellOrDash(strings.Join(flags, ",")), cellOrDash(x.Reason))
	}
	t.flush()

	if len(events) > 0 {
		fmt.Fprintln(w)
		t = newRunsTable(w)
		t.row("TIME", "KIND", "POINT", "MESSAGE")
		for _, e := range events {
			point := "-"
			if e.Point >= 0 {
				point = strconv.Itoa(e.Point)
			}
			t.row(e.Time.UTC().Format(time.RFC3339), e.Kind, point, e.Message)
		}
		t.flush()
	}
	return nil
}

func knobsCell(knobs map[string]string) string {
	return cellOrDash(report.KnobsKey(knobs))
}

func formatFigure(v float64, prec int) string {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return "-"
	}
	return strconv.FormatFloat(v, 'f', prec, 64)
}

func cellOrDash(s string) string {
	if s == "" {
		return "-"
	}
	// A tab or newline inside a cell would break the columns.
	return strings.Map(func(r rune) rune {
		if r == '\t' || r == '\n' || r == '\r' {
			return ' '
		}
		return r
	}, s)
}

func shortHash(hash string) string {
	if len(hash) > 12 {
		return hash[:12]
	}
	return hash
}

// splitInventory takes the inventory a sweep recorded out of the target
// info, so that runs show prints it as rows; info without one is returned
// as stored.
func splitInventory(raw json.RawMessage) (json.RawMessage, *fwapi.Inventory) {
	var fields map[string]json.RawMessage
	if json.Unmarshal(raw, &fields) != nil || fields["inventory"] == nil {
		return raw, nil
	}
	var inv fwapi.Inventory
	if json.Unmarshal(fields["inventory"], &inv) != nil {
		return raw, nil
	}
	delete(fields, "inventory")
	rest, err := json.Marshal(fields)
	if err != nil {
		return raw, nil
	}
	return rest, &inv
}

// onTestbed says r ran on testbed: that testbed exactly, or, given a bare
// target name, any testbed of that name (and runs recorded before
// testbeds, which have only the name).
func onTestbed(r store.Run, testbed string) bool {
	if r.Testbed == testbed {
		return true
	}
	if strings.Contains(testbed, "@") {
		return false
	}
	name, _, _ := strings.Cut(r.Testbed, "@")
	return name == testbed || (r.Testbed == "" && r.Target == testbed)
}

// testbedCell is a run's testbed, or its target's name for a run recorded
// before testbeds.
func testbedCell(r store.Run) string {
	if r.Testbed == "" {
		return r.Target
	}
	return r.Testbed
}
