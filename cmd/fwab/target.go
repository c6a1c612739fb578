package main

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/fwab/fwab/fwapi"
	"github.com/fwab/fwab/matrix"
)

func newTargetCmd(io *streams) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "target",
		Short: "Write, list and check the firewalls in the targets file",
		Long: "Write, list and check the firewalls in the targets file (default " + fwapi.DefaultTargetsPath() + ").\n" +
			"docs/targets.md describes every key. Secrets are never given as flags: name the files or\n" +
			"environment variables that hold them.",
	}
	var path string
	cmd.PersistentFlags().StringVar(&path, "targets", fwapi.DefaultTargetsPath(), "the targets `file`")
	cmd.AddCommand(newTargetAddCmd(io, &path), newTargetListCmd(io, &path), newTargetTestCmd(io, &path))
	return cmd
}

// targetAddOptions are the flags of `fwab target add`; every secret is a
// file or an environment variable's name.
type targetAddOptions struct {
	t       fwapi.Target
	ssh     fwapi.SSHSpec
	api     fwapi.APISpec
	client  endpointFlags
	server  endpointFlags
	replace bool
	noSSH   bool
	// linkName names the first link; links are the further ones, each
	// a --link's KEY=VALUE list.
	linkName string
	links    []string
}

type endpointFlags struct{ addr, netns, sshHost, sshUser, sshKey string }

// endpointField is one of an endpoint's settings: its flag name after
// --client-/--server- (a --link's key after client-/server-), where it
// goes, and its help with WHERE for the side's network.
type endpointField struct {
	suffix string
	to     *string
	usage  string
}

// fields are the endpoint's settings, for the first link's flags and a
// --link's keys alike.
func (e *endpointFlags) fields() []endpointField {
	return []endpointField{
		{"addr", &e.addr, "address of the WHERE-side traffic host"},
		{"netns", &e.netns, "the WHERE-side host is this local network namespace"},
		{"ssh-host", &e.sshHost, "the WHERE-side host is reached over SSH at this host"},
		{"ssh-user", &e.sshUser, "SSH user on the WHERE-side host"},
		{"ssh-key-file", &e.sshKey, "SSH key `file` for the WHERE-side host"},
	}
}

// parseLink reads one --link: a comma-separated KEY=VALUE list with the
// first link's flag names as keys (name=NAME, client-addr=…, server-netns=…).
func parseLink(arg string) (string, fwapi.EndpointPair, error) {
	var name string
	var client, server endpointFlags
	type key struct {
		name string
		to   *string
	}
	keys := []key{{"name", &name}}
	for _, side := range []struct {
		name string
		ep   *endpointFlags
	}{{"client", &client}, {"server", &server}} {
		for _, f := range side.ep.fields() {
			keys = append(keys, key{side.name + "-" + f.suffix, f.to})
		}
	}
	seen := map[string]bool{}
	for kv := range strings.SplitSeq(arg, ",") {
		k, v, ok := strings.Cut(kv, "=")
		if !ok {
			return "", fwapi.EndpointPair{}, fmt.Errorf("--link %q: %q is not KEY=VALUE", arg, kv)
		}
		i := slices.IndexFunc(keys, func(x key) bool { return x.name == k })
		if i < 0 {
			names := make([]string, len(keys))
			for i, x := range keys {
				names[i] = x.name
			}
			return "", fwapi.EndpointPair{}, fmt.Errorf("--link %q: unknown key %q; the keys are %s", arg, k, strings.Join(names, ", "))
		}
		if seen[k] {
			return "", fwapi.EndpointPair{}, fmt.Errorf("--link %q: %s is given twice", arg, k)
		}
		seen[k] = true
		*keys[i].to = v
	}
	if name == "" {
		return "", fwapi.EndpointPair{}, fmt.Errorf("--link %q: give the link a name= (its name in a probe's links:)", arg)
	}
	if err := checkLinkName("--link name", name); err != nil {
		return "", fwapi.EndpointPair{}, err
	}
	return name, fwapi.EndpointPair{Client: client.endpoint(), Server: server.endpoint()}, nil
}

// checkLinkName refuses a link name a probe's links: could not name.
func checkLinkName(what, name string) error {
	if !matrix.ValidLinkName(name) {
		return fmt.Errorf("%s %q: use letters, digits, '-' and '_', starting with a letter or digit (at most 32)", what, name)
	}
	return nil
}

