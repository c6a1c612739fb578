package main

import (
	"bytes"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/configxml"
	"github.com/fwab/fwab/internal/atomicfile"
)

func newConfigCmd(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "config",
		Short: "Read, change, lint and compare config.xml files offline",
	}
	cmd.AddCommand(
		newConfigShowCmd(io),
		newConfigSetCmd(io),
		newConfigDiffCmd(io),
		newConfigLintCmd(io),
		newConfigKnobsCmd(io),
	)
	return cmd
}

// loadConfigFile reads a config.xml ("-" for stdin) and, when given, records
// the product version the firewall runs.
func loadConfigFile(ctx context.Context, io *streams, path, product string) (*configxml.Config, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = readAll(io.In)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, usageError{err}
	}
	c, err := configxml.LoadContext(ctx, data)
	if ctx.Err() != nil {
		return nil, ctx.Err()
	}
	if err != nil {
		return nil, usageError{fmt.Errorf("%s: %w", path, err)}
	}
	if product != "" {
		if err := c.SetProduct(product); err != nil {
			return nil, usageError{err}
		}
	}
	return c, nil
}

func readAll(r io.Reader) ([]byte, error) {
	var b bytes.Buffer
	_, err := b.ReadFrom(r)
	return b.Bytes(), err
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func productFlag(cmd *cobra.Command, p *string) {
	cmd.Flags().StringVar(p, "product", "", "the product version the firewall runs (e.g. 2.7.2, 26.1); default: inferred from the config")
}

type configShowOptions struct {
	file, product string
	json          bool
}

func newConfigShowCmd(io *streams) *cobra.Command {
	opts := &configShowOptions{}
	cmd := &cobra.Command{
		Use:   "show FILE",
		Short: "Show a config's flavor, versions, interfaces and knob values",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file = args[0]
			return runConfigShow(cmd.Context(), io, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	productFlag(cmd, &opts.product)
	return cmd
}

type configSummary struct {
	Flavor          configxml.Flavor      `json:"flavor"`
	ConfigVersion   string                `json:"config_version"`
	Product         string                `json:"product_version"`
	ProductInferred bool                  `json:"product_inferred"`
	Interfaces      []configxml.Interface `json:"interfaces"`
	Knobs           []configxml.KnobValue `json:"knobs"`
}

func runConfigShow(ctx context.Context, io *streams, opts *configShowOptions) error {
	c, err := loadConfigFile(ctx, io, opts.file, opts.product)
	if err != nil {
		return err
	}
	s := configSummary{
		Flavor:          c.Flavor(),
		ConfigVersion:   c.ConfigVersion(),
		Product:         c.Product().Version,
		ProductInferred: c.Product().Inferred,
		Interfaces:      c.Interfaces(),
		Knobs:           c.Values(),
	}
	if opts.json {
		return writeJSON(io.Out, s)
	}
	product := s.Product
	if s.ProductInferred {
		product += " (inferred from the config; pass --product to set it)"
	}
	fmt.Fprintf(io.Out, "flavor:          %s\n", s.Flavor)
	if s.ConfigVersion != "" {
		fmt.Fprintf(io.Out, "config version:  %s\n", s.ConfigVersion)
	}
	fmt.Fprintf(io.Out, "product version: %s\n\n", product)
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "INTERFACE\tDEVICE\tADDRESS\tDESCRIPTION")
	for _, i := range s.Interfaces {
		addr := i.IPAddr
		if i.Subnet != "" {
			addr += "/" + i.Subnet
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", i.Key, i.Device, addr, i.Descr)
	}
	tw.Flush()
	fmt.Fprintln(io.Out)
	tw = tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tVALUE")
	for _, k := range s.Knobs {
		fmt.Fprintf(tw, "%s\t%s\n", k.Knob, k.Value)
	}
	return tw.Flush()
}

type configSetOptions struct {
	file, out, product string
	inPlace, diff      bool
	force              bool
	allow              []string
	assignments        []string
}

func newConfigSetCmd(io *streams) *cobra.Command {
	opts := &configSetOptions{}
	cmd := &cobra.Command{
		Use:   "set FILE KNOB=VALUE... (-o OUT | --in-place | --diff)",
		Short: "Change knobs in a config.xml",
		Long: "Change knobs in a config.xml. Every assignment is checked against the config's flavor and\n" +
			"product version first; if any is invalid, nothing is written. The result is linted by the rules\n" +
			"that see the knobs given ('fwab config lint' runs them all): a finding\n" +
			"of a safety rule (" + strings.Join(configxml.SafetyRules, ", ") + ") writes nothing and exits 1 unless --allow names it.\n" +
			"--in-place replaces FILE atomically (through a symlink, keeping mode and owner), keeps the\n" +
			"first original as FILE.bak (later ones as FILE.bak.1, …) and writes nothing when nothing\n" +
			"changes. --diff prints what would change and writes nothing. See 'fwab config knobs'.",
		Example: "  fwab config set config.xml offload.tso=off ids@lan=ips-inline -o new.xml\n" +
			"  fwab config set config.xml rules@lan=1000 nat.outbound=hybrid --in-place\n" +
			"  fwab config set config.xml ids@lan=ips-inline --diff",
		Args: minArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file, opts.assignments = args[0], args[1:]
			modes := 0
			for _, on := range []bool{opts.out != "", opts.inPlace, opts.diff} {
				if on {
					modes++
				}
			}
			if modes != 1 {
				return usageErrorf("give exactly one of -o OUT, --in-place or --diff")
			}
			if opts.inPlace && opts.file == "-" {
				return usageErrorf("--in-place needs a file, not standard input")
			}
			for _, id := range opts.allow {
				if !slices.ContainsFunc(configxml.LintRules, func(r configxml.LintRule) bool { return r.ID == id }) {
					return usageErrorf("--allow %s: no such lint rule (fwab config lint lists them; the safety rules are %s)", id, strings.Join(configxml.SafetyRules, ", "))
				}
			}
			return runConfigSet(cmd.Context(), io, opts)
		},
	}
	cmd.Flags().StringVarP(&opts.out, "output", "o", "", "write the changed config to `OUT` (- for standard output)")
	cmd.Flags().BoolVar(&opts.inPlace, "in-place", false, "replace FILE, keeping the first original as FILE.bak")
	cmd.Flags().BoolVar(&opts.diff, "diff", false, "print the knob changes and write nothing")
	cmd.Flags().BoolVar(&opts.force, "force", false, "with --in-place: replace FILE even if it is read-only")
	cmd.Flags().StringSliceVar(&opts.allow, "allow", nil, "write even though the result breaks this safety `rule` (e.g. FWAB001, to measure an unsafe config on purpose)")
	productFlag(cmd, &opts.product)
	return cmd
}

func runConfigSet(ctx context.Context, io *streams, opts *configSetOptions) error {
	c, err := loadConfigFile(ctx, io, opts.file, opts.product)
	if err != nil {
		return err
	}
	changes, err := c.Apply(opts.assignments)
	if err != nil {
		return usageError{err}
	}
	findings := configxml.LintChanged(c, opts.assignments)
	for _, f := range findings {
		fmt.Fprintf(io.ErrOut, "%s: %s %s: %s\n", f.Severity, f.Rule, f.Name, f.Message)
	}
	if err := ctx.Err(); err != nil {
		return err // interrupted: nothing written
	}
	if opts.diff {
		return printKnobChanges(io, changes)
	}
	if blocking := configxml.Blocking(findings, opts.allow); len(blocking) > 0 {
		fmt.Fprintf(io.ErrOut, "fwab: nothing written: the result breaks safety rule %s; give --allow %s to write it anyway\n", blocking[0].Rule, blocking[0].Rule)
		return silentError{exitFailure}
	}
	fill := streamConfig(c)
	switch {
	case opts.out == "-":
		return fill(io.Out)
	case opts.inPlace:
		if len(changes) == 0 {
			fmt.Fprintf(io.ErrOut, "%s already has those values: nothing written\n", opts.file)
			return nil
		}
		if err := replaceInPlace(opts.file, fill, opts.force); err != nil {
			return err
		}
		fmt.Fprintf(io.ErrOut, "wrote %s: %s changed\n", opts.file, plural(len(changes), "knob"))
		return nil
	default:
		if err := atomicfile.WriteFileFrom(opts.out, fileMode(opts.file), fill); err != nil {
			return usageError{err}
		}
		fmt.Fprintf(io.ErrOut, "wrote %s: %s changed\n", opts.out, plural(len(changes), "knob"))
		return nil
	}
}

// streamConfig writes c to a file straight from its tree, without building
// the whole document in memory first.
func streamConfig(c *configxml.Config) func(io.Writer) error {
	return func(w io.Writer) error {
		_, err := c.WriteTo(w)
		return err
	}
}

// replaceInPlace writes data over path (through a symlink to its target,
// keeping mode and owner), after keeping the original as path.bak — or,
// when a backup exists already, as path.bak.N, so the pristine original is
// never overwritten.
func replaceInPlace(path string, fill func(io.Writer) error, force bool) error {
	target, err := filepath.EvalSymlinks(path)
	if err != nil {
		return usageError{err}
	}
	st, err := os.Stat(target)
	if err != nil {
		return usageError{err}
	}
	if st.Mode().Perm()&0o222 == 0 && !force {
		return usageErrorf("%s is read-only (mode %v): give --force to replace it", path, st.Mode().Perm())
	}
	bak, err := keepBackup(target, st.Mode().Perm())
	if err != nil {
		return err
	}
	if err := atomicfile.WriteFileKeepModeFrom(target, st.Mode().Perm(), fill); err != nil {
		// The backup is the file's second name while the file stays:
		// a later edit in place would change it too.
		os.Remove(bak)
		return err
	}
	return nil
}

// keepBackup keeps path's content as path.bak (or .bak.N): a second name
// for the file, which the write then replaces by a new one, so the backup
// costs no copy; where the file system has no hard links, a copy.
func keepBackup(path string, perm os.FileMode) (string, error) {
	for n := 0; n < 1000; n++ {
		name := path + ".bak"
		if n > 0 {
			name += "." + strconv.Itoa(n)
		}
		err := os.Link(path, name)
		if err != nil && !errors.Is(err, fs.ErrExist) {
			var orig []byte
			if orig, err = os.ReadFile(path); err == nil {
				err = atomicfile.WriteNew(name, orig, perm)
			}
		}
		if err == nil || !errors.Is(err, fs.ErrExist) {
			if err != nil {
				return "", fmt.Errorf("keep a backup: %w (nothing written)", err)
			}
			return name, nil
		}
	}
	return "", fmt.Errorf("keep a backup: %s.bak through .bak.999 all exist: remove old ones (nothing written)", path)
}

func plural(n int, word string) string {
	if n == 1 {
		return "1 " + word
	}
	return strconv.Itoa(n) + " " + word + "s"
}

func fileMode(path string) os.FileMode {
	if st, err := os.Stat(path); err == nil {
		return st.Mode().Perm()
	}
	return 0o600
}

type configDiffOptions struct {
	a, b, product string
	json          bool
}

func newConfigDiffCmd(io *streams) *cobra.Command {
	opts := &configDiffOptions{}
	cmd := &cobra.Command{
		Use:   "diff A B",
		Short: "Compare two configs: knob changes first, then element changes",
		Args:  exactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.a, opts.b = args[0], args[1]
			return runConfigDiff(cmd.Context(), io, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	productFlag(cmd, &opts.product)
	return cmd
}

func runConfigDiff(ctx context.Context, io *streams, opts *configDiffOptions) error {
	if opts.a == "-" && opts.b == "-" {
		return usageErrorf("config diff - -: standard input holds one config; give the other as a file")
	}
	// The two files are read side by side: each parse takes one core.
	var a, b *configxml.Config
	var errA, errB error
	var wg sync.WaitGroup
	wg.Go(func() { a, errA = loadConfigFile(ctx, io, opts.a, opts.product) })
	b, errB = loadConfigFile(ctx, io, opts.b, opts.product)
	wg.Wait()
	if err := cmp.Or(errA, errB); err != nil {
		return err // A's problem first, whichever parse ended first
	}
	if a.Flavor() != b.Flavor() {
		return usageErrorf("%s is %s and %s is %s: compare configs of one product", opts.a, a.Flavor(), opts.b, b.Flavor())
	}
	knobs, paths := configxml.Diff(a, b)
	if opts.json {
		return writeJSON(io.Out, struct {
			Knobs []configxml.Change     `json:"knobs"`
			Paths []configxml.PathChange `json:"paths"`
		}{knobs, paths})
	}
	if len(knobs) == 0 && len(paths) == 0 {
		fmt.Fprintln(io.Out, "no differences")
		return nil
	}
	if len(knobs) > 0 {
		printKnobChanges(io, knobs)
		fmt.Fprintln(io.Out)
	}
	const shown = 200
	lines := collapseRuns(paths)
	for i, l := range lines {
		if i == shown {
			fmt.Fprintf(io.Out, "… and %d more lines (--json lists every change)\n", len(lines)-shown)
			break
		}
		fmt.Fprintln(io.Out, l)
	}
	return nil
}

// printKnobChanges prints knob changes as a table, or that there are none.
func printKnobChanges(io *streams, knobs []configxml.Change) error {
	if len(knobs) == 0 {
		fmt.Fprintln(io.Out, "no knob changes")
		return nil
	}
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tFROM\tTO\tAPPLY")
	for _, k := range knobs {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Knob, k.From, k.To, k.Action)
	}
	return tw.Flush()
}

// collapseRuns shows a run of added or removed siblings, such as a thousand
// generated rules, as one line.
func collapseRuns(paths []configxml.PathChange) []string {
	var out []string
	for i := 0; i < len(paths); {
		p := paths[i]
		base, _, indexed := strings.Cut(p.Path, "[")
		j := i + 1
		for indexed && p.Kind != "changed" && j < len(paths) && paths[j].Kind == p.Kind && strings.HasPrefix(paths[j].Path, base+"[") && !strings.Contains(paths[j].Path[len(base):], "/") {
			j++
		}
		if j-i < 3 {
			out = append(out, p.String())
			i++
			continue
		}
		sign := "+"
		if p.Kind == "removed" {
			sign = "-"
		}
		last := paths[j-1].Path[len(base):]
		out = append(out, fmt.Sprintf("%s %s…%s (%d elements, from %s to %s)", sign, p.Path, last, j-i, summaryOf(p), summaryOf(paths[j-1])))
		i = j
	}
	return out
}

func summaryOf(p configxml.PathChange) string {
	if p.Kind == "removed" {
		return p.From
	}
	return p.To
}

type configLintOptions struct {
	file, product string
	json          bool
	disable       []string
	severity      string
}

func newConfigLintCmd(io *streams) *cobra.Command {
	opts := &configLintOptions{}
	cmd := &cobra.Command{
		Use:   "lint FILE",
		Short: "Check a config for unsafe or invalid combinations (exit 1 on errors)",
		Args:  exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts.file = args[0]
			return runConfigLint(cmd.Context(), io, opts)
		},
	}
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	cmd.Flags().StringSliceVar(&opts.disable, "disable", nil, "leave out this `rule` (by ID, e.g. FWAB005; repeat or comma-separate)")
	cmd.Flags().StringVar(&opts.severity, "severity", "warning", "the least severity shown: warning or error")
	productFlag(cmd, &opts.product)
	return cmd
}

// filterFindings keeps the findings of rules not disabled, at least as
// severe as asked.
func filterFindings(fs []configxml.Finding, disable []string, severity string) ([]configxml.Finding, error) {
	if severity != string(configxml.SeverityWarning) && severity != string(configxml.SeverityError) {
		return nil, usageErrorf("--severity %q: use warning or error", severity)
	}
	for _, id := range disable {
		if !slices.ContainsFunc(configxml.LintRules, func(r configxml.LintRule) bool { return r.ID == id }) {
			return nil, usageErrorf("--disable %s: no such lint rule (the rules are FWAB001 to FWAB%03d; see the README)", id, len(configxml.LintRules))
		}
	}
	var out []configxml.Finding
	for _, f := range fs {
		if slices.Contains(disable, f.Rule) || severity == string(configxml.SeverityError) && f.Severity != configxml.SeverityError {
			continue
		}
		out = append(out, f)
	}
	return out, nil
}

func runConfigLint(ctx context.Context, io *streams, opts *configLintOptions) error {
	c, err := loadConfigFile(ctx, io, opts.file, opts.product)
	if err != nil {
		return err
	}
	findings, err := filterFindings(configxml.Lint(c), opts.disable, opts.severity)
	if err != nil {
		return err
	}
	if opts.json {
		if findings == nil {
			findings = []configxml.Finding{}
		}
		if err := writeJSON(io.Out, findings); err != nil {
			return err
		}
	} else {
		for _, f := range findings {
			path := ""
			if f.Path != "" {
				path = " (" + f.Path + ")"
			}
			fmt.Fprintf(io.Out, "%s: %s %s: %s%s\n", f.Severity, f.Rule, f.Name, f.Message, path)
		}
		if len(findings) == 0 {
			fmt.Fprintln(io.Out, "no findings")
		}
	}
	if configxml.HasErrors(findings) {
		return silentError{exitFailure}
	}
	return nil
}

type configKnobsOptions struct {
	flavor, version string
	json            bool
}

func newConfigKnobsCmd(io *streams) *cobra.Command {
	opts := &configKnobsOptions{}
	cmd := &cobra.Command{
		Use:   "knobs",
		Short: "List the knobs, their values and what applies them",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runConfigKnobs(io, opts)
		},
	}
	cmd.Flags().StringVar(&opts.flavor, "flavor", "", "pfsense or opnsense (default: both)")
	cmd.Flags().StringVar(&opts.version, "version", "", "product version, to list the IPsec ciphers it offers")
	cmd.Flags().BoolVar(&opts.json, "json", false, "print JSON")
	return cmd
}

type knobInfo struct {
	Name    string           `json:"name"`
	Form    string           `json:"form"`
	Values  []string         `json:"values,omitempty"`
	Syntax  string           `json:"syntax,omitempty"`
	Action  configxml.Action `json:"action"`
	Flavors []string         `json:"flavors"`
	Doc     string           `json:"doc"`
}

func runConfigKnobs(io *streams, opts *configKnobsOptions) error {
	f := configxml.Flavor(opts.flavor)
	if f != "" && f != configxml.PfSense && f != configxml.OPNsense {
		return usageErrorf("--flavor %q: use pfsense or opnsense", opts.flavor)
	}
	if opts.version != "" && f == "" {
		return usageErrorf("--version needs --flavor")
	}
	var infos []knobInfo
	for _, k := range configxml.Knobs(f) {
		info := knobInfo{Name: k.Name, Form: knobForm(k), Values: k.Values, Syntax: k.Syntax, Action: k.Action, Doc: k.Doc}
		for _, fl := range []configxml.Flavor{configxml.PfSense, configxml.OPNsense} {
			if len(configxml.Knobs(fl)) > 0 && containsKnob(configxml.Knobs(fl), k.Name) {
				info.Flavors = append(info.Flavors, string(fl))
			}
		}
		if k.Name == "crypto.hardware" && f != "" {
			info.Values, info.Syntax = configxml.CryptoValues(f), ""
		}
		if k.Name == "ipsec" && opts.version != "" {
			ciphers, err := configxml.Ciphers(f, opts.version)
			if err != nil {
				return usageError{err}
			}
			info.Values = append(ciphers, "none")
		}
		infos = append(infos, info)
	}
	if opts.json {
		return writeJSON(io.Out, infos)
	}
	tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "KNOB\tVALUES\tAPPLY\tFLAVORS")
	for _, k := range infos {
		values := strings.Join(k.Values, " | ")
		if values == "" {
			values = k.Syntax
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", k.Form, values, k.Action, strings.Join(k.Flavors, ","))
	}
	return tw.Flush()
}

func knobForm(k configxml.KnobSpec) string {
	switch {
	case k.Name == "xml":
		return "xml:PATH"
	case k.Qualifier != "":
		return fmt.Sprintf("%s@%s", k.Name, strings.ToUpper(k.Qualifier))
	}
	return k.Name
}

func containsKnob(ks []configxml.KnobSpec, name string) bool {
	for _, k := range ks {
		if k.Name == name {
			return true
		}
	}
	return false
}
