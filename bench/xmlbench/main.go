// Command xmlbench measures fwab's config.xml load + one knob change + save
// on a large generated config. bench/configxml.sh runs it beside the same
// work done with Python's xml.etree.ElementTree.
package main

import (
	"flag"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/fwab/fwab/configxml"
)

func main() {
	generate := flag.String("generate", "", "write a generated config to `FILE` and exit")
	rules := flag.Int("rules", 20000, "filter rules in the generated config")
	rrd := flag.Int("rrd-mb", 37, "MiB of RRD data in the generated config")
	in := flag.String("in", "", "config to load")
	out := flag.String("out", "", "where to save the changed config")
	flag.Parse()

	if *generate != "" {
		data := configxml.GenerateConfig(configxml.GenerateOptions{Rules: *rules, RRDBytes: *rrd << 20})
		if err := os.WriteFile(*generate, data, 0o644); err != nil {
			fail(err)
		}
		return
	}
	start := time.Now()
	f, err := os.Open(*in)
	if err != nil {
		fail(err)
	}
	c, err := configxml.Load(f)
	f.Close()
	if err != nil {
		fail(err)
	}
	if err := c.Set("offload.tso", "on"); err != nil {
		fail(err)
	}
	w, err := os.Create(*out)
	if err != nil {
		fail(err)
	}
	if _, err := c.WriteTo(w); err != nil {
		fail(err)
	}
	if err := w.Close(); err != nil {
		fail(err)
	}
	elapsed := time.Since(start)
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	fmt.Printf("%.3f %d\n", elapsed.Seconds(), ru.Maxrss) // seconds, peak RSS in KiB
}

func fail(err error) {
	fmt.Fprintln(os.Stderr, "xmlbench:", err)
	os.Exit(1)
}
