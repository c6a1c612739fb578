package main

import (
	"context"
	"os"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/report"
	"github.com/fwab/fwab/store"
)

// Shell completion beyond cobra's commands and flags: knob names and values
// from the config being edited, target names from the targets file, run ids
// from the results database, and the values of enum flags. Completion never
// writes anything and fails quietly (no suggestions) on a missing file.

// completeAssignments completes KNOB=VALUE arguments from the config named
// by the first argument: its flavor, its interfaces and tunnels, and the
// IPsec ciphers its version offers.
func completeAssignments(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	if len(args) == 0 {
		return nil, cobra.ShellCompDirectiveDefault // the config file itself
	}
	data, err := os.ReadFile(args[0])
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	c, err := configxml.LoadBytes(data)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	return knobCompletions(c, toComplete)
}

func knobCompletions(c *configxml.Config, toComplete string) ([]string, cobra.ShellCompDirective) {
	knob, _, hasValue := strings.Cut(toComplete, "=")
	if !hasValue {
		var out []string
		for _, k := range configxml.Knobs(c.Flavor()) {
			if !k.InConfig {
				continue
			}
			switch k.Qualifier {
			case "interface":
				for _, i := range c.Interfaces() {
					out = append(out, k.Name+"@"+i.Key+"=")
				}
			case "tunnel":
				for _, t := range c.Tunnels() {
					out = append(out, k.Name+"@"+t.Name+"=")
				}
			case "":
				out = append(out, k.Name+"=")
			}
		}
		return out, cobra.ShellCompDirectiveNoSpace | cobra.ShellCompDirectiveNoFileComp
	}
	name, _, _ := strings.Cut(knob, "@")
	var values []string
	for _, k := range configxml.Knobs(c.Flavor()) {
		if k.Name == name {
			values = k.Values
		}
	}
	if name == "ipsec" {
		if ciphers, err := configxml.Ciphers(c.Flavor(), c.Product().Version); err == nil {
			values = append(ciphers, "none")
		}
	}
	out := make([]string, len(values))
	for i, v := range values {
		out[i] = knob + "=" + v
	}
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeTargets completes target names from the targets file the
// command's --targets flag names.
func completeTargets(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	path := fwapi.DefaultTargetsPath()
	if f := cmd.Flag("targets"); f != nil && f.Value.String() != "" {
		path = f.Value.String()
	}
	tf, err := fwapi.LoadTargets(path)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for name, t := range tf.Targets {
		out = append(out, name+"\t"+t.Flavor+" at "+t.Host)
	}
	slices.Sort(out)
	return out, cobra.ShellCompDirectiveNoFileComp
}

// completeRuns completes run ids from the database the --db flag names,
// newest first, with each run's spec and status as the description.
func completeRuns(cmd *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	path := defaultDB()
	if f := cmd.Flag("db"); f != nil && f.Value.String() != "" {
		path = f.Value.String()
	}
	ctx := cmd.Context()
	if ctx == nil {
		ctx = context.Background()
	}
	st, err := store.OpenReadOnly(ctx, path)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	defer st.Close()
	runs, err := st.Runs(ctx)
	if err != nil {
		return nil, cobra.ShellCompDirectiveNoFileComp
	}
	var out []string
	for _, r := range runs { // newest first
		out = append(out, strconv.FormatInt(r.ID, 10)+"\t"+r.Target+" "+string(r.Status)+" "+r.Created.Format("2006-01-02 15:04"))
	}
	return out, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveKeepOrder
}

// fixedCompletions completes a flag or argument from a fixed list.
func fixedCompletions(values ...string) cobra.CompletionFunc {
	return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
}

// registerCompletions attaches the completions above to every command
// that takes such an argument or flag, by what the command is called and
// which flags it has, so that a new command gets them by its flags alone.
func registerCompletions(root *cobra.Command) {
	root.RegisterFlagCompletionFunc("log-level", fixedCompletions("debug", "info", "warn", "error"))
	args := map[string]cobra.CompletionFunc{
		"fwab config set":  completeAssignments,
		"fwab report":      completeRuns,
		"fwab runs show":   completeRuns,
		"fwab compare":     completeRuns,
		"fwab target test": completeTargets,
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		if f, ok := args[c.CommandPath()]; ok && c.ValidArgsFunction == nil {
			c.ValidArgsFunction = f
		}
		flags := map[string]cobra.CompletionFunc{
			"target": completeTargets,
			"flavor": fixedCompletions("pfsense", "opnsense"),
			"format": fixedCompletions(reportFormats()...),
		}
		for name, f := range flags {
			if c.LocalFlags().Lookup(name) != nil {
				c.RegisterFlagCompletionFunc(name, f)
			}
		}
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(root)
}

func reportFormats() []string {
	out := make([]string, len(report.Formats))
	for i, f := range report.Formats {
		out[i] = string(f)
	}
	return out
}
