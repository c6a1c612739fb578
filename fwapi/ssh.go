package fwapi

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"os"
	"path"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/fwab/fwab/internal/secretfile"
	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/agent"
	"golang.org/x/crypto/ssh/knownhosts"
)

// SSHConfig says how to reach a firewall's shell. Zero values mean the
// documented defaults.
type SSHConfig struct {
	Addr             string // host:port
	User             string
	KeyFile          string // private key file (unencrypted)
	PasswordFile     string // file holding the password; its first line is used
	Agent            bool   // use the agent at $SSH_AUTH_SOCK
	KnownHosts       string // default ~/.ssh/known_hosts
	AcceptNewHostKey bool   // append an unknown host key to KnownHosts (never replaces a known one)

	ConnectTimeout time.Duration // default 10s
	// CommandTimeout bounds a command whose context has no deadline of its
	// own; default 15 minutes (a full reload on a slow box takes minutes).
	CommandTimeout time.Duration
	KeepAlive      time.Duration // default 15s; negative disables
	Retries        int           // reconnect attempts after a lost connection; default 4
	Backoff        time.Duration // first reconnect delay, doubled each time; default 250ms
	// MaxOutput caps what Run keeps in memory of one command's standard
	// output (its standard error: a 64th of it, at least 64 KiB); a command
	// that prints more fails with an *OutputTooLargeError. Default 1 GiB:
	// twenty times the largest config.xml seen on a real box (47 MiB, with
	// its RRD data). Stream is not capped: it holds nothing.
	MaxOutput int64

	Logger *slog.Logger // nil discards
	// Dial opens the TCP connection; nil uses net.Dialer.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// SSHSpecConfig turns a targets-file SSH section into an SSHConfig.
func SSHSpecConfig(host string, spec *SSHSpec) SSHConfig {
	port := spec.Port
	if port == 0 {
		port = 22
	}
	return SSHConfig{
		Addr:           net.JoinHostPort(host, strconv.Itoa(port)),
		User:           spec.User,
		KeyFile:        ExpandHome(spec.KeyFile),
		PasswordFile:   ExpandHome(spec.PasswordFile),
		Agent:          spec.Agent,
		KnownHosts:     ExpandHome(spec.KnownHosts),
		ConnectTimeout: time.Duration(spec.ConnectTimeoutMS) * time.Millisecond,
	}
}

// ExpandHome expands a leading ~/ to the home folder, as the targets file allows.
func ExpandHome(p string) string {
	if rest, ok := strings.CutPrefix(p, "~/"); ok {
		if home, err := os.UserHomeDir(); err == nil {
			return filepath.Join(home, rest)
		}
	}
	return p
}

// HostKeyMismatchError is a host key that differs from the one known_hosts
// holds for the host. fwab never connects in that case.
type HostKeyMismatchError struct {
	Host       string
	Got        string   // SHA256 fingerprint offered by the host
	GotType    string   // its key type, e.g. ssh-ed25519
	Want       []string // keys in known_hosts: fingerprint (type, file:line)
	KnownHosts string
}

// Error never suggests trusting the new key on a guess: a changed key is
// what an attacker between fwab and the firewall would show.
func (e *HostKeyMismatchError) Error() string {
	return fmt.Sprintf("host key for %s differs from the one recorded: the host offers %s (%s) but %s holds %s. "+
		"This may be an attack (someone between you and the firewall), so fwab did not connect. "+
		"Confirm the new fingerprint out of band, on the firewall's console: %s; "+
		"only if it matches (the firewall was reinstalled or its keys regenerated), remove the old line from %s and connect with --accept-new-host-key",
		e.Host, e.Got, e.GotType, e.KnownHosts, strings.Join(e.Want, ", "), hostKeyFingerprintCommand(e.GotType), e.KnownHosts)
}

// hostKeyFingerprintCommand is the command that prints, on the firewall,
// the fingerprint of its host key of type keyType.
func hostKeyFingerprintCommand(keyType string) string {
	keyType, _, _ = strings.Cut(keyType, "-cert-v01@")
	switch {
	case keyType == ssh.KeyAlgoED25519:
		return "ssh-keygen -lf /etc/ssh/ssh_host_ed25519_key.pub"
	case strings.HasPrefix(keyType, "ecdsa-"):
		return "ssh-keygen -lf /etc/ssh/ssh_host_ecdsa_key.pub"
	case keyType == ssh.KeyAlgoRSA:
		return "ssh-keygen -lf /etc/ssh/ssh_host_rsa_key.pub"
	}
	return "ssh-keygen -lf on each /etc/ssh/ssh_host_*_key.pub"
}

// UnknownHostKeyError is a host that known_hosts does not list.
type UnknownHostKeyError struct {
	Host        string
	Fingerprint string
	KnownHosts  string
}

func (e *UnknownHostKeyError) Error() string {
	return fmt.Sprintf("host key for %s is unknown (%s, not in %s): check the fingerprint on the firewall's console, then connect once with --accept-new-host-key",
		e.Host, e.Fingerprint, e.KnownHosts)
}

// ErrConnectionLost means the SSH connection dropped before a command
// reported its exit status; the command may or may not have run.
var ErrConnectionLost = errors.New("ssh connection lost")

// CommandError is a remote command that exited non-zero.
type CommandError struct {
	Cmd    string
	Exit   int
	Stderr string
}

func (e *CommandError) Error() string {
	msg := fmt.Sprintf("command %q exited %d", e.Cmd, e.Exit)
	if e.Exit == 127 {
		msg += " (command not found on the firewall: is the package installed and the product the one the target names?)"
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		msg += ": " + firstLines(s, 3)
	}
	return msg + DiskHint(e.Stderr)
}

// ErrFirewallDisk is in the chain of a command error whose output shows
// that the firewall's disk refuses writes (full or read-only): nothing that
// changes the firewall can work until that is fixed.
var ErrFirewallDisk = errors.New("the firewall's disk refuses writes")

// Unwrap makes errors.Is(err, ErrFirewallDisk) true for a disk error.
func (e *CommandError) Unwrap() error {
	if DiskHint(e.Stderr) != "" {
		return ErrFirewallDisk
	}
	return nil
}

// DiskFailed reports whether the command's output shows that the
// firewall's disk refuses writes; it makes a CommandError a
// matrix.DiskError, so a sweep stops instead of blaming the point.
func (e *CommandError) DiskFailed() bool { return DiskHint(e.Stderr) != "" }

// DiskHint explains a firewall's disk error found in a command's output
// (its disk is full, or read-only) and what to do; "" when there is none.
func DiskHint(output string) string {
	output = strings.ToLower(output)
	switch {
	case strings.Contains(output, "no space left on device"):
		return " (the firewall's disk is full: free space on it, e.g. old files in /conf/backup or /var/log, and check 'df -h' on the firewall; then run fwab again)"
	case strings.Contains(output, "read-only file system"):
		return " (the firewall's file system is read-only, which often means a failing disk: check 'dmesg' and 'mount' on the firewall and remount it read-write; then run fwab again)"
	}
	return ""
}

func firstLines(s string, n int) string {
	lines := strings.SplitN(s, "\n", n+1)
	if len(lines) > n {
		lines = append(lines[:n], "...")
	}
	return strings.Join(lines, " / ")
}

// SSHClient is a connection to a firewall's shell that reconnects on demand.
// It is safe for concurrent use.
type SSHClient struct {
	cfg    SSHConfig
	auth   []ssh.AuthMethod
	hostCB ssh.HostKeyCallback
	log    *slog.Logger

	mu     sync.Mutex
	client *ssh.Client
	closed bool
	stop   chan struct{} // closes the keepalive loop of the current client
}

// DialSSH connects and authenticates. Host key problems and bad credentials
// are returned at once, without retries.
func DialSSH(ctx context.Context, cfg SSHConfig) (*SSHClient, error) {
	if cfg.Addr == "" {
		return nil, errors.New("ssh: no address: set host (and ssh.port) in the targets file")
	}
	if cfg.User == "" {
		return nil, errors.New("ssh: no user: set ssh.user in the targets file")
	}
	if cfg.ConnectTimeout <= 0 {
		cfg.ConnectTimeout = 10 * time.Second
	}
	if cfg.CommandTimeout <= 0 {
		cfg.CommandTimeout = 15 * time.Minute
	}
	if cfg.KeepAlive == 0 {
		cfg.KeepAlive = 15 * time.Second
	}
	if cfg.Retries == 0 {
		cfg.Retries = 4
	}
	if cfg.Backoff <= 0 {
		cfg.Backoff = 250 * time.Millisecond
	}
	if cfg.MaxOutput <= 0 {
		cfg.MaxOutput = 1 << 30
	}
	if cfg.KnownHosts == "" {
		home, err := os.UserHomeDir()
		if err != nil {
			return nil, fmt.Errorf("ssh: no known_hosts file given and no home directory: %w", err)
		}
		cfg.KnownHosts = filepath.Join(home, ".ssh", "known_hosts")
	}
	c := &SSHClient{cfg: cfg, log: cfg.Logger}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	auth, err := authMethods(cfg)
	if err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	c.auth = auth
	c.hostCB = c.checkHostKey
	if _, err := c.connect(ctx); err != nil {
		return nil, err
	}
	return c, nil
}

func authMethods(cfg SSHConfig) ([]ssh.AuthMethod, error) {
	var methods []ssh.AuthMethod
	if cfg.KeyFile != "" {
		if err := secretfile.Check(cfg.KeyFile); err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		pem, err := os.ReadFile(cfg.KeyFile)
		if err != nil {
			return nil, fmt.Errorf("key file: %w", err)
		}
		signer, err := ssh.ParsePrivateKey(pem)
		var missing *ssh.PassphraseMissingError
		if errors.As(err, &missing) {
			return nil, fmt.Errorf("key file %s is encrypted: load it into an agent and set ssh.agent: true", cfg.KeyFile)
		}
		if err != nil {
			return nil, fmt.Errorf("key file %s: %w", cfg.KeyFile, err)
		}
		methods = append(methods, ssh.PublicKeys(signer))
	}
	if cfg.Agent {
		sock := os.Getenv("SSH_AUTH_SOCK")
		if sock == "" {
			return nil, errors.New("ssh.agent is set but SSH_AUTH_SOCK is empty: start an agent or use key_file")
		}
		methods = append(methods, ssh.PublicKeysCallback((&agentAuth{sock: sock}).signers))
	}
	if cfg.PasswordFile != "" {
		if err := secretfile.Check(cfg.PasswordFile); err != nil {
			return nil, fmt.Errorf("password file: %w", err)
		}
		data, err := os.ReadFile(cfg.PasswordFile)
		if err != nil {
			return nil, fmt.Errorf("password file: %w", err)
		}
		pw, _, _ := strings.Cut(string(data), "\n")
		pw = strings.TrimSuffix(pw, "\r")
		methods = append(methods, ssh.Password(pw))
		methods = append(methods, ssh.KeyboardInteractive(func(_, _ string, questions []string, _ []bool) ([]string, error) {
			answers := make([]string, len(questions))
			for i := range answers {
				answers[i] = pw
			}
			return answers, nil
		}))
	}
	if len(methods) == 0 {
		return nil, errors.New("no authentication method: set ssh.key_file, ssh.agent or ssh.password_file in the targets file")
	}
	return methods, nil
}

// agentAuth reaches the SSH agent. Its signers sign through the agent
// connection, so that connection stays open; each dial opens a new one and
// the previous is closed then.
type agentAuth struct {
	sock string
	mu   sync.Mutex
	conn net.Conn
}

func (a *agentAuth) signers() ([]ssh.Signer, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.conn != nil {
		a.conn.Close()
	}
	conn, err := net.Dial("unix", a.sock)
	if err != nil {
		return nil, fmt.Errorf("ssh agent at $SSH_AUTH_SOCK: %w", err)
	}
	a.conn = conn
	return agent.NewClient(conn).Signers()
}

func fingerprint(k ssh.PublicKey) string { return ssh.FingerprintSHA256(k) }

// checkHostKey checks the host key against known_hosts; with
// AcceptNewHostKey an unknown host is appended, a changed key never is.
func (c *SSHClient) checkHostKey(hostname string, remote net.Addr, key ssh.PublicKey) error {
	file := c.cfg.KnownHosts
	var cbErr error
	if _, err := os.Stat(file); err == nil {
		cb, err := knownhosts.New(file)
		if err != nil {
			return fmt.Errorf("known_hosts %s: %w", file, err)
		}
		cbErr = cb(hostname, remote, key)
		if cbErr == nil {
			return nil
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("known_hosts: %w", err)
	}
	var keyErr *knownhosts.KeyError
	if cbErr != nil && !errors.As(cbErr, &keyErr) {
		return fmt.Errorf("known_hosts %s: %w", file, cbErr)
	}
	if keyErr != nil && len(keyErr.Want) > 0 {
		want := make([]string, len(keyErr.Want))
		for i, k := range keyErr.Want {
			want[i] = fmt.Sprintf("%s (%s, %s:%d)", fingerprint(k.Key), k.Key.Type(), k.Filename, k.Line)
		}
		return &HostKeyMismatchError{Host: hostname, Got: fingerprint(key), GotType: key.Type(), Want: want, KnownHosts: file}
	}
	if !c.cfg.AcceptNewHostKey {
		return &UnknownHostKeyError{Host: hostname, Fingerprint: fingerprint(key), KnownHosts: file}
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	f, err := os.OpenFile(file, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return fmt.Errorf("known_hosts: %w", err)
	}
	line := knownhosts.Line([]string{knownhosts.Normalize(hostname)}, key) + "\n"
	if _, err := f.WriteString(line); err != nil {
		f.Close()
		return fmt.Errorf("known_hosts: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("known_hosts: %w", err)
	}
	c.log.Info("accepted new host key", "host", hostname, "fingerprint", fingerprint(key), "known_hosts", file)
	return f.Close()
}

// knownHostKeyAlgorithms orders the host key algorithms fwab asks for so
// that those of the key types known_hosts holds for hostname come first,
// then the rest; nil (Go's default order) when the host is not listed.
// Go prefers ECDSA and RSA to ed25519, so a firewall that offers all three
// would present a key known_hosts cannot check and fwab would report a
// changed key that did not change. OpenSSH does the same (sshconnect2.c,
// order_hostkeyalgs: "prefer algorithms that the user already has keys
// for", the others last, and all certificate algorithms first when a
// @cert-authority line matches). Keeping the others last, rather than
// dropping them, still shows a firewall that no longer offers a known type
// as a changed key with both fingerprints.
func knownHostKeyAlgorithms(file, hostname string, remote net.Addr) []string {
	cb, err := knownhosts.New(file)
	if err != nil {
		return nil // checkHostKey reports an unreadable file
	}
	// No host has this throwaway key: the KeyError lists the known keys.
	var keyErr *knownhosts.KeyError
	if !errors.As(cb(hostname, remote, throwawayHostKey()), &keyErr) || len(keyErr.Want) == 0 {
		return nil
	}
	data, err := os.ReadFile(file)
	if err != nil {
		return nil
	}
	lines := strings.Split(string(data), "\n")
	known := map[string]bool{}
	certAuthority := false
	for _, k := range keyErr.Want {
		if k.Line >= 1 && k.Line <= len(lines) && strings.HasPrefix(strings.TrimSpace(lines[k.Line-1]), "@cert-authority") {
			certAuthority = true // the host's own key may be of any type
			continue
		}
		known[k.Key.Type()] = true
	}
	var first, last []string
	// Only the algorithms Go supports by default: asking for a known type
	// must not bring back an insecure one (ssh-dss).
	for _, algo := range ssh.SupportedAlgorithms().HostKeys {
		isCert := strings.Contains(algo, "-cert-v01@")
		if (isCert && certAuthority) || (!isCert && known[hostKeyType(algo)]) {
			first = append(first, algo)
		} else {
			last = append(last, algo)
		}
	}
	return append(first, last...)
}

// hostKeyType is the key type (ssh.PublicKey.Type) a host presents for
// the plain host key algorithm algo.
func hostKeyType(algo string) string {
	switch algo {
	case ssh.KeyAlgoRSASHA256, ssh.KeyAlgoRSASHA512:
		return ssh.KeyAlgoRSA
	}
	return algo
}

// throwawayHostKey is a key no known_hosts file holds.
var throwawayHostKey = sync.OnceValue(func() ssh.PublicKey {
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		panic(err)
	}
	key, err := ssh.NewPublicKey(pub)
	if err != nil {
		panic(err)
	}
	return key
})

// permanent reports whether a dial error cannot be cured by retrying.
func permanent(err error) bool {
	var mismatch *HostKeyMismatchError
	var unknown *UnknownHostKeyError
	return errors.As(err, &mismatch) || errors.As(err, &unknown) ||
		strings.Contains(err.Error(), "unable to authenticate")
}

func (c *SSHClient) dialOnce(ctx context.Context) (*ssh.Client, error) {
	ctx, cancel := context.WithTimeout(ctx, c.cfg.ConnectTimeout)
	defer cancel()
	dial := c.cfg.Dial
	if dial == nil {
		dial = (&net.Dialer{}).DialContext
	}
	conn, err := dial(ctx, "tcp", c.cfg.Addr)
	if err != nil {
		return nil, fmt.Errorf("ssh %s: %w", c.cfg.Addr, err)
	}
	// The handshake has no context of its own: bound it by the deadline.
	deadline, _ := ctx.Deadline()
	conn.SetDeadline(deadline)
	stopWatch := context.AfterFunc(ctx, func() { conn.Close() })
	defer stopWatch()
	sconn, chans, reqs, err := ssh.NewClientConn(conn, c.cfg.Addr, &ssh.ClientConfig{
		User:              c.cfg.User,
		Auth:              c.auth,
		HostKeyCallback:   c.hostCB,
		HostKeyAlgorithms: knownHostKeyAlgorithms(c.cfg.KnownHosts, c.cfg.Addr, conn.RemoteAddr()),
		Timeout:           c.cfg.ConnectTimeout,
	})
	if err != nil {
		conn.Close()
		if ctx.Err() != nil && !permanent(err) {
			return nil, fmt.Errorf("ssh %s: handshake: %w", c.cfg.Addr, ctx.Err())
		}
		return nil, fmt.Errorf("ssh %s: %w", c.cfg.Addr, err)
	}
	conn.SetDeadline(time.Time{})
	return ssh.NewClient(sconn, chans, reqs), nil
}

// connect returns the live client, dialling (with backoff) when there is none.
func (c *SSHClient) connect(ctx context.Context) (*ssh.Client, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil, errors.New("ssh: client closed")
	}
	if c.client != nil {
		return c.client, nil
	}
	delay := c.cfg.Backoff
	var lastErr error
	for attempt := 0; attempt <= c.cfg.Retries; attempt++ {
		if attempt > 0 {
			c.log.Warn("ssh reconnect", "addr", c.cfg.Addr, "attempt", attempt, "err", lastErr)
			select {
			case <-ctx.Done():
				return nil, fmt.Errorf("ssh %s: %w (last error: %v)", c.cfg.Addr, ctx.Err(), lastErr)
			case <-time.After(delay):
			}
			delay = min(delay*2, 5*time.Second)
		}
		client, err := c.dialOnce(ctx)
		if err == nil {
			c.client = client
			c.stop = make(chan struct{})
			if c.cfg.KeepAlive > 0 {
				go c.keepAlive(client, c.stop)
			}
			return client, nil
		}
		lastErr = err
		if permanent(err) || ctx.Err() != nil {
			return nil, err
		}
	}
	return nil, lastErr
}

// keepAlive sends keepalive@openssh.com requests; a connection that does not
// answer within one interval is closed so the next command reconnects.
func (c *SSHClient) keepAlive(client *ssh.Client, stop chan struct{}) {
	t := time.NewTicker(c.cfg.KeepAlive)
	defer t.Stop()
	for {
		select {
		case <-stop:
			return
		case <-t.C:
		}
		done := make(chan error, 1)
		go func() {
			_, _, err := client.SendRequest("keepalive@openssh.com", true, nil)
			done <- err
		}()
		select {
		case <-stop:
			return
		case err := <-done:
			if err == nil {
				continue
			}
			c.log.Warn("ssh keepalive failed", "addr", c.cfg.Addr, "err", err)
		case <-time.After(c.cfg.KeepAlive):
			c.log.Warn("ssh keepalive timed out", "addr", c.cfg.Addr)
		}
		c.drop(client)
		return
	}
}

// drop forgets a broken client so that the next command reconnects.
func (c *SSHClient) drop(client *ssh.Client) {
	c.mu.Lock()
	if c.client == client {
		c.client = nil
		close(c.stop)
		c.stop = nil
	}
	c.mu.Unlock()
	client.Close()
}

// Close closes the connection.
func (c *SSHClient) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.closed = true
	if c.client == nil {
		return nil
	}
	close(c.stop)
	err := c.client.Close()
	c.client = nil
	return err
}

// Addr is the host:port this client talks to.
func (c *SSHClient) Addr() string { return c.cfg.Addr }

// RemoteShell is the one command string fwab sends over SSH, for every
// command on both products: the command itself travels as a POSIX script
// on the shell's standard input (see RemoteScript). root's login shell runs
// the command string with -c: on pfSense that is /bin/sh, on OPNsense
// /bin/csh (tcsh), where a multi-line quoted argument is "Unmatched '", `!`
// is a history event and a backslash-newline joins lines; this string has
// none of those, so every login shell runs the same POSIX sh.
//
// upstream: opnsense-core 26.1 src/sbin/opnsense-shell:37 — `exec ${CMD_SHELL} -${OPT} "${OPTARG}"` with CMD_SHELL=/bin/csh (:25; same lines 24.7–26.7)
// upstream: pfsense 2.7.2 src/etc/rc.initial:52 — `/bin/sh -c "$@"` for `-c`
const RemoteShell = "/bin/sh -s"

// RemoteScript is the script RemoteShell reads for cmd. Without stdin it is
// cmd itself. With stdin the data is embedded, base64-framed for
// b64decode(1) in a here-document (the script is the shell's standard
// input, so the data cannot follow it there), and piped into cmd:
//
//	fwab_stdin() {
//	b64decode -p <<'FWAB_STDIN_…'
//	begin-base64 600 -
//	…
//	====
//	FWAB_STDIN_…
//	}
//	fwab_stdin | {
//	cmd
//	}
//
// upstream: not settled — b64decode(1) is FreeBSD base, not product source; checked at run time by the SHA-256 each write compares (WriteFileAtomic, OPNsense WriteConfig)
func RemoteScript(cmd string, stdin []byte, hasStdin bool) []byte {
	var b bytes.Buffer
	if !hasStdin {
		b.WriteString(cmd)
		b.WriteByte('\n')
		return b.Bytes()
	}
	var tag [8]byte
	rand.Read(tag[:])
	delim := "FWAB_STDIN_" + hex.EncodeToString(tag[:])
	b.WriteString("fwab_stdin() {\nb64decode -p <<'" + delim + "'\nbegin-base64 600 -\n")
	enc := base64.StdEncoding.EncodeToString(stdin)
	for len(enc) > 76 {
		b.WriteString(enc[:76])
		b.WriteByte('\n')
		enc = enc[76:]
	}
	if enc != "" {
		b.WriteString(enc)
		b.WriteByte('\n')
	}
	b.WriteString("====\n" + delim + "\n}\nfwab_stdin | {\n" + cmd + "\n}\n")
	return b.Bytes()
}

// Run runs one command line through the firewall's /bin/sh (RemoteShell,
// RemoteScript) and returns its output and exit status. A non-zero exit is
// not an error; err is set only when the command could not be run or its status is unknown (the
// connection dropped: ErrConnectionLost). Cancelling ctx kills the remote
// command and closes the session. A session that cannot be opened is retried
// on a fresh connection; a command is never sent twice.
func (c *SSHClient) Run(ctx context.Context, cmd string, stdin io.Reader) (stdout, stderr []byte, exit int, err error) {
	out := &cappedBuffer{max: c.cfg.MaxOutput}
	exit, stderr, err = c.run(ctx, cmd, stdin, out)
	if out.over {
		return nil, stderr, -1, fmt.Errorf("ssh %s: %q: %w", c.cfg.Addr, cmd, &OutputTooLargeError{Max: out.max})
	}
	return out.Bytes(), stderr, exit, err
}

// OutputTooLargeError is a command whose output passed SSHConfig.MaxOutput.
type OutputTooLargeError struct{ Max int64 }

func (e *OutputTooLargeError) Error() string {
	size := fmt.Sprintf("%d MiB", e.Max>>20)
	if e.Max < 1<<20 {
		size = fmt.Sprintf("%d bytes", e.Max)
	}
	return "the command printed more than " + size + ", the most fwab keeps in memory of one command's output"
}

// cappedBuffer is a buffer that refuses to grow past max: the write that
// would fails, which ends the session's copy of the output. (It has no
// ReadFrom, which io.Copy would use instead of Write.)
type cappedBuffer struct {
	buf  bytes.Buffer
	max  int64
	over bool
}

func (b *cappedBuffer) Write(p []byte) (int, error) {
	if int64(b.buf.Len())+int64(len(p)) > b.max {
		b.over = true
		return 0, errors.New("output too large")
	}
	return b.buf.Write(p)
}

func (b *cappedBuffer) Bytes() []byte { return b.buf.Bytes() }

// Stream is Run with stdout written to w as it arrives.
func (c *SSHClient) Stream(ctx context.Context, cmd string, w io.Writer) (exit int, stderr []byte, err error) {
	return c.run(ctx, cmd, nil, w)
}

func (c *SSHClient) run(ctx context.Context, cmd string, stdin io.Reader, stdout io.Writer) (int, []byte, error) {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.cfg.CommandTimeout)
		defer cancel()
	}
	sess, client, err := c.session(ctx)
	if err != nil {
		return -1, nil, err
	}
	defer sess.Close()
	var data []byte
	if stdin != nil {
		if data, err = io.ReadAll(stdin); err != nil {
			return -1, nil, fmt.Errorf("ssh %s: %q: standard input: %w", c.cfg.Addr, cmd, err)
		}
	}
	errOut := cappedBuffer{max: max(c.cfg.MaxOutput/64, 64<<10)}
	sess.Stdout = stdout
	sess.Stderr = &errOut
	sess.Stdin = bytes.NewReader(RemoteScript(cmd, data, stdin != nil))
	done := make(chan error, 1)
	go func() { done <- sess.Run(RemoteShell) }()
	select {
	case err = <-done:
	case <-ctx.Done():
		sess.Signal(ssh.SIGKILL)
		sess.Close()
		<-done
		return -1, errOut.Bytes(), fmt.Errorf("ssh %s: %q: %w", c.cfg.Addr, cmd, ctx.Err())
	}
	var exitErr *ssh.ExitError
	switch {
	case err == nil:
		return 0, errOut.Bytes(), nil
	case errors.As(err, &exitErr):
		return exitErr.ExitStatus(), errOut.Bytes(), nil
	default:
		var missing *ssh.ExitMissingError
		if errors.As(err, &missing) || errors.Is(err, io.EOF) || isNetErr(err) {
			c.drop(client)
			return -1, errOut.Bytes(), fmt.Errorf("ssh %s: %q: %w", c.cfg.Addr, cmd, ErrConnectionLost)
		}
		return -1, errOut.Bytes(), fmt.Errorf("ssh %s: %q: %w", c.cfg.Addr, cmd, err)
	}
}

func isNetErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

func (c *SSHClient) session(ctx context.Context) (*ssh.Session, *ssh.Client, error) {
	for attempt := 0; ; attempt++ {
		client, err := c.connect(ctx)
		if err != nil {
			return nil, nil, err
		}
		sess, err := client.NewSession()
		if err == nil {
			return sess, client, nil
		}
		c.drop(client)
		if attempt >= 1 {
			return nil, nil, fmt.Errorf("ssh %s: new session: %w", c.cfg.Addr, err)
		}
	}
}

// Output runs cmd and returns its stdout, turning a non-zero exit into a
// *CommandError.
func (c *SSHClient) Output(ctx context.Context, cmd string) ([]byte, error) {
	out, errOut, code, err := c.Run(ctx, cmd, nil)
	if err != nil {
		return nil, err
	}
	if code != 0 {
		return out, &CommandError{Cmd: cmd, Exit: code, Stderr: string(errOut)}
	}
	return out, nil
}

// ReadFile returns a file's contents from the firewall.
func (c *SSHClient) ReadFile(ctx context.Context, name string) ([]byte, error) {
	data, err := c.Output(ctx, "cat "+ShellQuote(name))
	if err != nil {
		return nil, fmt.Errorf("read %s: %w", name, err)
	}
	return data, nil
}

