package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"
	"github.com/spf13/cobra/doc"
)

// newManCmd writes a man page per command (`make man`); hidden, as it is
// for packagers rather than users.
func newManCmd(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:    "gen-man DIR",
		Short:  "Write a man page for every command into DIR",
		Hidden: true,
		Args:   exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := os.MkdirAll(args[0], 0o755); err != nil {
				return usageError{err}
			}
			root := cmd.Root()
			root.DisableAutoGenTag = true // reproducible pages: no date of generation
			header := &doc.GenManHeader{Title: "FWAB", Section: "1", Source: "fwab " + fwabVersion(), Manual: "fwab manual"}
			if err := doc.GenManTree(root, header, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(io.Out, "wrote man pages to %s\n", args[0])
			return nil
		},
	}
}
