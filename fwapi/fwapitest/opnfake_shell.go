package fwapitest

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/fwab/fwab/configxml"
)

// ShellResult replaces a command's outcome in the shell fake.
type ShellResult struct {
	Stdout, Stderr string
	Exit           int
	Err            error // a transport failure: the SSH session was lost
}

// Shell is the OPNsense fake's SSH side: each command line runs through a
// real POSIX shell interpreter (mvdan.cc/sh) whose commands are the few
// FreeBSD/OPNsense ones the driver uses, on the fake's folder standing for
// "/". Anything else is "not found" (exit 127). It satisfies fwapi.Runner.
type Shell struct {
	f *OPNsense

	mu        sync.Mutex
	commands  []string   // command lines run
	execs     [][]string // every simple command with its arguments
	overrides map[string]ShellResult
	ifaces    []*fakeIface
	daemons   map[string]context.CancelFunc // pid -> stop
	nextPID   int
	pfRules   int // loaded filter rules, generated ones included
	pfGen     int // of which labelled fwab-generated
	pfNAT     []string
	tables    map[string]int
	sysctl    map[string]string
	cpTimes   []string
}

// Shell returns the fake's shell side, created on first use.
func (f *OPNsense) Shell() *Shell {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shell == nil {
		f.shell = &Shell{
			f:         f,
			overrides: map[string]ShellResult{},
			daemons:   map[string]context.CancelFunc{},
			nextPID:   4000,
			ifaces:    fakeIfaces(f.opts.Config),
			pfNAT:     []string{`nat on vtnet0 inet from 198.18.1.0/24 to any -> 198.19.0.1 port 1024:65535`},
			tables:    map[string]int{"bogons": 3, "sshlockout": 0},
			sysctl: map[string]string{
				"vm.stats.vm.v_page_count": "1000000",
				"vm.stats.vm.v_free_count": "750000",
				"dev.cpu.0.temperature":    "47.0C",
				"hw.ncpu":                  "2",
			},
			cpTimes: []string{"100 0 50 0 850 200 0 0 0 800", "200 0 100 0 1700 300 0 0 0 1700"},
		}
		f.shell.applyOffloadConfig("") // as booted from config.xml
		total, gen := configRules(f.opts.Config)
		f.shell.pfRules, f.shell.pfGen = systemRules+total, gen
	}
	return f.shell
}

// Override makes every command line that starts with prefix give r instead
// of running.
func (s *Shell) Override(prefix string, r ShellResult) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.overrides[prefix] = r
}

// SetOptions sets the ifconfig options of one interface, adding it if new.
func (s *Shell) SetOptions(dev string, options []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.ifaces {
		if i.name == dev {
			i.options = slices.Clone(options)
			return
		}
	}
	s.ifaces = append(s.ifaces, &fakeIface{name: dev, options: slices.Clone(options)})
}

// Options returns the ifconfig options of one interface.
func (s *Shell) Options(dev string) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, i := range s.ifaces {
		if i.name == dev {
			return slices.Clone(i.options)
		}
	}
	return nil
}

// SetPF sets the loaded filter rule count, NAT lines and tables.
func (s *Shell) SetPF(rules int, nat []string, tables map[string]int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pfRules, s.pfGen, s.pfNAT, s.tables = rules, 0, nat, tables
}

// Commands returns the command lines run so far.
func (s *Shell) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// Execs returns every simple command run, with its arguments as the shell
// split them.
func (s *Shell) Execs() [][]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([][]string(nil), s.execs...)
}

// Run implements fwapi.Runner.
func (s *Shell) Run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, exit int, err error) {
	s.mu.Lock()
	s.commands = append(s.commands, cmd)
	var over *ShellResult
	for p, r := range s.overrides {
		if strings.HasPrefix(cmd, p) {
			r := r
			over = &r
		}
	}
	s.mu.Unlock()
	if over != nil {
		return []byte(over.Stdout), []byte(over.Stderr), over.Exit, over.Err
	}
	return s.interpret(ctx, cmd, stdin)
}

