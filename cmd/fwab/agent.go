package main

import (
	"github.com/spf13/cobra"

	"github.com/fwab/fwab/probe"
)

// newAgentCmd is what a probe runs on an endpoint host: the two ends of
// the connection-rate probe (probe.Connect). It is not for people.
func newAgentCmd(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:                "agent connect-server|connect-client [flags]",
		Short:              "The endpoint side of fwab's own probes (run by sweeps, not by hand)",
		Hidden:             true,
		DisableFlagParsing: true,
		RunE: func(cmd *cobra.Command, args []string) error {
			return probe.Agent(cmd.Context(), args, io.Out)
		},
	}
}
