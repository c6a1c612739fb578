package main

import (
	"context"
	"errors"
	"fmt"
	goio "io"
	"log/slog"
	"os"
	"os/signal"
	"strings"
	"sync"
	"syscall"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/lab/inspect"
)

type labInspectOptions struct {
	mode        string
	queue       uint16
	queues      int
	rules       int
	seed        uint64
	ruleFiles   []string
	dropEvery   int
	failOpen    bool
	interfaces  []string
	status      string
	readBuffer  int
	steer       bool
	streamDepth uint64
	alertLogs   []string // IFACE=PATH
}

// newLabInspectCmd is the lab's inspection engine (its Suricata). The lab
// starts it inside the DUT namespace with `ip netns exec`; it runs in the
// foreground until SIGTERM or SIGINT, prints a status line on SIGUSR1 and
// its counters on exit.
func newLabInspectCmd(io *streams) *cobra.Command {
	o := &labInspectOptions{}
	cmd := &cobra.Command{
		Use:    "inspect --mode inline|ids|legacy [flags]",
		Short:  "Run the lab's IDS/IPS inspection engine in the foreground",
		Hidden: true,
		Args:   exactArgs(0),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runLabInspect(cmd.Context(), io, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.mode, "mode", "", "inline (NFQUEUE verdicts), ids (passive copy) or legacy (passive copy, block offenders)")
	f.Uint16Var(&o.queue, "queue", 0, "inline: first NFQUEUE queue number")
	f.IntVar(&o.queues, "queues", 1, "inline: number of queues, one consumer each (iptables --queue-balance)")
	f.IntVar(&o.rules, "rules", 10000, "number of generated content rules")
	f.Uint64Var(&o.seed, "seed", 1, "seed of the generated ruleset")
	f.StringArrayVar(&o.ruleFiles, "rules-file", nil, "also load the rules of this file, in Suricata's syntax (one content each); repeatable")
	f.IntVar(&o.dropEvery, "drop-every", 10, "every Nth rule is a drop rule, the others alert")
	f.BoolVar(&o.failOpen, "failopen", false, "inline: accept packets when the queue is full (NFQA_CFG_F_FAIL_OPEN)")
	f.StringSliceVar(&o.interfaces, "iface", nil, "interface to inspect (ids, legacy: capture on it; inline: offload check and, with --steer, its traffic); repeatable")
	f.StringVar(&o.status, "status", "", "write a JSON status file here every second and at exit")
	f.Uint64Var(&o.streamDepth, "stream-depth", 0, "inspect only the first N bytes of each TCP flow direction, like Suricata's stream.reassembly.depth (0: every byte)")
	f.IntVar(&o.readBuffer, "rcvbuf", inspect.DefaultReadBuffer, "socket receive buffer in bytes")
	f.StringArrayVar(&o.alertLogs, "alert-log", nil, "ids, legacy: append a fast-log line (Suricata's alerts.log) for each rule that matches a packet of IFACE to PATH; IFACE=PATH, repeatable")
	f.BoolVar(&o.steer, "steer", false, "install the iptables/nftables rules that steer traffic to the engine, and remove them at exit")
	return cmd
}

func runLabInspect(ctx context.Context, io *streams, o *labInspectOptions) error {
	mode, err := inspect.ParseMode(o.mode)
	if err != nil {
		return usageError{err}
	}
	var extra []inspect.Rule
	for _, name := range o.ruleFiles {
		f, err := os.Open(name)
		if err != nil {
			return err
		}
		rules, err := inspect.ParseRules(f, name)
		f.Close()
		if err != nil {
			return err
		}
		extra = append(extra, rules...)
	}
	alertLogs := map[string]string{}
	for _, a := range o.alertLogs {
		ifc, path, ok := strings.Cut(a, "=")
		if !ok || ifc == "" || path == "" {
			return usageError{fmt.Errorf("--alert-log %q: give IFACE=PATH", a)}
		}
		alertLogs[ifc] = path
	}
	rs, err := inspect.GenerateRuleset(inspect.RulesetSpec{Rules: o.rules, Seed: o.seed, DropEvery: o.dropEvery, Extra: extra})
	if err != nil {
		return usageError{err}
	}
	// The log and the SIGUSR1 status lines share stderr from two goroutines.
	errOut := &lockedWriter{w: io.ErrOut}
	log := slog.New(slog.NewTextHandler(errOut, nil))

	// SIGTERM and SIGINT end the run cleanly; SIGUSR1 asks for a status line.
	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)

	// With --steer, traffic is sent to the engine only once it listens (an
	// inline queue without a listener drops everything), and the rules go
	// when it stops.
	steering := inspect.Steering{Mode: mode, Interfaces: o.interfaces, Queue: o.queue, Queues: o.queues, Bypass: o.failOpen}
	steered := false
	ready := func() {
		if !o.steer {
			return
		}
		if err := (inspect.Steerer{}).Install(ctx, steering); err != nil {
			cancel(err)
			return
		}
		steered = true
	}
	defer func() {
		if steered {
			if err := (inspect.Steerer{}).Remove(context.WithoutCancel(ctx), ""); err != nil {
				log.Warn("removing steering rules", "err", err)
			}
		}
	}()

	eng, err := inspect.New(inspect.Options{
		Mode:        mode,
		Ruleset:     rs,
		Queue:       o.queue,
		Queues:      o.queues,
		FailOpen:    o.failOpen,
		Interfaces:  o.interfaces,
		ReadBuffer:  o.readBuffer,
		StreamDepth: o.streamDepth,
		AlertLogs:   alertLogs,
		StatusFile:  o.status,
		Ready:       ready,
		Logger:      log,
	})
	if err != nil {
		return usageError{err}
	}
	defer eng.Close()

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	defer signal.Stop(usr1)
	go func() {
		for {
			select {
			case <-ctx.Done():
				return
			case <-usr1:
				fmt.Fprintln(errOut, eng.Status().Line())
			}
		}
	}()

	err = eng.Run(ctx)
	fmt.Fprintln(io.Out, eng.Status().Line())
	if err != nil {
		return err
	}
	if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
		return fmt.Errorf("steering traffic to the engine: %w", cause)
	}
	return nil
}

// lockedWriter serializes writes from several goroutines.
type lockedWriter struct {
	mu sync.Mutex
	w  goio.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