// WriteFileAtomic replaces a file on the firewall so that readers see the
// old or the new contents, never a mix: the data goes to a temporary file
// beside it, is synced and checked with sha256 -q, and only then renamed
// over the target. On any failure the temporary file is removed (after a
// reconnect when the connection was lost) and the target is untouched.
func (c *SSHClient) WriteFileAtomic(ctx context.Context, name string, data []byte) error {
	return writeFileAtomic(ctx, c, name, data)
}

// writeFileAtomic is WriteFileAtomic over any Runner: the one atomic write
// of a firewall file (the OPNsense driver stages its config with it).
func writeFileAtomic(ctx context.Context, c Runner, name string, data []byte) (err error) {
	var suffix [6]byte
	rand.Read(suffix[:])
	tmp := path.Join(path.Dir(name), "."+path.Base(name)+".fwab-tmp-"+hex.EncodeToString(suffix[:]))
	defer func() {
		if err == nil {
			return
		}
		cleanCtx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		if _, _, _, rmErr := c.Run(cleanCtx, "rm -f "+ShellQuote(tmp), nil); rmErr != nil {
			err = fmt.Errorf("%w (and the temporary file %s could not be removed: %v)", err, tmp, rmErr)
		}
	}()
	sum := sha256.Sum256(data)
	want := hex.EncodeToString(sum[:])
	q := ShellQuote(tmp)
	out, errOut, code, err := c.Run(ctx, "cat > "+q+" && sync && sha256 -q "+q, bytes.NewReader(data))
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if code != 0 {
		return fmt.Errorf("write %s: %w", name, &CommandError{Cmd: "cat > " + q, Exit: code, Stderr: string(errOut)})
	}
	if got := strings.TrimSpace(string(out)); got != want {
		return fmt.Errorf("write %s: checksum of the copy on the firewall is %q, want %s", name, got, want)
	}
	mv := "mv " + q + " " + ShellQuote(name) + " && sync"
	_, errOut, code, err = c.Run(ctx, mv, nil)
	if err != nil {
		return fmt.Errorf("write %s: %w", name, err)
	}
	if code != 0 {
		return fmt.Errorf("write %s: %w", name, &CommandError{Cmd: mv, Exit: code, Stderr: string(errOut)})
	}
	return nil
}
