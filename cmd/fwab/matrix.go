package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/matrix"
	"github.com/fwab/fwab/store"
)

func newMatrixCmd(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "matrix",
		Short: "Check a matrix spec and show the plan a sweep would run",
	}
	cmd.AddCommand(newMatrixCheckCmd(io), newMatrixPlanCmd(io))
	return cmd
}

type matrixOptions struct {
	targetFlags
	file, config, product string
	db                    string
	seed                  uint64
	seedSet               bool
	json                  bool
}

func (o *matrixOptions) flags(cmd *cobra.Command) {
	addTargetFlags(cmd, &o.targetFlags)
	cmd.Flags().StringVar(&o.config, "config", "", "check against this config.xml instead of the target's (offline)")
	cmd.Flags().StringVar(&o.product, "product", "", "the product version the target runs; default: inferred from the config")
	cmd.Flags().Uint64Var(&o.seed, "seed", 0, "seed for the randomized order (default: from the spec's hash, as sweep uses; a spec's own seed wins)")
	cmd.Flags().BoolVar(&o.json, "json", false, "print JSON")
	addDBFlag(cmd.Flags(), &o.db, "results `database` whose latest run on the target gives measured apply costs for the estimate (read-only)")
}

// loadPlan parses the spec and plans it against the config: a file, or the
// target's own (read, never changed).
func loadPlan(ctx context.Context, io *streams, o *matrixOptions) (*matrix.Plan, error) {
	spec, err := readSpec(o.file)
	if err != nil {
		return nil, err
	}
	if !o.seedSet {
		o.seed = spec.DefaultSeed()
	}
	var cfg *configxml.Config
	switch {
	case o.config != "":
		if cfg, err = loadConfigFile(ctx, io, o.config, o.product); err != nil {
			return nil, err
		}
		if err := o.checkOfflineFlavor(spec.Target, o.config, cfg); err != nil {
			return nil, err
		}
	default:
		if o.target == "" {
			o.target = spec.Target
		}
		if o.target == "" {
			return nil, usageErrorf("give --target (or target: in the spec), or --config with a config.xml")
		}
		_, fw, err := o.open(ctx, io)
		if err != nil {
			return nil, err
		}
		defer fw.Close()
		info, err := fw.Info(ctx)
		if err != nil {
			return nil, err
		}
		data, err := fw.ReadConfig(ctx)
		if err != nil {
			return nil, err
		}
		if cfg, err = configxml.LoadBytes(data); err != nil {
			return nil, fmt.Errorf("the firewall's config.xml: %w", err)
		}
		version := info.Version
		if o.product != "" {
			version = o.product
		}
		if err := cfg.SetProduct(version); err != nil {
			return nil, usageError{err}
		}
	}
	plan, err := matrix.NewPlan(ctx, spec, cfg, o.seed)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	// The sweep will need the tunnel's key: its file is checked now.
	if _, err := tunnelPSK(spec); err != nil {
		return nil, err
	}
	if o.config == "" {
		plan.Measured = measuredCosts(ctx, o.db, o.target)
	}
	return plan, nil
}

func newMatrixCheckCmd(io *streams) *cobra.Command {
	o := &matrixOptions{}
	cmd := &cobra.Command{
		Use:   "check FILE [--target NAME | --config CONFIG]",
		Short: "Validate a matrix spec against a target's flavor and version, changing nothing",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			o.seedSet = cmd.Flags().Changed("seed")
			plan, err := loadPlan(cmd.Context(), io, o)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(io.Out, summarizePlan(o.file, plan, false))
			}
			printWarnings(io, o.file, plan)
			est := plan.Estimate()
			if r := plan.Spec.RepeatsSpec; r.Width > 0 && r.Max > r.Min {
				// Adaptive rounds measure only the points still too wide (and
				// the baseline): every point in every round is the bound.
				most := est * time.Duration(r.Max) / time.Duration(r.Min)
				fmt.Fprintf(io.Out, "%s: ok: %d points × %d–%d repeats (adaptive, until ±%g %%) = %d steps at the minimum, about %s (at most about %s)\n",
					o.file, len(plan.Points), r.Min, r.Max, r.Width, len(plan.Steps), est.Round(time.Minute), most.Round(time.Minute))
				return nil
			}
			drift := ""
			if plan.DriftCheck() {
				drift = " + the drift check"
			}
			fmt.Fprintf(io.Out, "%s: ok: %d points × %d repeats%s = %d steps, about %s\n",
				o.file, len(plan.Points), plan.Spec.Repeats, drift, len(plan.Steps), est.Round(time.Minute))
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}

func newMatrixPlanCmd(io *streams) *cobra.Command {
	o := &matrixOptions{}
	cmd := &cobra.Command{
		Use:   "plan FILE [--target NAME | --config CONFIG]",
		Short: "Print the ordered plan: every step's knob changes and service actions",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			o.file = args[0]
			o.seedSet = cmd.Flags().Changed("seed")
			plan, err := loadPlan(cmd.Context(), io, o)
			if err != nil {
				return err
			}
			if o.json {
				return writeJSON(io.Out, summarizePlan(o.file, plan, true))
			}
			printWarnings(io, o.file, plan)
			printPlan(io, plan)
			return nil
		},
	}
	o.flags(cmd)
	return cmd
}