// interpret runs a command line through the shell interpreter.
func (s *Shell) interpret(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, exit int, err error) {
	prog, err := syntax.NewParser().Parse(strings.NewReader(cmd), "")
	if err != nil {
		return nil, []byte(err.Error()), 2, nil
	}
	if stdin == nil {
		stdin = strings.NewReader("")
	}
	var out, errOut bytes.Buffer
	r, err := interp.New(
		interp.StdIO(stdin, &out, &errOut),
		interp.Dir("/"),
		interp.OpenHandler(s.open),
		interp.StatHandler(func(ctx context.Context, name string, followSymlinks bool) (os.FileInfo, error) {
			return os.Stat(s.path(name))
		}),
		interp.ExecHandlers(func(next interp.ExecHandlerFunc) interp.ExecHandlerFunc { return s.exec }),
	)
	if err != nil {
		return nil, nil, 0, err
	}
	err = r.Run(ctx, prog)
	if st, ok := interp.IsExitStatus(err); ok {
		return out.Bytes(), errOut.Bytes(), int(st), nil
	}
	if err != nil {
		return out.Bytes(), errOut.Bytes(), 0, err
	}
	return out.Bytes(), errOut.Bytes(), 0, nil
}

// path maps a firewall path into the fake's folder.
func (s *Shell) path(p string) string {
	if !filepath.IsAbs(p) {
		p = "/" + p
	}
	return filepath.Join(s.f.root, filepath.Clean(p))
}

func (s *Shell) open(ctx context.Context, path string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
	if path == "/dev/null" {
		return os.OpenFile(os.DevNull, flag, perm)
	}
	return os.OpenFile(s.path(path), flag, perm)
}

func (s *Shell) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	s.mu.Lock()
	s.execs = append(s.execs, append([]string(nil), args...))
	s.mu.Unlock()
	fail := func(format string, a ...any) error {
		fmt.Fprintf(hc.Stderr, args[0]+": "+format+"\n", a...)
		return interp.NewExitStatus(1)
	}
	switch args[0] {
	case "cat":
		if len(args) == 1 {
			_, err := io.Copy(hc.Stdout, hc.Stdin)
			return err
		}
		for _, a := range args[1:] {
			b, err := os.ReadFile(s.path(a))
			if err != nil {
				return fail("%s: No such file or directory", a)
			}
			hc.Stdout.Write(b)
		}
	case "cp":
		if len(args) != 3 {
			return fail("usage: cp source target")
		}
		b, err := os.ReadFile(s.path(args[1]))
		if err != nil {
			return fail("%s: No such file or directory", args[1])
		}
		if err := os.WriteFile(s.path(args[2]), b, 0o644); err != nil {
			return fail("%v", err)
		}
	case "mv":
		if len(args) != 3 {
			return fail("usage: mv source target")
		}
		if err := os.Rename(s.path(args[1]), s.path(args[2])); err != nil {
			return fail("rename %s to %s: No such file or directory", args[1], args[2])
		}
	case "rm":
		recursive, force := false, false
		for _, a := range args[1:] {
			if strings.HasPrefix(a, "-") {
				recursive = recursive || strings.ContainsAny(a, "rR")
				force = force || strings.Contains(a, "f")
				continue
			}
			p := s.path(a)
			info, err := os.Stat(p)
			switch {
			case err != nil && force:
			case err != nil:
				return fail("%s: No such file or directory", a)
			case info.IsDir() && !recursive:
				return fail("%s: is a directory", a)
			default:
				os.RemoveAll(p)
			}
		}
	case "mkdir":
		parents := false
		for _, a := range args[1:] {
			if a == "-p" {
				parents = true
				continue
			}
			var err error
			if parents {
				err = os.MkdirAll(s.path(a), 0o755)
			} else if err = os.Mkdir(s.path(a), 0o755); errors.Is(err, os.ErrExist) {
				return fail("%s: File exists", a)
			}
			if err != nil {
				return fail("%s: No such file or directory", a)
			}
		}
	case "sync":
	case "/usr/local/etc/rc.reload_all":
		// reloads everything from config.xml: the NICs take its offload flags
		s.applyOffloadConfig("")
	case "sleep":
		if len(args) != 2 {
			return fail("usage: sleep seconds")
		}
		d, err := time.ParseDuration(args[1] + "s")
		if err != nil {
			return fail("%s: invalid time interval", args[1])
		}
		t := time.NewTimer(d)
		defer t.Stop()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-t.C:
		}
	case "date":
		if len(args) != 2 || args[1] != "+%s" {
			return fail("only date +%%s is known here")
		}
		fmt.Fprintln(hc.Stdout, time.Now().Unix())
	case "daemon":
		return s.daemon(hc, args[1:], fail)
	case "pkill":
		if len(args) != 3 || args[1] != "-F" {
			return fail("only pkill -F pidfile is known here")
		}
		b, err := os.ReadFile(s.path(args[2]))
		if err != nil {
			return fail("%s: No such file or directory", args[2])
		}
		s.mu.Lock()
		cancel, ok := s.daemons[strings.TrimSpace(string(b))]
		delete(s.daemons, strings.TrimSpace(string(b)))
		s.mu.Unlock()
		if !ok {
			return interp.NewExitStatus(1) // no such process
		}
		cancel()
	case "sha256":
		if len(args) != 3 || args[1] != "-q" {
			return fail("usage: sha256 -q file")
		}
		b, err := os.ReadFile(s.path(args[2]))
		if err != nil {
			return fail("%s: No such file or directory", args[2])
		}
		sum := sha256.Sum256(b)
		fmt.Fprintln(hc.Stdout, hex.EncodeToString(sum[:]))
	case "wc":
		if len(args) != 2 || args[1] != "-l" {
			return fail("only wc -l is known here")
		}
		b, err := io.ReadAll(hc.Stdin)
		if err != nil {
			return err
		}
		fmt.Fprintf(hc.Stdout, "%8d\n", bytes.Count(b, []byte("\n")))
	case "hostname":
		fmt.Fprintln(hc.Stdout, "fw1.lab.example")
	case "configctl":
		if len(args) == 4 && args[1] == "interface" && args[2] == "reconfigure" {
			s.f.mu.Lock()
			s.f.recordLocked(configxml.ActionInterfaces)
			s.f.mu.Unlock()
			s.applyOffloadConfig(args[3])
		}
		fmt.Fprintln(hc.Stdout, "OK")
	case "ifconfig":
		return s.ifconfig(hc, args[1:], fail)
	case "pfctl":
		return s.pfctl(hc, args[1:], fail)
	case "sysctl":
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, name := range args[1:] {
			if name == "-n" {
				continue
			}
			if name == "kern.cp_times" {
				fmt.Fprintln(hc.Stdout, s.cpTimes[0])
				s.cpTimes = append(s.cpTimes[1:], s.cpTimes[0])
				continue
			}
			v, ok := s.sysctl[name]
			if !ok {
				fmt.Fprintf(hc.Stderr, "sysctl: unknown oid '%s'\n", name)
				return interp.NewExitStatus(1)
			}
			fmt.Fprintln(hc.Stdout, v)
		}
	case "netstat":
		fmt.Fprint(hc.Stdout, "1024/2301/3325 mbufs in use (current/cache/total)\n1020/1254/2274/1000000 mbuf clusters in use (current/cache/total/max)\n")
	default:
		fmt.Fprintf(hc.Stderr, "sh: %s: not found\n", args[0])
		return interp.NewExitStatus(127)
	}
	return nil
}

