package fwapi

import (
	"errors"
	"fmt"
	"io/fs"
	"maps"
	"net/url"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"github.com/fwab/fwab/internal/secretfile"
	"gopkg.in/yaml.v3"
)

// TargetProblem is one thing that keeps fwab from driving a target as it
// is written. Field is the key in the targets file ("host", "ssh.port",
// "endpoints.client.addr"); Msg says what is wrong and the fix, with {}
// where the field is named and {other.key} where another is, so that
// `target add` can name its flags instead (Text).
type TargetProblem struct {
	Field string
	Msg   string
}

var fieldRef = regexp.MustCompile(`\{([a-z0-9_.-]*)\}`)

// Text is the problem with each field called what name says: the key
// itself in the targets file, a flag for target add.
func (p TargetProblem) Text(name func(field string) string) string {
	return fieldRef.ReplaceAllStringFunc(p.Msg, func(m string) string {
		if f := m[1 : len(m)-1]; f != "" {
			return name(f)
		}
		return name(p.Field)
	})
}

// String is the problem as the targets file names its fields.
func (p TargetProblem) String() string { return p.Text(func(f string) string { return f }) }

// Problems lists what is wrong with the target as written: every fault at
// once, none of them needing the network or the files it names (see
// FileProblems). LoadTargets refuses a file with any, as target add
// refuses to write one.
func (t *Target) Problems() []TargetProblem {
	var ps []TargetProblem
	add := func(field, msg string) { ps = append(ps, TargetProblem{field, msg}) }
	if t.Flavor != "pfsense" && t.Flavor != "opnsense" {
		add("flavor", fmt.Sprintf("{} %q is not one of pfsense, opnsense", t.Flavor))
	}
	if strings.TrimSpace(t.Host) == "" {
		add("host", "{} is required: the firewall's address")
	}
	switch {
	case t.SSH == nil && t.Flavor == "pfsense":
		add("ssh", "pfSense is driven over SSH: give an ssh: section (user, key_file)")
	case t.SSH == nil && t.API == nil:
		add("ssh", "give an ssh: section (user, key_file) or an api: section (url, the key's files)")
	}
	if t.SSH != nil {
		ps = append(ps, sshProblems("ssh.", t.SSH, true)...)
	}
	if t.API != nil { // a pfSense's is never used: fwab drives pfSense over SSH
		if u, err := url.Parse(t.API.URL); err != nil || u.Scheme != "https" || u.Host == "" {
			add("api.url", fmt.Sprintf("{} %q: give the https:// URL of the firewall's GUI", t.API.URL))
		}
		if (t.API.KeyFile == "") == (t.API.KeyEnv == "") || (t.API.SecretFile == "") == (t.API.SecretEnv == "") {
			add("api.key_file", "name the API key and secret each by one file ({api.key_file}, {api.secret_file}) or one environment variable ({api.key_env}, {api.secret_env})")
		}
	}
	if _, err := t.LeaseLength(); err != nil {
		add("lease", fmt.Sprintf("{} %q is not a duration of at least 30s (e.g. lease: 10m): the box needs time for a reboot between renewals", t.Lease))
	}
	// A target written without endpoints can be driven (fw, config) but not
	// swept; target add asks for them (EndpointProblems).
	if !t.Endpoints.Empty() {
		ps = append(ps, t.EndpointProblems()...)
	}
	return ps
}

// Empty reports whether no endpoint is written (an empty links: too).
func (e Endpoints) Empty() bool {
	return e.Client == (Endpoint{}) && e.Server == (Endpoint{}) && e.Name == "" && len(e.Links) == 0
}

