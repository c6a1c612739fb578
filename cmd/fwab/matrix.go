package main

import (
	"context"
	"fmt"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/matrix"
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
	seed                  uint64
}

func (o *matrixOptions) flags(cmd *cobra.Command) {
	addTargetFlags(cmd, &o.targetFlags)
	cmd.Flags().StringVar(&o.config, "config", "", "check against this config.xml instead of the target's (offline)")
	cmd.Flags().StringVar(&o.product, "product", "", "the product version the target runs; default: inferred from the config")
	cmd.Flags().Uint64Var(&o.seed, "seed", 1, "seed for the randomized order (a spec's own seed wins)")
}

// loadPlan parses the spec and plans it against the config: a file, or the
// target's own (read, never changed).
func loadPlan(ctx context.Context, io *streams, o *matrixOptions) (*matrix.Plan, error) {
	f, err := os.Open(o.file)
	if err != nil {
		return nil, usageError{err}
	}
	spec, err := matrix.Parse(f)
	f.Close()
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
	}
	var cfg *configxml.Config
	switch {
	case o.config != "":
		if cfg, err = loadConfigFile(io, o.config, o.product); err != nil {
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
	plan, err := matrix.NewPlan(spec, cfg, o.seed)
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", o.file, err)}
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
			plan, err := loadPlan(cmd.Context(), io, o)
			if err != nil {
				return err
			}
			fmt.Fprintf(io.Out, "%s: ok: %d points × %d repeats = %d steps, about %s\n",
				o.file, len(plan.Points), plan.Spec.Repeats, len(plan.Steps), plan.Estimate().Round(time.Minute))
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
			plan, err := loadPlan(cmd.Context(), io, o)
			if err != nil {
				return err
			}
			printPlan(io, plan)
			return nil
		},
	}
	o.flags(cmd)
	return cmd
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
		fmt.Fprintf(tw, "%d\t%d\t%d\t%s\t%s\n", i+1, st.Round+1, st.Point.Index, strings.Join(changes, " "), strings.Join(actions, ","))
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
	for _, a := range []configxml.Action{configxml.ActionFirmware, configxml.ActionInterfaces, configxml.ActionIDSRestart, configxml.ActionBlocklistUpdate, configxml.ActionIPsecRestart, configxml.ActionFilterReload, configxml.ActionNone} {
		if n := plan.ServiceActions()[a]; n > 0 {
			counts = append(counts, fmt.Sprintf("%d %s", n, a))
		}
	}
	fmt.Fprintf(io.Out, "\n%d steps, seed %d, order %s; service actions: %s; estimated duration %s\n",
		len(plan.Steps), plan.Seed, plan.Spec.Order, strings.Join(counts, ", "), plan.Estimate().Round(time.Second))
}
