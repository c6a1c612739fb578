package main

import (
	"fmt"
	"runtime/debug"
	"strings"

	"github.com/spf13/cobra"
)

// fwabVersion is this build's version: the module version and, when it
// does not already say so, the VCS revision it was built from. Runs record
// the same string (`fwab runs show`).
func fwabVersion() string {
	info, _ := debug.ReadBuildInfo()
	return versionString(info)
}

func versionString(info *debug.BuildInfo) string {
	if info == nil {
		return "dev"
	}
	v := info.Main.Version
	if v == "" || v == "(devel)" {
		v = "dev"
	}
	var rev string
	var modified bool
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value == "true"
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev == "" || strings.Contains(v, rev) {
		return v
	}
	if modified {
		rev += "+modified"
	}
	return v + " " + rev
}

func newVersionCmd(io *streams) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print fwab's version and the revision it was built from",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			fmt.Fprintf(io.Out, "fwab %s\n", fwabVersion())
			return nil
		},
	}
}