func (s *Shell) pfctl(hc interp.HandlerContext, args []string, fail func(string, ...any) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case len(args) == 1 && args[0] == "-sr":
		fmt.Fprintln(hc.Stdout, "scrub on vtnet0 all fragment reassemble")
		for i := 0; i < s.pfRules-s.pfGen; i++ {
			fmt.Fprintf(hc.Stdout, "pass in quick on lo0 all flags S/SA keep state label \"system %d\"\n", i)
		}
		for i := 0; i < s.pfGen; i++ {
			fmt.Fprintf(hc.Stdout, "block drop in quick on vtnet1 inet proto tcp from 198.18.128.%d to 198.19.200.1 port = %d label \"fwab-generated %d\"\n", i%250, 1000+i, i)
		}
	case len(args) == 1 && args[0] == "-sn":
		for _, l := range s.pfNAT {
			fmt.Fprintln(hc.Stdout, l)
		}
	case len(args) == 2 && args[0] == "-s" && args[1] == "Tables":
		for _, name := range sortedNames(s.tables) {
			fmt.Fprintln(hc.Stdout, name)
		}
	case len(args) == 4 && args[0] == "-t" && args[2] == "-T" && args[3] == "show":
		n, ok := s.tables[args[1]]
		if !ok {
			return fail("Table does not exist.")
		}
		for i := 0; i < n; i++ {
			fmt.Fprintf(hc.Stdout, "   198.18.%d.%d\n", i/250, i%250)
		}
	default:
		return fail("unsupported arguments %q", args)
	}
	return nil
}

// ErrSessionLost is what ShellResult.Err may carry to stand for a dropped
// SSH session.
var ErrSessionLost = errors.New("ssh: session lost")

// fakeIface is one interface as ifconfig shows it.
type fakeIface struct {
	name, inet string
	options    []string
}