// EndpointProblems lists what the target's traffic hosts lack.
func (t *Target) EndpointProblems() []TargetProblem {
	var ps []TargetProblem
	add := func(field, msg string) { ps = append(ps, TargetProblem{field, msg}) }
	if t.Endpoints.Name != "" && !validLinkName(t.Endpoints.Name) {
		add("endpoints.name", fmt.Sprintf("{} %q: use letters, digits, '-' and '_', starting with a letter or digit (at most 32)", t.Endpoints.Name))
	}
	ps = append(ps, pairProblems("endpoints.", EndpointPair{Client: t.Endpoints.Client, Server: t.Endpoints.Server})...)
	for _, ln := range slices.Sorted(maps.Keys(t.Endpoints.Links)) {
		prefix := "endpoints.links." + ln + "."
		if ln == t.Endpoints.FirstLink() {
			add(prefix[:len(prefix)-1], fmt.Sprintf("{}: %s is the first link's name (endpoints.name); name it otherwise", ln))
		}
		if !validLinkName(ln) {
			add(prefix[:len(prefix)-1], fmt.Sprintf("link name %q: use letters, digits, '-' and '_', starting with a letter or digit (at most 32)", ln))
		}
		ps = append(ps, pairProblems(prefix, t.Endpoints.Links[ln])...)
	}
	return ps
}

// validLinkName is a name a probe's links: can give (matrix.ValidLinkName).
func validLinkName(s string) bool {
	if s == "" || len(s) > 32 {
		return false
	}
	for i, r := range s {
		ok := r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || i > 0 && (r == '-' || r == '_')
		if !ok {
			return false
		}
	}
	return true
}

// sshProblems checks an SSH section; the firewall's needs a way to log in,
// an endpoint's may use the agent or the user's own keys.
func sshProblems(prefix string, s *SSHSpec, firewall bool) []TargetProblem {
	var ps []TargetProblem
	if s.Port < 0 || s.Port > 65535 {
		ps = append(ps, TargetProblem{prefix + "port", fmt.Sprintf("{} %d is not a port; give 1-65535 (default 22)", s.Port)})
	}
	if s.ConnectTimeoutMS < 0 {
		ps = append(ps, TargetProblem{prefix + "connect_timeout_ms", fmt.Sprintf("{} %d is negative", s.ConnectTimeoutMS)})
	}
	if firewall {
		if s.User == "" {
			ps = append(ps, TargetProblem{prefix + "user", "{} is required (admin or root on pfSense, root on OPNsense)"})
		}
		if s.KeyFile == "" && s.PasswordFile == "" && !s.Agent {
			ps = append(ps, TargetProblem{prefix + "key_file", "give {}, {" + prefix + "password_file} or {" + prefix + "agent}"})
		}
	}
	return ps
}

// pairProblems names what a link's client and server lack; prefix is the
// path of their keys ("endpoints.", "endpoints.links.NAME.").
func pairProblems(prefix string, p EndpointPair) []TargetProblem {
	var ps []TargetProblem
	for _, side := range []struct {
		name string
		ep   Endpoint
	}{{"client", p.Client}, {"server", p.Server}} {
		at := prefix + side.name
		// With neither netns nor ssh the endpoint is this machine
		// (Endpoint.Open).
		switch {
		case side.ep.Addr == "":
			ps = append(ps, TargetProblem{at + ".addr", "{} is required: the address traffic is sent to or from"})
		case side.ep.Netns != "" && side.ep.SSH != nil:
			ps = append(ps, TargetProblem{at, "the " + side.name + " is a namespace or an SSH host, not both: drop {" + at + ".netns} or {" + at + ".ssh.host}"})
		}
		if side.ep.SSH != nil {
			if side.ep.SSH.Host == "" {
				ps = append(ps, TargetProblem{at + ".ssh.host", "{} is required: the " + side.name + " host's address"})
			}
			ps = append(ps, sshProblems(at+".ssh.", &side.ep.SSH.SSHSpec, false)...)
		}
	}
	return ps
}

// TargetFile is a file a target names: Field is its key, Secret whether
// it holds a key, password or API secret.
type TargetFile struct {
	Field, Path string
	Secret      bool
}

