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
	kill     string
	reboot   bool
	errors   map[string]int64
}

// newLabFaultCmd injects faults into the lab's emulated firewall, for the
// fault-injection suite and for trying fwab's behaviour by hand.
func newLabFaultCmd(io *streams, opts *labOptions) *cobra.Command {
	o := &labFaultOptions{}
	cmd := &cobra.Command{
		Use:    "fault",
		Short:  "Inject a fault into the lab's emulated firewall (disk, management link, a crash, a reboot, link errors); no flags clears them",
		Hidden: true,
		Args:   exactArgs(0),
		Example: "  fwab lab fault --disk enospc     # writes under /conf, /var/run, /tmp fail\n" +
			"  fwab lab fault --link-down 10s   # SSH cut and refused for 10 s\n" +
			"  fwab lab fault --kill suricata   # the inspection engine crashes now (mid-probe, say)\n" +
			"  fwab lab fault --reboot          # the firewall reboots now, as a power cut would\n" +
			"  fwab lab fault --link-errors igb1=40  # igb1 counts 40 input errors, as a bad cable's\n" +
			"  fwab lab fault                   # clear",
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := emu.Fault{Disk: o.disk}
			if o.linkDown < 0 {
				return usageErrorf("--link-down %v: want a positive duration", o.linkDown)
			}
			if o.linkDown > 0 {
				f.LinkDownUntil = time.Now().Add(o.linkDown)
			}
			if o.kill != "" {
				f.Kill, f.KillAt = o.kill, time.Now()
			}
			if o.reboot {
				f.RebootAt = time.Now()
			}
			for dev, n := range o.errors {
				if n <= 0 {
					return usageErrorf("--link-errors %s=%d: want a count above 0, such as %s=40", dev, n, dev)
				}
				if f.LinkErrors == nil {
					f.LinkErrors, f.LinkErrorsAt = map[string]uint64{}, time.Now()
				}
				f.LinkErrors[dev] = uint64(n)
			}
			if err := lab.SetFault(opts.dir, f); err != nil {
				return usageError{err}
			}
			fmt.Fprintf(io.Out, "lab fault: disk %q, link down %v, kill %q, reboot %v, link errors %v\n", f.Disk, o.linkDown, f.Kill, o.reboot, f.LinkErrors)
			return nil
		},
	}
	cmd.Flags().StringVar(&o.disk, "disk", "", "make writes under /conf, /var/run and /tmp fail: "+emu.DiskFull+" or "+emu.DiskReadOnly)
	cmd.Flags().DurationVar(&o.linkDown, "link-down", 0, "cut the management link (SSH) for this long")
	cmd.Flags().StringVar(&o.kill, "kill", "", "end a `service` now as a crash would, left down until it is restarted: suricata")
	cmd.Flags().BoolVar(&o.reboot, "reboot", false, "reboot the firewall now, as a power cut or a watchdog would")
	cmd.Flags().StringToInt64Var(&o.errors, "link-errors", nil, "add input errors to interfaces' counters (`DEV=N`, e.g. igb1=40), as a bad cable's damaged frames would")
	return cmd
}