// nicOptions are what a fresh NIC shows: every offload on.
var nicOptions = []string{"RXCSUM", "TXCSUM", "VLAN_MTU", "VLAN_HWTAGGING", "JUMBO_MTU", "VLAN_HWCSUM", "TSO4", "TSO6", "LRO", "RXCSUM_IPV6", "TXCSUM_IPV6", "LINKSTATE"}

// fakeIfaces builds the interfaces of a config: one NIC per assigned device
// plus lo0.
func fakeIfaces(config []byte) []*fakeIface {
	var out []*fakeIface
	if c, err := configxml.LoadBytes(config); err == nil {
		for _, i := range c.Interfaces() {
			if i.Device != "" {
				out = append(out, &fakeIface{name: i.Device, inet: i.IPAddr, options: slices.Clone(nicOptions)})
			}
		}
	}
	return append(out, &fakeIface{name: "lo0", inet: "127.0.0.1", options: []string{"RXCSUM", "TXCSUM", "LINKSTATE", "RXCSUM_IPV6", "TXCSUM_IPV6"}})
}

// opnIfconfigFlags maps ifconfig arguments to the options they switch.
var opnIfconfigFlags = map[string][]string{
	"txcsum": {"TXCSUM"}, "rxcsum": {"RXCSUM"}, "txcsum6": {"TXCSUM_IPV6"}, "rxcsum6": {"RXCSUM_IPV6"},
	"tso": {"TSO4", "TSO6"}, "tso4": {"TSO4"}, "tso6": {"TSO6"}, "lro": {"LRO"}, "vlanhwtso": {"VLAN_HWTSO"},
}

// ifconfig prints interfaces as FreeBSD does ("ifconfig", "-a", "IF") or
// switches options ("IF -txcsum tso ...").
func (s *Shell) ifconfig(hc interp.HandlerContext, args []string, fail func(string, ...any) error) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(args) == 0 || (len(args) == 1 && args[0] == "-a") {
		for _, i := range s.ifaces {
			printIface(hc.Stdout, i)
		}
		return nil
	}
	var iface *fakeIface
	for _, i := range s.ifaces {
		if i.name == args[0] {
			iface = i
		}
	}
	if iface == nil {
		return fail("interface %s does not exist", args[0])
	}
	if len(args) == 1 {
		printIface(hc.Stdout, iface)
		return nil
	}
	for _, a := range args[1:] {
		name, off := strings.CutPrefix(a, "-")
		opts, ok := opnIfconfigFlags[name]
		if !ok {
			return fail("%s: bad value", a)
		}
		for _, o := range opts {
			iface.options = slices.DeleteFunc(iface.options, func(x string) bool { return x == o })
			if !off {
				iface.options = append(iface.options, o)
			}
		}
	}
	return nil
}

func printIface(w io.Writer, i *fakeIface) {
	fmt.Fprintf(w, "%s: flags=1008843<UP,BROADCAST,RUNNING,SIMPLEX,MULTICAST,LOWER_UP> metric 0 mtu 1500\n", i.name)
	fmt.Fprintf(w, "\toptions=%x<%s>\n", len(i.options), strings.Join(i.options, ","))
	if i.inet != "" {
		fmt.Fprintf(w, "\tinet %s netmask 0xffffff00\n", i.inet)
	}
	fmt.Fprintf(w, "\tmedia: Ethernet autoselect (10Gbase-T <full-duplex>)\n\tstatus: active\n")
}

