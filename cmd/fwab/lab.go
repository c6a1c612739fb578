package main

import (
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/lab"
)

type labOptions struct {
	dir          string
	prefix       string
	targets      string
	flavor       string
	profilesFile string
	idsRules     int
	appliance    string
	link         string
	linkIf       map[string]string
	dutCPU       float64
	pairs        int
}

func newLabCmd(io *streams) *cobra.Command {
	opts := &labOptions{}
	cmd := &cobra.Command{
		Use:   "lab",
		Short: "Run the embedded lab: an emulated pfSense or OPNsense between two network namespaces",
		Long: "The embedded lab builds network namespaces <prefix>-lan, -dut, -peer and -wan on this machine\n" +
			"(addresses in 198.18.0.0/15 only) and runs an emulated pfSense (or, with --flavor opnsense, an\n" +
			"OPNsense with its REST API over HTTPS) that keeps a real config.xml, answers fwab over SSH on\n" +
			"127.0.0.1 and applies its config to a real Linux data plane.\n" +
			"'fwab lab up' writes the target 'lab', so 'fwab fw info --target lab' works right away. Needs root.",
	}
	cmd.PersistentFlags().StringVar(&opts.dir, "dir", lab.DefaultDir, "lab folder (firewall files, keys, logs)")
	cmd.PersistentFlags().StringVar(&opts.prefix, "prefix", lab.DefaultPrefix, "namespace and interface name prefix")
	cmd.PersistentFlags().StringVar(&opts.targets, "targets", "", "targets file (default ~/.config/fwab/targets.yaml)")
	cmd.AddCommand(newLabUpCmd(io, opts), newLabDownCmd(io, opts), newLabStatusCmd(io, opts), newLabCalibrateCmd(io), newLabServeCmd(io, opts), newLabInspectCmd(io), newLabFaultCmd(io, opts))
	return cmd
}

func (o *labOptions) lab(io *streams) lab.Options {
	return lab.Options{
		Dir:            o.dir,
		Prefix:         o.prefix,
		TargetsPath:    o.targets,
		ProfilesFile:   o.profilesFile,
		Flavor:         o.flavor,
		IDSRules:       o.idsRules,
		Appliance:      o.appliance,
		Link:           o.link,
		InterfaceLinks: o.linkIf,
		DUTCPU:         o.dutCPU,
		Pairs:          o.pairs,
		Logger:         slog.New(slog.NewTextHandler(io.ErrOut, nil)),
	}
}

func newLabUpCmd(io *streams, opts *labOptions) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "up",
		Short: "Build the lab and start the emulated firewall (idempotent)",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if opts.flavor != "pfsense" && opts.flavor != "opnsense" {
				return usageErrorf("--flavor %q: the lab emulates pfsense or opnsense", opts.flavor)
			}
			if opts.pairs < 1 || opts.pairs > 2 {
				return usageErrorf("--pairs %d: the lab has 1 or 2 client/server pairs", opts.pairs)
			}
			if err := opts.lab(io).CheckAppliance(); err != nil {
				return usageErrorf("%v", err)
			}
			st, err := lab.Up(cmd.Context(), opts.lab(io))
			if err != nil {
				return err
			}
			fmt.Fprintf(io.Out, "lab up: emulated %s on ssh %s, namespaces %s-{lan,dut,peer,wan}\n", st.Flavor, st.SSHAddr, st.Prefix)
			fmt.Fprintln(io.Out, st.Describe())
			if st.APIAddr != "" {
				fmt.Fprintf(io.Out, "REST API: https://%s (the lab's own CA; key and secret in 0600 files the target names)\n", st.APIAddr)
			}
			fmt.Fprintf(io.Out, "client %s (netns %s-lan) -> server %s (netns %s-wan); target %q written\n",
				emu.ClientAddr, st.Prefix, emu.ServerAddr, st.Prefix, lab.TargetName)
			if st.Pairs == 2 {
				fmt.Fprintf(io.Out, "link2: client %s (netns %s-lan2, DUT opt1) -> server %s (netns %s-wan2, DUT opt2); the target's links: link1, link2\n",
					emu.Client2Addr, st.Prefix, emu.Server2Addr, st.Prefix)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&opts.flavor, "flavor", "pfsense", "firewall flavor to emulate: pfsense, or opnsense (26.x, with its REST API)")
	cmd.Flags().IntVar(&opts.idsRules, "ids-rules", lab.DefaultIDSRules, "generated rules the lab's IDS/IPS engines load")
	cmd.Flags().StringVar(&opts.appliance, "profile", "unlimited", "lab profile: "+applianceHelp()+"; --link and --dut-cpu override its parts")
	cmd.Flags().StringVar(&opts.link, "link", "", "line rate of every DUT interface: 100m, 1g, 2.5g, 10g or unlimited (default: the profile's); @SPEED names a faster NIC the link negotiated below (1g@10g), /half forces half duplex")
	cmd.Flags().StringToStringVar(&opts.linkIf, "link-if", nil, "line rate of one DUT interface, overriding --link: lan=1g/half (repeatable)")
	cmd.Flags().IntVar(&opts.pairs, "pairs", 1, "client/server pairs crossing the firewall: 2 adds a second link on ports of its own (opt1, opt2; namespaces <prefix>-lan2 and -wan2), the target's link2")
	cmd.Flags().Float64Var(&opts.dutCPU, "dut-cpu", 0, "CPU budget in cores (0.1 to this machine's cores) of the firewall's services: IDS/IPS engine, charon, blocklist loader (default: the profile's)")
	cmd.Flags().StringVar(&opts.profilesFile, "firmware-profiles", "", "firmware profiles YAML (default pfsense: 2.7.2, 2.8.0, 2.8.1 with a 10% slowdown; opnsense: 26.1.2, 26.1.5, 26.7.1 with a 10% slowdown)")
	return cmd
}

