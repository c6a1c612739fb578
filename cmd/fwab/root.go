package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"

	"github.com/fwab/fwab/fwapi"
	"github.com/spf13/cobra"
)

// Exit codes, documented in the README.
const (
	exitOK        = 0
	exitFailure   = 1 // the command ran and found a problem (lint errors, mismatch, regression)
	exitUsage     = 2 // bad flags, arguments or input
	exitCancelled = 130
)

// streams are the command's standard streams; commands never touch os.Std*.
type streams struct {
	In     io.Reader
	Out    io.Writer
	ErrOut io.Writer
	// LogLevel is what the logs on ErrOut show (--log-level; default warn).
	LogLevel slog.LevelVar
}

// usageError marks an error caused by how fwab was called.
type usageError struct{ err error }

func (e usageError) Error() string { return e.err.Error() }
func (e usageError) Unwrap() error { return e.err }

func usageErrorf(format string, args ...any) error {
	return usageError{fmt.Errorf(format, args...)}
}

// silentError carries an exit code for a failure the command has already
// explained on its own output.
type silentError struct{ code int }

func (e silentError) Error() string { return fmt.Sprintf("exit status %d", e.code) }

// run is the whole program; main only wires the process to it.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	io := &streams{In: stdin, Out: stdout, ErrOut: stderr}
	io.LogLevel.Set(slog.LevelWarn)
	root := newRootCmd(io)
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	code := exitCode(err, io)
	if err != nil && jsonRequested(cmd) && !errors.As(err, new(silentError)) {
		// A script that asked for JSON reads the failure as JSON too; the
		// same words went to stderr for the person watching.
		writeJSON(stdout, jsonError{Error: errorBody{Message: err.Error(), ExitCode: code}})
	}
	return code
}

// jsonError is what a command run with --json prints on standard output
// when it fails.
type jsonError struct {
	Error errorBody `json:"error"`
}

type errorBody struct {
	Message  string `json:"message"`
	ExitCode int    `json:"exit_code"`
}

func jsonRequested(cmd *cobra.Command) bool {
	if cmd == nil {
		return false
	}
	f := cmd.Flags().Lookup("json")
	return f != nil && f.Value.String() == "true"
}

func exitCode(err error, io *streams) int {
	if err == nil {
		return exitOK
	}
	var silent silentError
	if errors.As(err, &silent) {
		return silent.code
	}
	if errors.Is(err, context.Canceled) {
		fmt.Fprintln(io.ErrOut, "fwab: cancelled")
		return exitCancelled
	}
	fmt.Fprintf(io.ErrOut, "fwab: %v\n", err)
	if isSetupError(err) {
		return exitUsage
	}
	return exitFailure
}

// isSetupError reports whether err is the user's to fix before fwab can
// run (exit 2, never 1, which CI reads as a regression): bad input, a
// credential's file or variable, a certificate or host key that does not
// match what the targets file trusts.
func isSetupError(err error) bool {
	var (
		usage    usageError
		setup    *fwapi.SetupError
		cert     *fwapi.CertificateError
		mismatch *fwapi.HostKeyMismatchError
		unknown  *fwapi.UnknownHostKeyError
	)
	return errors.As(err, &usage) || errors.As(err, &setup) || errors.As(err, &cert) || errors.As(err, &mismatch) || errors.As(err, &unknown)
}

func newRootCmd(io *streams) *cobra.Command {
	root := &cobra.Command{
		Use:           "fwab",
		Short:         "A/B-test pfSense and OPNsense configurations",
		Long:          "fwab edits a firewall's config.xml or calls its API, applies and verifies each change,\nprobes throughput through the firewall across a configuration matrix, and reports the differences.",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.PersistentFlags().Var(logLevelFlag{&io.LogLevel}, "log-level", "what the logs show: debug, info, warn or error")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError{err} })
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return checkDBFlag(cmd) }
	root.AddCommand(
		newConfigCmd(io),
		newMatrixCmd(io),
		newSweepCmd(io),
		newRunsCmd(io),
		newFwCmd(io),
		newVerifyCmd(io),
		newReportCmd(io),
		newCompareCmd(io),
		newTrendCmd(io),
		newLabCmd(io),
		newTargetCmd(io),
		newDBCmd(io),
		newVersionCmd(io),
		newManCmd(io),
		newAgentCmd(io),
	)
	root.Version = fwabVersion()
	root.SetVersionTemplate("fwab {{.Version}}\n")
	refuseUnknownSubcommands(root)
	registerCompletions(root)
	return root
}

// refuseUnknownSubcommands makes every command group (a command that only
// holds subcommands) refuse an argument that names none of them, with a
// usage error and the nearest names, instead of printing its help and
// succeeding: `fwab config lnit f.xml && deploy` must not deploy.
func refuseUnknownSubcommands(c *cobra.Command) {
	if c.HasSubCommands() && !c.Runnable() {
		c.Args = func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return usageError{unknownCommandError(cmd, args[0])}
		}
		c.RunE = func(cmd *cobra.Command, args []string) error { return cmd.Help() }
	}
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
}

func unknownCommandError(cmd *cobra.Command, name string) error {
	msg := fmt.Sprintf("unknown command %q for %q", name, cmd.CommandPath())
	if cmd.SuggestionsMinimumDistance <= 0 {
		cmd.SuggestionsMinimumDistance = 2
	}
	if s := cmd.SuggestionsFor(name); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %q?)", s[0])
	}
	return fmt.Errorf("%s; run '%s --help' for the commands", msg, cmd.CommandPath())
}

// exactArgs is cobra.ExactArgs with a usage error.
func exactArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.ExactArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

func minArgs(n int) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if err := cobra.MinimumNArgs(n)(cmd, args); err != nil {
			return usageError{err}
		}
		return nil
	}
}

// logLevelFlag is a slog level as a flag value.
type logLevelFlag struct{ v *slog.LevelVar }

func (f logLevelFlag) String() string { return strings.ToLower(f.v.Level().String()) }
func (f logLevelFlag) Type() string   { return "level" }
func (f logLevelFlag) Set(s string) error {
	if err := f.v.UnmarshalText([]byte(s)); err != nil {
		return fmt.Errorf("%q is not one of debug, info, warn, error", s)
	}
	return nil
}