// applyOffloadConfig sets the offload options of the interface with key
// (all assigned interfaces when key is "") from config.xml, as reconfiguring
// an interface does on the firewall.
func (s *Shell) applyOffloadConfig(key string) {
	b, err := os.ReadFile(filepath.Join(s.f.root, "conf/config.xml"))
	if err != nil {
		return
	}
	c, err := configxml.LoadBytes(b)
	if err != nil {
		return
	}
	devs := map[string]bool{}
	for _, i := range c.Interfaces() {
		if key == "" || i.Key == key {
			devs[i.Device] = true
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, knob := range []struct{ name, flag string }{{"offload.checksum", "txcsum"}, {"offload.checksum", "rxcsum"}, {"offload.checksum", "txcsum6"}, {"offload.checksum", "rxcsum6"}, {"offload.tso", "tso"}, {"offload.lro", "lro"}} {
		v, err := c.Get(knob.name)
		if err != nil {
			continue
		}
		for _, i := range s.ifaces {
			if !devs[i.name] {
				continue
			}
			for _, o := range opnIfconfigFlags[knob.flag] {
				i.options = slices.DeleteFunc(i.options, func(x string) bool { return x == o })
				if v == "on" {
					i.options = append(i.options, o)
				}
			}
		}
	}
}

// daemon runs "daemon -f -p PIDFILE /bin/sh SCRIPT" as FreeBSD's daemon(8)
// would: detached from the session, its pid in PIDFILE, until the script ends
// or pkill -F stops it.
func (s *Shell) daemon(hc interp.HandlerContext, args []string, fail func(string, ...any) error) error {
	var pidfile string
	for len(args) > 0 && strings.HasPrefix(args[0], "-") {
		switch args[0] {
		case "-f":
			args = args[1:]
		case "-p":
			if len(args) < 2 {
				return fail("-p needs a file")
			}
			pidfile, args = args[1], args[2:]
		default:
			return fail("unknown option %s", args[0])
		}
	}
	if len(args) != 2 || args[0] != "/bin/sh" {
		return fail("only daemon [-f] [-p pidfile] /bin/sh SCRIPT is known here")
	}
	script, err := os.ReadFile(s.path(args[1]))
	if err != nil {
		return fail("%s: No such file or directory", args[1])
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.nextPID++
	pid := fmt.Sprint(s.nextPID)
	s.daemons[pid] = cancel
	s.mu.Unlock()
	if pidfile != "" {
		if err := os.WriteFile(s.path(pidfile), []byte(pid+"\n"), 0o644); err != nil {
			cancel()
			return fail("%v", err)
		}
	}
	go func() {
		defer cancel()
		s.interpret(ctx, string(script), nil)
		s.mu.Lock()
		delete(s.daemons, pid)
		s.mu.Unlock()
		if pidfile != "" {
			os.Remove(s.path(pidfile))
		}
	}()
	return nil
}

// stopDaemons ends every detached script (the fake's "power off").
func (s *Shell) stopDaemons() {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, cancel := range s.daemons {
		cancel()
		delete(s.daemons, pid)
	}
}

// ReadFile reads a file on the firewall, as the SSH transport does.
func (s *Shell) ReadFile(ctx context.Context, name string) ([]byte, error) {
	out, errOut, exit, err := s.Run(ctx, "cat '"+strings.ReplaceAll(name, "'", `'\''`)+"'", nil)
	if err != nil {
		return nil, err
	}
	if exit != 0 {
		return nil, fmt.Errorf("read %s: %s", name, strings.TrimSpace(string(errOut)))
	}
	return out, nil
}

// WriteFileAtomic writes a file on the firewall through a temporary file
// beside it and a rename, as the SSH transport does.
func (s *Shell) WriteFileAtomic(ctx context.Context, name string, data []byte) error {
	q := func(p string) string { return "'" + strings.ReplaceAll(p, "'", `'\''`) + "'" }
	tmp := filepath.Join(filepath.Dir(name), "."+filepath.Base(name)+".fwab-tmp")
	_, errOut, exit, err := s.Run(ctx, "cat > "+q(tmp)+" && sync && mv "+q(tmp)+" "+q(name), bytes.NewReader(data))
	if err != nil {
		return err
	}
	if exit != 0 {
		s.Run(ctx, "rm -f "+q(tmp), nil)
		return fmt.Errorf("write %s: %s", name, strings.TrimSpace(string(errOut)))
	}
	return nil
}

// systemRules are the rules pf loads whatever the config says (anti-lockout,
// default deny, ...).
const systemRules = 12

// configRules counts the filter rules in a config: legacy <filter><rule> and
// MVC <OPNsense><Firewall><Filter><rules><rule>.
func configRules(config []byte) (total, generated int) {
	c, err := configxml.LoadBytes(config)
	if err != nil {
		return 0, 0
	}
	root := c.Root()
	rules := append(root.FindElements("filter/rule"), root.FindElements("OPNsense/Firewall/Filter/rules/rule")...)
	for _, r := range rules {
		for _, d := range []string{"descr", "description"} {
			if e := r.SelectElement(d); e != nil && strings.Contains(e.Text(), "fwab-generated") {
				generated++
				break
			}
		}
	}
	return len(rules), generated
}

// loadFilter stands for a filter reload: pf gets the rules config.xml has now.
func (s *Shell) loadFilter() {
	b, err := os.ReadFile(filepath.Join(s.f.root, "conf/config.xml"))
	if err != nil {
		return
	}
	total, gen := configRules(b)
	s.mu.Lock()
	s.pfRules, s.pfGen = systemRules+total, gen
	s.mu.Unlock()
}
