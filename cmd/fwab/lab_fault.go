package main

import (
	"fmt"
	"time"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/emu"
	"github.com/fwab/fwab/lab"
)

type labFaultOptions struct {
	disk     string
	linkDown time.Duration
}

// newLabFaultCmd injects faults into the lab's emulated firewall, for the
// fault-injection suite and for trying fwab's behaviour by hand.
func newLabFaultCmd(io *streams, opts *labOptions) *cobra.Command {
	o := &labFaultOptions{}
	cmd := &cobra.Command{
		Use:    "fault",
		Short:  "Inject a fault into the lab's emulated firewall (disk, management link); no flags clears them",
		Hidden: true,
		Args:   exactArgs(0),
		Example: "  fwab lab fault --disk enospc     # writes under /conf, /var/run, /tmp fail\n" +
			"  fwab lab fault --link-down 10s   # SSH cut and refused for 10 s\n" +
			"  fwab lab fault                   # clear",
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := emu.Fault{Disk: o.disk}
			if o.linkDown < 0 {
				return usageErrorf("--link-down %v: want a positive duration", o.linkDown)
			}
			if o.linkDown > 0 {
				f.LinkDownUntil = time.Now().Add(o.linkDown)
			}
			if err := lab.SetFault(opts.dir, f); err != nil {
				return usageError{err}
			}
			fmt.Fprintf(io.Out, "lab fault: disk %q, link down %v\n", f.Disk, o.linkDown)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.disk, "disk", "", "make writes under /conf, /var/run and /tmp fail: "+emu.DiskFull+" or "+emu.DiskReadOnly)
	cmd.Flags().DurationVar(&o.linkDown, "link-down", 0, "cut the management link (SSH) for this long")
	return cmd
}