func (e endpointFlags) endpoint() fwapi.Endpoint {
	ep := fwapi.Endpoint{Addr: e.addr, Netns: e.netns}
	if e.sshHost != "" {
		ep.SSH = &fwapi.SSHHost{Host: e.sshHost, SSHSpec: fwapi.SSHSpec{User: e.sshUser, KeyFile: e.sshKey}}
	}
	return ep
}

func newTargetAddCmd(io *streams, path *string) *cobra.Command {
	var o targetAddOptions
	cmd := &cobra.Command{
		Use:   "add NAME --flavor pfsense|opnsense --host HOST [flags]",
		Short: "Add a firewall to the targets file (or replace one with --replace)",
		Example: "  fwab target add edge1 --flavor pfsense --host 192.0.2.1 --ssh-user admin --ssh-key-file ~/.ssh/fwab \\\n" +
			"      --client-ssh-host lan-box --client-addr 198.18.1.10 --server-ssh-host wan-box --server-addr 198.19.1.10\n" +
			"  fwab target add opn1 --flavor opnsense --host 192.0.2.2 --ssh-user root --ssh-key-file ~/.ssh/fwab \\\n" +
			"      --api-url https://192.0.2.2 --api-key-file ~/.config/fwab/opn1.key --api-secret-file ~/.config/fwab/opn1.secret --api-ca-file opn1-ca.pem\n" +
			"  fwab target add edge2 --flavor pfsense --host 192.0.2.3 --ssh-user admin --ssh-key-file ~/.ssh/fwab \\\n" +
			"      --client-ssh-host lan-box --client-addr 198.18.1.10 --server-ssh-host wan-box --server-addr 198.19.1.10 \\\n" +
			"      --link name=link2,client-ssh-host=lan2-box,client-addr=198.18.2.10,server-ssh-host=wan2-box,server-addr=198.19.2.10",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runTargetAdd(io, *path, args[0], o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.t.Flavor, "flavor", "", "pfsense or opnsense (required)")
	f.StringVar(&o.t.Host, "host", "", "the firewall's management address or name (required)")
	f.StringVar(&o.ssh.User, "ssh-user", "", "SSH user (admin or root on pfSense, root on OPNsense)")
	f.IntVar(&o.ssh.Port, "ssh-port", 0, "SSH port (default 22)")
	f.StringVar(&o.ssh.KeyFile, "ssh-key-file", "", "SSH private key `file`")
	f.StringVar(&o.ssh.PasswordFile, "ssh-password-file", "", "a `file` whose first line is the SSH password")
	f.BoolVar(&o.ssh.Agent, "ssh-agent", false, "use the keys of the running ssh-agent")
	f.StringVar(&o.ssh.KnownHosts, "ssh-known-hosts", "", "known_hosts `file` (default ~/.ssh/known_hosts)")
	f.BoolVar(&o.noSSH, "no-ssh", false, "no SSH access (an OPNsense driven through its API alone)")
	f.StringVar(&o.api.URL, "api-url", "", "the REST API's https:// URL (OPNsense)")
	f.StringVar(&o.api.KeyFile, "api-key-file", "", "`file` holding the API key")
	f.StringVar(&o.api.KeyEnv, "api-key-env", "", "environment `variable` holding the API key")
	f.StringVar(&o.api.SecretFile, "api-secret-file", "", "`file` holding the API secret")
	f.StringVar(&o.api.SecretEnv, "api-secret-env", "", "environment `variable` holding the API secret")
	f.StringVar(&o.api.CAFile, "api-ca-file", "", "PEM `file` of the CA that signed the firewall's certificate")
	f.StringVar(&o.api.Fingerprint, "api-fingerprint", "", "pin the certificate by its SHA-256 (hex)")
	for _, e := range []struct {
		side string
		ep   *endpointFlags
	}{{"client", &o.client}, {"server", &o.server}} {
		where := map[string]string{"client": "LAN", "server": "WAN"}[e.side]
		for _, field := range e.ep.fields() {
			f.StringVar(field.to, e.side+"-"+field.suffix, "", strings.ReplaceAll(field.usage, "WHERE", where))
		}
	}
	f.StringVar(&o.linkName, "link-name", "", "name the first link, the --client-*/--server-* pair (default "+fwapi.DefaultLinkName+")")
	f.StringArrayVar(&o.links, "link", nil, "add a further link: `KEYS` is name=NAME,client-addr=…,server-addr=…, keyed by the names of the --client-*/--server-* flags (repeatable)")
	f.BoolVar(&o.replace, "replace", false, "replace a target of the same name")
	return cmd
}

func runTargetAdd(io *streams, path, name string, o targetAddOptions) error {
	t := o.t
	t.Name = name
	if !o.noSSH {
		ssh := o.ssh
		t.SSH = &ssh
	}
	if o.api != (fwapi.APISpec{}) {
		api := o.api
		t.API = &api
	}
	t.Endpoints = fwapi.Endpoints{Client: o.client.endpoint(), Server: o.server.endpoint(), Name: o.linkName}
	if o.linkName != "" {
		if err := checkLinkName("--link-name", o.linkName); err != nil {
			return usageErrorf("target %s: %w", name, err)
		}
	}
	for _, arg := range o.links {
		ln, pair, err := parseLink(arg)
		if err != nil {
			return usageErrorf("target %s: %w", name, err)
		}
		if _, dup := t.Endpoints.Links[ln]; dup {
			return usageErrorf("target %s: --link %s is given twice", name, ln)
		}
		if ln == t.Endpoints.FirstLink() {
			return usageErrorf("target %s: --link %s: %s is the first link's name (--link-name); name it otherwise", name, ln, ln)
		}
		if t.Endpoints.Links == nil {
			t.Endpoints.Links = map[string]fwapi.EndpointPair{}
		}
		t.Endpoints.Links[ln] = pair
	}
	if err := checkNewTarget(&t); err != nil {
		return usageError{fmt.Errorf("target %s: %w", name, err)}
	}
	tf, err := fwapi.EditTargets(path) // a broken target may be the one --replace fixes
	if err != nil {
		return usageError{err}
	}
	if _, exists := tf.Targets[name]; exists && !o.replace {
		return usageErrorf("target %s is already in %s: give --replace to overwrite it", name, path)
	}
	tf.Targets[name] = &t
	if err := tf.Save(path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	fmt.Fprintf(io.Out, "wrote %s: target %s (%s at %s); check it with 'fwab target test %s'\n", path, name, t.Flavor, t.Host, name)
	return nil
}

// checkNewTarget refuses a target fwab could not drive, and files it names
// that are missing or that others may read: the targets file's own checks
// (Target.Problems, Target.FileProblems), said with target add's flags.
func checkNewTarget(t *fwapi.Target) error {
	var problems []string
	all := t.Problems()
	if t.Endpoints.Empty() {
		all = append(all, t.EndpointProblems()...) // a target add is for sweeps
	}
	for _, p := range append(all, t.FileProblems()...) {
		rest, inLink := strings.CutPrefix(p.Field, "endpoints.links.")
		link, _, _ := strings.Cut(rest, ".")
		switch {
		case inLink:
			problems = append(problems, "--link "+link+": "+p.Text(flagOf))
		case p.Field == "ssh" && t.Flavor == "pfsense":
			problems = append(problems, "pfSense is driven over SSH: drop --no-ssh")
		case p.Field == "ssh":
			problems = append(problems, "give SSH (--ssh-user) or the API (--api-url)")
		default:
			problems = append(problems, p.Text(flagOf))
		}
	}
	if len(problems) > 0 {
		return errors.New(strings.Join(problems, "; "))
	}
	return nil
}

// flagOf is the target add flag that writes a targets file key:
// ssh.key_file is --ssh-key-file, endpoints.client.addr --client-addr,
// endpoints.links.NAME.server.netns server-netns (a key of --link's value).
func flagOf(field string) string {
	dashed := func(s string) string { return strings.NewReplacer(".", "-", "_", "-").Replace(s) }
	switch field {
	case "ssh.agent":
		return "--ssh-agent"
	case "lease":
		return "lease"
	}
	rest, ok := strings.CutPrefix(field, "endpoints.")
	if !ok {
		return "--" + dashed(field)
	}
	if rest == "name" {
		return "--link-name"
	}
	if link, ok := strings.CutPrefix(rest, "links."); ok {
		_, key, _ := strings.Cut(link, ".")
		return dashed(key) // a key of --link NAME's value
	}
	return "--" + dashed(rest)
}

// targetRow is one target as `fwab target list --json` prints it.
type targetRow struct {
	Name   string `json:"name"`
	Flavor string `json:"flavor"`
	Host   string `json:"host"`
	SSH    string `json:"ssh,omitempty"`
	API    string `json:"api,omitempty"`
	Client string `json:"client"`
	Server string `json:"server"`
	// Links are the target's links by name, the first (Client, Server)
	// among them.
	Links []string `json:"links"`
}

func newTargetListCmd(io *streams, path *string) *cobra.Command {
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the targets file's firewalls",
		Args:  exactArgs(0),
		RunE: func(cmd *cobra.Command, args []string) error {
			tf, err := readTargets(*path)
			if err != nil {
				return err
			}
			names := make([]string, 0, len(tf.Targets))
			for n := range tf.Targets {
				names = append(names, n)
			}
			slices.Sort(names)
			rows := make([]targetRow, 0, len(names))
			for _, n := range names {
				rows = append(rows, rowOf(tf.Targets[n]))
			}
			if asJSON {
				return writeJSON(io.Out, rows)
			}
			if len(rows) == 0 {
				fmt.Fprintf(io.ErrOut, "no targets in %s: 'fwab lab up' writes the lab's, 'fwab target add' writes yours\n", *path)
				return nil
			}
			tw := tabwriter.NewWriter(io.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tFLAVOR\tHOST\tSSH\tAPI\tCLIENT\tSERVER\tLINKS")
			for _, r := range rows {
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Name, r.Flavor, r.Host, dash(r.SSH), dash(r.API), r.Client, r.Server, strings.Join(r.Links, ","))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON")
	return cmd
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func rowOf(t *fwapi.Target) targetRow {
	r := targetRow{Name: t.Name, Flavor: t.Flavor, Host: t.Host, Client: endpointText(t.Endpoints.Client), Server: endpointText(t.Endpoints.Server), Links: t.Endpoints.LinkNames()}
	if t.SSH != nil {
		r.SSH = t.SSH.User + "@" + t.Host
		if t.SSH.Port != 0 && t.SSH.Port != 22 {
			r.SSH += fmt.Sprintf(":%d", t.SSH.Port)
		}
	}
	if t.API != nil {
		r.API = t.API.URL
	}
	return r
}

func endpointText(e fwapi.Endpoint) string {
	switch {
	case e.Netns != "":
		return e.Addr + " (netns " + e.Netns + ")"
	case e.SSH != nil:
		return e.Addr + " (ssh " + e.SSH.Host + ")"
	default:
		return e.Addr
	}
}

func newTargetTestCmd(io *streams, path *string) *cobra.Command {
	var acceptNew bool
	cmd := &cobra.Command{
		Use:   "test NAME",
		Short: "Check a target's firewall and every endpoint, and that traffic passes between them (changes nothing)",
		Long: "Check, one line each and all of them whatever fails: that the firewall is the flavor the targets file\n" +
			"says; that each link's client and server are reached as written (SSH, a network namespace, or this\n" +
			"machine), run an iperf3 new enough for fwab's probes and, over SSH, have fwab on the PATH for connect\n" +
			"probes; that a 1 s probe passes from client to server through the firewall; and that the server\n" +
			"routes the client's own address back through the firewall, as points with outbound NAT disabled need.\n" +
			"Nothing on the firewall changes. Exit 1 when a check fails, 2 when a failure is one to set up first\n" +
			"(a tool to install, a route to add, the targets file).",
		Args: exactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			f := targetFlags{target: args[0], targets: *path, acceptNewHostKey: acceptNew}
			t, err := f.lookup()
			if err != nil {
				return err
			}
			r := &testReport{w: io.Out}
			if err := testFirewall(cmd.Context(), io, &f, t, r); err != nil {
				return err
			}
			testEndpoints(cmd.Context(), t, r, fwapi.OpenOptions{AcceptNewHostKey: acceptNew, Logger: logger(io)})
			return r.result(t, *path)
		},
	}
	cmd.Flags().BoolVar(&acceptNew, "accept-new-host-key", false, "trust and remember an SSH host key seen for the first time (the firewall's and the endpoints')")
	return cmd
}