// printWarnings prints what the plan of spec file warns of, on stderr.
func printWarnings(io *streams, file string, plan *matrix.Plan) {
	for _, w := range plan.Warnings() {
		fmt.Fprintf(io.ErrOut, "%s: warning: %s\n", file, w)
	}
}

// planJSON is a plan as `matrix check --json` (without steps) and
// `matrix plan --json` print it.
type planJSON struct {
	Spec            string         `json:"spec"`
	Points          []planPoint    `json:"points"`
	Repeats         int            `json:"repeats"`
	Order           string         `json:"order"`
	Seed            uint64         `json:"seed"`
	ServiceActions  map[string]int `json:"service_actions"`
	EstimateSeconds float64        `json:"estimate_seconds"`
	// Adaptive repeats: the most rounds, the interval width aimed at (%),
	// and the estimate if every point ran every round.
	RepeatsMax         int        `json:"repeats_max,omitempty"`
	WidthPct           float64    `json:"width_pct,omitempty"`
	EstimateMaxSeconds float64    `json:"estimate_max_seconds,omitempty"`
	Warnings           []string   `json:"warnings,omitempty"`
	Steps              []planStep `json:"steps,omitempty"`
}

type planPoint struct {
	Index    int               `json:"index"`
	Knobs    map[string]string `json:"knobs"`
	Baseline bool              `json:"baseline,omitempty"`
}

type planStep struct {
	Round      int      `json:"round"`                 // 1-based; 0 for the drift check
	DriftCheck bool     `json:"drift_check,omitempty"` // the baseline again at the run's end
	Point      int      `json:"point"`
	Changes    []string `json:"changes"`
	Actions    []string `json:"actions"`
}

func summarizePlan(file string, plan *matrix.Plan, withSteps bool) planJSON {
	out := planJSON{Spec: file, Repeats: plan.Spec.Repeats, Order: string(plan.Spec.Order), Seed: plan.Seed,
		ServiceActions: map[string]int{}, EstimateSeconds: plan.Estimate().Seconds(), Warnings: plan.Warnings()}
	if r := plan.Spec.RepeatsSpec; r.Width > 0 && r.Max > r.Min {
		out.RepeatsMax, out.WidthPct = r.Max, r.Width
		out.EstimateMaxSeconds = out.EstimateSeconds * float64(r.Max) / float64(r.Min)
	}
	for _, p := range plan.Points {
		knobs := map[string]string{}
		for _, kv := range p.Values {
			knobs[kv.Knob] = kv.Value
		}
		out.Points = append(out.Points, planPoint{Index: p.Index, Knobs: knobs, Baseline: p == plan.Baseline})
	}
	for a, n := range plan.ServiceActions() {
		if n > 0 {
			out.ServiceActions[string(a)] = n
		}
	}
	if withSteps {
		for _, st := range plan.Steps {
			ps := planStep{Round: st.Round + 1, Point: st.Point.Index, Changes: []string{}, Actions: []string{}}
			if st.Round == store.DriftRound {
				ps.Round, ps.DriftCheck = 0, true
			}
			for _, c := range st.Changes {
				ps.Changes = append(ps.Changes, c.Knob+"="+c.To)
			}
			for _, a := range st.Actions {
				ps.Actions = append(ps.Actions, string(a))
			}
			out.Steps = append(out.Steps, ps)
		}
	}
	return out
}

func printPlan(io *streams, plan *matrix.Plan) {
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tROUND\tPOINT\tCHANGES\tACTIONS")
	for i, st := range plan.Steps {
		var changes, actions []string
		for _, c := range st.Changes {
			changes = append(changes, c.Knob+"="+c.To)
		}
		for _, a := range st.Actions {
			actions = append(actions, string(a))
		}
		if len(changes) == 0 {
			changes = []string{"-"}
			actions = []string{"-"}
		}
		round := strconv.Itoa(st.Round + 1)
		if st.Round == store.DriftRound {
			round = "drift"
		}
		fmt.Fprintf(tw, "%d\t%s\t%d\t%s\t%s\n", i+1, round, st.Point.Index, strings.Join(changes, " "), strings.Join(actions, ","))
	}
	tw.Flush()
	fmt.Fprintln(io.Out)
	tw = tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "POINT\tKNOBS")
	for _, p := range plan.Points {
		mark := ""
		if p == plan.Baseline {
			mark = " (baseline)"
		}
		fmt.Fprintf(tw, "%d\t%s%s\n", p.Index, p.Key(), mark)
	}
	tw.Flush()
	var counts []string
	for _, a := range []configxml.Action{configxml.ActionFirmware, configxml.ActionReboot, configxml.ActionReloadAll, configxml.ActionInterfaces, configxml.ActionIDSRestart, configxml.ActionBlocklistUpdate, configxml.ActionIPsecRestart, configxml.ActionFilterReload, configxml.ActionNone} {
		if n := plan.ServiceActions()[a]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a))
		}
	}
	var probes []string
	for _, pr := range plan.Spec.ProbeRuns() {
		probes = append(probes, pr.Name)
	}
	fmt.Fprintf(io.Out, "\nprobes at every step: %s\n", strings.Join(probes, ", "))
	fmt.Fprintf(io.Out, "%d steps, seed %d, order %s; service actions: %s; estimated duration %s\n",
		len(plan.Steps), plan.Seed, plan.Spec.Order, strings.Join(counts, ", "), plan.Estimate().Round(time.Second))
}
