package main

import (
	"context"
	"fmt"

	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
)

type verifyOptions struct {
	targetFlags
	offline string
	product string
	asJSON  bool
}

func newVerifyCmd(io *streams) *cobra.Command {
	opts := &verifyOptions{}
	cmd := &cobra.Command{
		Use:   "verify (--target NAME | --offline config.xml)",
		Short: "Check that the firewall really does what its config says, and that the config is safe",
		Long: "verify reads the firewall's config.xml (what the GUI says) and its runtime state (ifconfig\n" +
			"offload flags, running Suricata and its mode, loaded rules, tables, SAs) and reports every\n" +
			"mismatch and every unsafe combination, above all inline IPS with an offload really on.\n" +
			"The config's lint rules run too. With --offline only the lint rules run, on a file.\n" +
			"Exit status 1 when any error is found.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			switch {
			case opts.offline != "" && opts.target != "":
				return usageErrorf("give --target or --offline, not both")
			case opts.offline == "" && opts.target == "":
				return usageErrorf("give --target NAME to check a firewall, or --offline config.xml to lint a file")
			}
			return runVerify(cmd.Context(), io, opts)
		},
	}
	addTargetFlags(cmd, &opts.targetFlags)
	cmd.Flags().StringVar(&opts.offline, "offline", "", "lint this config.xml file without a firewall")
	productFlag(cmd, &opts.product)
	cmd.Flags().BoolVar(&opts.asJSON, "json", false, "print the findings as JSON")
	return cmd
}

func runVerify(ctx context.Context, io *streams, opts *verifyOptions) error {
	var findings []configxml.Finding
	if opts.offline != "" {
		c, err := loadConfigFile(ctx, io, opts.offline, opts.product)
		if err != nil {
			return err
		}
		findings = configxml.Lint(c)
	} else {
		t, fw, err := opts.open(ctx, io)
		if err != nil {
			return err
		}
		defer fw.Close()
		data, err := fw.ReadConfig(ctx)
		if err != nil {
			return err
		}
		c, err := configxml.LoadBytes(data)
		if err != nil {
			return fmt.Errorf("target %s: its config.xml: %w", t.Name, err)
		}
		st, err := fw.RuntimeState(ctx)
		if err != nil {
			return err
		}
		product := opts.product
		if product == "" {
			product = st.Version
		}
		if product != "" {
			if err := c.SetProduct(product); err != nil {
				fmt.Fprintf(io.ErrOut, "note: version %q not understood (%v); linting with the version the config implies\n", product, err)
			}
		}
		findings = append(configxml.Lint(c), fwapi.VerifyRuntime(c, st)...)
	}
	if opts.asJSON {
		if findings == nil {
			findings = []configxml.Finding{}
		}
		if err := writeJSON(io.Out, findings); err != nil {
			return err
		}
	} else if len(findings) == 0 {
		fmt.Fprintln(io.Out, "ok: no mismatch, no unsafe combination")
	} else {
		tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "SEVERITY\tRULE\tNAME\tMESSAGE")
		for _, f := range findings {
			fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", f.Severity, f.Rule, f.Name, f.Message)
		}
		tw.Flush()
	}
	if configxml.HasErrors(findings) {
		return silentError{exitFailure}
	}
	return nil
}