// Files lists the files the target names, by key.
func (t *Target) Files() []TargetFile {
	var out []TargetFile
	add := func(field, path string, secret bool) {
		if path != "" {
			out = append(out, TargetFile{field, path, secret})
		}
	}
	if t.SSH != nil {
		add("ssh.key_file", t.SSH.KeyFile, true)
		add("ssh.password_file", t.SSH.PasswordFile, true)
	}
	if t.API != nil {
		add("api.key_file", t.API.KeyFile, true)
		add("api.secret_file", t.API.SecretFile, true)
		add("api.ca_file", t.API.CAFile, false)
	}
	endpoint := func(at string, ep Endpoint) {
		if ep.SSH != nil {
			add(at+".ssh.key_file", ep.SSH.KeyFile, true)
			add(at+".ssh.password_file", ep.SSH.PasswordFile, true)
		}
	}
	endpoint("endpoints.client", t.Endpoints.Client)
	endpoint("endpoints.server", t.Endpoints.Server)
	for _, ln := range slices.Sorted(maps.Keys(t.Endpoints.Links)) {
		endpoint("endpoints.links."+ln+".client", t.Endpoints.Links[ln].Client)
		endpoint("endpoints.links."+ln+".server", t.Endpoints.Links[ln].Server)
	}
	return out
}

// FileProblems names the files the target names that are not there, and
// the secret files others may read: group- or world-readable, or another
// user's (as ssh refuses a private key that others can read).
func (t *Target) FileProblems() []TargetProblem {
	var ps []TargetProblem
	for _, f := range t.Files() {
		if err := checkFile(f.Path, f.Secret); err != nil {
			ps = append(ps, TargetProblem{f.Field, "{} " + err.Error()})
		}
	}
	return ps
}

func checkFile(path string, secret bool) error {
	p := ExpandHome(path)
	if secret {
		if err := secretfile.Check(p); err != nil {
			return errors.New(strings.Replace(err.Error(), p, path, 1))
		}
		return nil
	}
	if _, err := os.Stat(p); errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("%s does not exist", path)
	} else if err != nil {
		return err
	}
	return nil
}

// TargetsError is every problem of a targets file, by line.
type TargetsError struct {
	Path  string
	Lines []string // "line 14: target fw1: ssh.port 70000 is not a port; …"
}

func (e *TargetsError) Error() string {
	return fmt.Sprintf("targets file %s: %d %s; fix them and run again:\n  %s", e.Path, len(e.Lines), plural(len(e.Lines), "problem"), strings.Join(e.Lines, "\n  "))
}

func plural(n int, word string) string {
	if n == 1 {
		return word
	}
	return word + "s"
}

// checkTargets lists every problem of the file's targets, each with the
// line of its key (or of the target, when the key is not written).
func checkTargets(path string, data []byte, tf *TargetsFile) error {
	var root yaml.Node
	_ = yaml.Unmarshal(data, &root) // it decoded once already
	type at struct {
		line int
		text string
	}
	var all []at
	for _, name := range slices.Sorted(maps.Keys(tf.Targets)) {
		for _, p := range tf.Targets[name].Problems() {
			all = append(all, at{lineOf(&root, name, p.Field), "target " + name + ": " + p.String()})
		}
	}
	if len(all) == 0 {
		return nil
	}
	slices.SortStableFunc(all, func(a, b at) int { return a.line - b.line })
	e := &TargetsError{Path: path}
	for _, a := range all {
		e.Lines = append(e.Lines, "line "+strconv.Itoa(a.line)+": "+a.text)
	}
	return e
}

// lineOf is the line of the key field (dotted) of the target name: the
// deepest key of it that is written, at least the target's own.
func lineOf(root *yaml.Node, name, field string) int {
	n := root
	if n.Kind == yaml.DocumentNode && len(n.Content) > 0 {
		n = n.Content[0]
	}
	line := 0
	for _, key := range append([]string{"targets", name}, strings.Split(field, ".")...) {
		next := (*yaml.Node)(nil)
		if n.Kind == yaml.MappingNode {
			for i := 0; i+1 < len(n.Content); i += 2 {
				if n.Content[i].Value == key {
					line, next = n.Content[i].Line, n.Content[i+1]
					break
				}
			}
		}
		if next == nil {
			break
		}
		n = next
	}
	return line
}