// applianceHelp lists the lab profiles with their links and budgets.
func applianceHelp() string {
	var parts []string
	for _, a := range lab.Appliances {
		desc := a.Link.String()
		switch {
		case a.CPU != nil:
			desc += fmt.Sprintf(", one %s core's service budget, calibrated", a.CPU.Model)
		case a.DUTCPU > 0:
			desc += fmt.Sprintf(", %g-core service budget", a.DUTCPU)
		}
		parts = append(parts, a.Name+" ("+desc+")")
	}
	return strings.Join(parts, ", ")
}

func newLabCalibrateCmd(io *streams) *cobra.Command {
	var profile string
	var runs int
	cmd := &cobra.Command{
		Use:   "calibrate",
		Short: "Measure the CPU budget a calibrated profile gets on this machine, without building the lab",
		Long: "calibrate runs the benchmark 'lab up' runs for a calibrated profile (t730, apu2, e302)\n" +
			"RUNS times and prints each run's figure, ratio and budget, and the ratio's spread:\n" +
			"how much the budget of a lab on this machine depends on the moment it was built.",
		Args: exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			a, err := lab.LookupAppliance(profile)
			if err != nil {
				return err
			}
			if a.CPU == nil {
				return fmt.Errorf("lab profile %s has no appliance CPU to calibrate; these do: %s", a.Name, strings.Join(calibratedProfiles(), ", "))
			}
			if runs < 1 {
				return fmt.Errorf("--runs %d: give 1 or more", runs)
			}
			ratios := make([]float64, 0, runs)
			for i := range runs {
				m, err := lab.RunSevenZip(cmd.Context())
				if err != nil {
					return err
				}
				c, err := lab.Calibrate(*a.CPU, m, runtime.NumCPU())
				if err != nil {
					return err
				}
				ratios = append(ratios, c.Ratio)
				fmt.Fprintf(io.Out, "run %d: this machine %.0f MIPS (7-Zip %s), %s %.0f MIPS: ratio %.3f, budget %g cores\n", i+1, m.Rating(a.CPU.Column), m.Version, a.CPU.Model, a.CPU.MIPS(), c.Ratio, c.Budget)
			}
			if runs > 1 {
				lo, hi := slices.Min(ratios), slices.Max(ratios)
				fmt.Fprintf(io.Out, "ratio %.3f to %.3f over %d runs: a spread of %.1f %% of the lowest\n", lo, hi, runs, (hi-lo)/lo*100)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&profile, "profile", "t730", "calibrated lab profile: "+strings.Join(calibratedProfiles(), ", "))
	cmd.Flags().IntVar(&runs, "runs", 3, "benchmark runs (8–10 s each)")
	return cmd
}

// calibratedProfiles are the profiles whose budget lab up calibrates.
func calibratedProfiles() []string {
	var out []string
	for _, a := range lab.Appliances {
		if a.CPU != nil {
			out = append(out, a.Name)
		}
	}
	return out
}

func newLabDownCmd(io *streams, opts *labOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "down",
		Short: "Stop the emulated firewall and remove everything the lab made",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := lab.Down(cmd.Context(), opts.lab(io)); err != nil {
				return err
			}
			fmt.Fprintln(io.Out, "lab down")
			return nil
		},
	}
}

func newLabStatusCmd(io *streams, opts *labOptions) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show what exists of the lab",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			s, err := lab.GetStatus(cmd.Context(), opts.lab(io))
			if err != nil {
				return err
			}
			state := "down"
			apiOK := s.State == nil || s.State.APIAddr == "" || s.APIUp
			if s.State != nil && s.DaemonPID > 0 && s.SSHUp && apiOK && (len(s.Namespaces) == 4 || !s.Checked) {
				state = "up"
			} else if s.State != nil || s.DaemonPID > 0 || len(s.Namespaces) > 0 {
				state = "partial (run 'fwab lab down' or 'fwab lab up')"
			}
			fmt.Fprintf(io.Out, "lab:        %s\nfolder:     %s\n", state, s.Dir)
			if s.State != nil {
				fmt.Fprintf(io.Out, "flavor:     %s\n", s.State.Flavor)
				fmt.Fprintf(io.Out, "ssh:        %s (answering: %v)\n", s.State.SSHAddr, s.SSHUp)
				if s.State.APIAddr != "" {
					fmt.Fprintf(io.Out, "api:        https://%s (answering: %v)\n", s.State.APIAddr, s.APIUp)
				}
			}
			if s.State != nil && s.State.Appliance != "" {
				fmt.Fprintf(io.Out, "profile:    %s\n", strings.TrimPrefix(s.State.Describe(), "lab profile "))
			}
			if s.DaemonPID > 0 {
				fmt.Fprintf(io.Out, "daemon:     pid %d\n", s.DaemonPID)
			} else if s.DaemonErr != "" {
				fmt.Fprintf(io.Out, "daemon:     %s\n", s.DaemonErr)
			}
			if len(s.Namespaces) > 0 {
				fmt.Fprintf(io.Out, "namespaces: %s\n", strings.Join(s.Namespaces, " "))
			}
			if s.Version != "" {
				fmt.Fprintf(io.Out, "firmware:   %s\n", s.Version)
			}
			if state != "up" && state != "down" {
				return silentError{exitFailure}
			}
			return nil
		},
	}
}

func newLabServeCmd(io *streams, opts *labOptions) *cobra.Command {
	return &cobra.Command{
		Use:    "serve",
		Short:  "Run the lab's emulated firewall in the foreground ('lab up' starts it)",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return lab.Serve(cmd.Context(), opts.dir, slog.New(slog.NewTextHandler(io.ErrOut, nil)))
		},
	}
}
