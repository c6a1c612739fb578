// Package fwapitest holds test doubles for fwapi: an in-process SSH server
// that behaves like a pfSense shell (a real POSIX shell interpreter whose
// commands answer from recorded FreeBSD transcripts and a small file system
// in a temporary folder), and the driver suite every fwapi driver must pass.
package fwapitest

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
	"mvdan.cc/sh/v3/interp"
	"mvdan.cc/sh/v3/syntax"

	"github.com/fwab/fwab/fwapi"
)

// Reply is what a recorded command prints and returns.
type Reply struct {
	Stdout string
	Stderr string
	Exit   int
}

// Handler answers one command; args[0] is the command name.
type Handler func(ctx context.Context, s *SSHServer, args []string, stdin io.Reader, stdout, stderr io.Writer) int

// SSHServer is a fake firewall shell on 127.0.0.1. Each exec request runs
// through mvdan.cc/sh's interpreter; external commands are answered by the
// built-in file and process commands, by Handlers, or by transcripts (exact
// command line → Reply). A command none of them knows fails the test with
// the command named, and answers 127 like a real shell.
type SSHServer struct {
	t        testing.TB
	Addr     string
	Root     string // the firewall's "/" on the local disk
	User     string
	HostKey  ssh.Signer
	KeyFile  string // the client's private key file
	Password string // accepted when non-empty

	listener net.Listener

	mu          sync.Mutex
	transcripts map[string]Reply
	handlers    map[string]Handler
	notFound    map[string]bool
	commands    []string // every external command line run, in order
	daemons     map[int]*daemonProc
	nextPID     int
	conns       map[ssh.Conn]context.CancelFunc
	dropOn      map[string]dropRule // command prefix → when the connection drops
	unreachable bool
}

type daemonProc struct {
	cmd    string
	cancel context.CancelFunc
	done   chan struct{}
}

// NewSSHServer starts a fake firewall shell with a fresh host key and user
// key; it stops in t.Cleanup.
func NewSSHServer(t testing.TB) *SSHServer {
	t.Helper()
	dir := t.TempDir()
	root := filepath.Join(dir, "fs")
	for _, d := range []string{"conf/backup", "var/run", "var/log", "tmp", "etc"} {
		if err := os.MkdirAll(filepath.Join(root, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	_, hostPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	hostKey, err := ssh.NewSignerFromKey(hostPriv)
	if err != nil {
		t.Fatal(err)
	}
	_, userPriv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	block, err := ssh.MarshalPrivateKey(userPriv, "")
	if err != nil {
		t.Fatal(err)
	}
	keyFile := filepath.Join(dir, "id_ed25519")
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(block), 0o600); err != nil {
		t.Fatal(err)
	}
	userSigner, err := ssh.NewSignerFromKey(userPriv)
	if err != nil {
		t.Fatal(err)
	}
	userPub := userSigner.PublicKey().Marshal()

	s := &SSHServer{
		t: t, Root: root, User: "admin", HostKey: hostKey, KeyFile: keyFile,
		transcripts: map[string]Reply{},
		handlers:    map[string]Handler{},
		notFound:    map[string]bool{},
		daemons:     map[int]*daemonProc{},
		nextPID:     40000,
		conns:       map[ssh.Conn]context.CancelFunc{},
		dropOn:      map[string]dropRule{},
	}
	cfg := &ssh.ServerConfig{
		PublicKeyCallback: func(c ssh.ConnMetadata, key ssh.PublicKey) (*ssh.Permissions, error) {
			if c.User() == s.User && bytes.Equal(key.Marshal(), userPub) {
				return nil, nil
			}
			return nil, errors.New("key not accepted")
		},
		PasswordCallback: func(c ssh.ConnMetadata, pw []byte) (*ssh.Permissions, error) {
			if s.Password != "" && c.User() == s.User && string(pw) == s.Password {
				return nil, nil
			}
			return nil, errors.New("password not accepted")
		},
	}
	cfg.AddHostKey(hostKey)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s.listener = ln
	s.Addr = ln.Addr().String()
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				s.serveConn(c, cfg)
			}()
		}
	}()
	s.installBuiltins()
	t.Cleanup(func() {
		ln.Close()
		s.mu.Lock()
		for c, cancel := range s.conns {
			cancel()
			c.Close()
		}
		for _, d := range s.daemons {
			d.cancel()
		}
		s.mu.Unlock()
		wg.Wait()
	})
	return s
}

// KnownHostsFile writes a known_hosts file that lists the server's host key
// and returns its path.
func (s *SSHServer) KnownHostsFile(t testing.TB) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "known_hosts")
	line := knownhosts.Line([]string{knownhosts.Normalize(s.Addr)}, s.HostKey.PublicKey()) + "\n"
	if err := os.WriteFile(p, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// Config returns an SSHConfig that reaches this server with key auth and a
// known_hosts file that trusts it; keepalives are off and retries quick.
func (s *SSHServer) Config(t testing.TB) fwapi.SSHConfig {
	t.Helper()
	return fwapi.SSHConfig{
		Addr:       s.Addr,
		User:       s.User,
		KeyFile:    s.KeyFile,
		KnownHosts: s.KnownHostsFile(t),
		KeepAlive:  -1,
		Retries:    2,
		Backoff:    20 * time.Millisecond,
	}
}

// Transcript makes the exact command line answer with r.
func (s *SSHServer) Transcript(cmdline string, r Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.transcripts[cmdline] = r
}

// TranscriptOutput returns the current recorded stdout of a command line.
func (s *SSHServer) TranscriptOutput(cmdline string) (string, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	r, ok := s.transcripts[cmdline]
	return r.Stdout, ok
}

// Handle makes the command name answer through h (after the built-ins).
func (s *SSHServer) Handle(name string, h Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handlers[name] = h
}

// NotFound declares that the command name does not exist on this firewall:
// it answers 127 without failing the test.
func (s *SSHServer) NotFound(name string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notFound[name] = true
}

// DropConnectionOn makes the server cut the whole SSH connection, as a lost
// link would, while running a command line starting with prefix, after it
// has read afterBytes of the command's standard input (0: before the
// command runs).
func (s *SSHServer) DropConnectionOn(prefix string, afterBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropOn[prefix] = dropRule{after: afterBytes}
}

// DropConnectionOnce is DropConnectionOn for the first matching command
// only.
func (s *SSHServer) DropConnectionOnce(prefix string, afterBytes int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dropOn[prefix] = dropRule{after: afterBytes, once: true}
}

type dropRule struct {
	after int
	once  bool
}

// SetUnreachable cuts every connection and refuses new ones (the firewall
// stays up: its daemons keep running) until called with false.
func (s *SSHServer) SetUnreachable(down bool) {
	s.mu.Lock()
	s.unreachable = down
	var conns []ssh.Conn
	if down {
		for c, cancel := range s.conns {
			cancel()
			conns = append(conns, c)
		}
	}
	s.mu.Unlock()
	for _, c := range conns {
		c.Close()
	}
}

// Commands returns every external command line run so far, in order.
func (s *SSHServer) Commands() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]string(nil), s.commands...)
}

// ResetCommands forgets the commands run so far.
func (s *SSHServer) ResetCommands() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.commands = nil
}

// Path maps a firewall path to the local file that holds it.
func (s *SSHServer) Path(p string) string {
	if strings.HasPrefix(p, s.Root+string(filepath.Separator)) || p == s.Root {
		return p
	}
	p = filepath.Clean("/" + p)
	if rest, ok := strings.CutPrefix(p, "/cf/conf"); ok {
		p = "/conf" + rest
	}
	return filepath.Join(s.Root, p)
}

// ReadFile reads a firewall file, failing the test if it is absent.
func (s *SSHServer) ReadFile(t testing.TB, p string) []byte {
	t.Helper()
	data, err := os.ReadFile(s.Path(p))
	if err != nil {
		t.Fatalf("firewall file: %v", err)
	}
	return data
}

// WriteFile puts a file on the firewall.
func (s *SSHServer) WriteFile(t testing.TB, p string, data []byte) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(s.Path(p)), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(s.Path(p), data, 0o644); err != nil {
		t.Fatal(err)
	}
}

// Glob lists firewall paths matching a pattern (in firewall terms).
func (s *SSHServer) Glob(pattern string) []string {
	matches, _ := filepath.Glob(s.Path(pattern))
	out := make([]string, len(matches))
	for i, m := range matches {
		out[i] = "/" + filepath.ToSlash(strings.TrimPrefix(m, s.Root+string(filepath.Separator)))
	}
	return out
}

// DaemonRunning reports whether a daemon(8) process started from pidFile
// is still running.
func (s *SSHServer) DaemonRunning(pidFile string) bool {
	data, err := os.ReadFile(s.Path(pidFile))
	if err != nil {
		return false
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, ok := s.daemons[pid]
	return ok
}

// WaitDaemons waits until no daemon is running or the timeout passes.
func (s *SSHServer) WaitDaemons(timeout time.Duration) bool {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		n := len(s.daemons)
		s.mu.Unlock()
		if n == 0 {
			return true
		}
		time.Sleep(20 * time.Millisecond)
	}
	return false
}

func (s *SSHServer) serveConn(c net.Conn, cfg *ssh.ServerConfig) {
	s.mu.Lock()
	down := s.unreachable
	s.mu.Unlock()
	if down {
		c.Close()
		return
	}
	sconn, chans, reqs, err := ssh.NewServerConn(c, cfg)
	if err != nil {
		c.Close()
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	s.mu.Lock()
	s.conns[sconn] = cancel
	down = s.unreachable // it may have gone down during the handshake
	s.mu.Unlock()
	if down {
		cancel()
	}
	defer func() {
		s.mu.Lock()
		delete(s.conns, sconn)
		s.mu.Unlock()
		cancel()
		sconn.Close()
	}()
	go ssh.DiscardRequests(reqs)
	if down {
		return
	}
	var wg sync.WaitGroup
	for nc := range chans {
		if nc.ChannelType() != "session" {
			nc.Reject(ssh.UnknownChannelType, "only sessions")
			continue
		}
		ch, chReqs, err := nc.Accept()
		if err != nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			s.serveSession(ctx, sconn, ch, chReqs)
		}()
	}
	wg.Wait()
}

func (s *SSHServer) serveSession(connCtx context.Context, conn ssh.Conn, ch ssh.Channel, reqs <-chan *ssh.Request) {
	defer ch.Close()
	ctx, cancel := context.WithCancel(connCtx)
	defer cancel()
	for req := range reqs {
		switch req.Type {
		case "exec":
			var payload struct{ Command string }
			if err := ssh.Unmarshal(req.Payload, &payload); err != nil {
				req.Reply(false, nil)
				return
			}
			req.Reply(true, nil)
			go func() {
				for r := range reqs {
					if r.Type == "signal" {
						cancel()
					}
					if r.WantReply {
						r.Reply(false, nil)
					}
				}
			}()
			var stdin io.Reader = ch
			if n, ok := s.dropFor(payload.Command); ok {
				if n == 0 {
					// Cut before the command runs.
					cancel()
					conn.Close()
					return
				}
				stdin = &dropReader{r: ch, left: n, drop: func() { cancel(); conn.Close() }}
			}
			code := s.runLine(ctx, payload.Command, stdin, ch, ch.Stderr())
			if ctx.Err() != nil {
				return
			}
			ch.CloseWrite()
			var status [4]byte
			binary.BigEndian.PutUint32(status[:], uint32(code))
			ch.SendRequest("exit-status", false, status[:])
			return
		default:
			if req.WantReply {
				req.Reply(false, nil)
			}
		}
	}
}

func (s *SSHServer) dropFor(cmd string) (int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for prefix, r := range s.dropOn {
		if strings.HasPrefix(cmd, prefix) {
			if r.once {
				delete(s.dropOn, prefix)
			}
			return r.after, true
		}
	}
	return 0, false
}

// dropReader passes left bytes through, then cuts the connection.
type dropReader struct {
	r    io.Reader
	left int
	drop func()
}

func (d *dropReader) Read(p []byte) (int, error) {
	if d.left <= 0 {
		d.drop()
		return 0, io.ErrUnexpectedEOF
	}
	if len(p) > d.left {
		p = p[:d.left]
	}
	n, err := d.r.Read(p)
	d.left -= n
	return n, err
}

// RunLine runs a command line as an exec request would; daemons use it.
func (s *SSHServer) runLine(ctx context.Context, line string, stdin io.Reader, stdout, stderr io.Writer) int {
	file, err := syntax.NewParser().Parse(strings.NewReader(line), "")
	if err != nil {
		fmt.Fprintf(stderr, "sh: %v\n", err)
		return 2
	}
	r, err := interp.New(
		interp.StdIO(stdin, stdout, stderr),
		interp.Dir(s.Root),
		interp.ExecHandlers(func(interp.ExecHandlerFunc) interp.ExecHandlerFunc { return s.exec }),
		interp.OpenHandler(func(ctx context.Context, p string, flag int, perm os.FileMode) (io.ReadWriteCloser, error) {
			if p == "/dev/null" {
				return interp.DefaultOpenHandler()(ctx, p, flag, perm)
			}
			return os.OpenFile(s.Path(p), flag, perm)
		}),
		interp.StatHandler(func(ctx context.Context, name string, follow bool) (fs.FileInfo, error) {
			if follow {
				return os.Stat(s.Path(name))
			}
			return os.Lstat(s.Path(name))
		}),
		interp.ReadDirHandler2(func(ctx context.Context, p string) ([]fs.DirEntry, error) {
			return os.ReadDir(s.Path(p))
		}),
	)
	if err != nil {
		fmt.Fprintf(stderr, "sh: %v\n", err)
		return 2
	}
	err = r.Run(ctx, file)
	var status interp.ExitStatus
	switch {
	case err == nil:
		return 0
	case errors.As(err, &status):
		return int(status)
	default:
		fmt.Fprintf(stderr, "sh: %v\n", err)
		return 2
	}
}

func (s *SSHServer) exec(ctx context.Context, args []string) error {
	hc := interp.HandlerCtx(ctx)
	line := strings.Join(args, " ")
	s.mu.Lock()
	s.commands = append(s.commands, line)
	reply, haveReply := s.transcripts[line]
	h, haveHandler := s.handlers[args[0]]
	notFound := s.notFound[args[0]]
	s.mu.Unlock()
	switch {
	case notFound:
	case haveReply:
		io.WriteString(hc.Stdout, reply.Stdout)
		io.WriteString(hc.Stderr, reply.Stderr)
		return exitStatus(reply.Exit)
	case haveHandler:
		return exitStatus(h(ctx, s, args, hc.Stdin, hc.Stdout, hc.Stderr))
	default:
		s.t.Errorf("fake firewall: unexpected command %q", line)
	}
	fmt.Fprintf(hc.Stderr, "%s: not found\n", args[0])
	return interp.ExitStatus(127)
}

func exitStatus(code int) error {
	if code == 0 {
		return nil
	}
	return interp.ExitStatus(uint8(code))
}

// LoadTranscripts reads transcripts in the fixtures format: a line
// "$ COMMAND LINE" starts a command, the lines up to the next "$ " line are
// its stdout, and an optional last line "? exit N" sets its status.
func (s *SSHServer) LoadTranscripts(t testing.TB, fsys fs.FS, pattern string) {
	t.Helper()
	names, err := fs.Glob(fsys, pattern)
	if err != nil || len(names) == 0 {
		t.Fatalf("no transcripts match %q (err %v)", pattern, err)
	}
	for _, name := range names {
		data, err := fs.ReadFile(fsys, name)
		if err != nil {
			t.Fatal(err)
		}
		for cmd, r := range ParseTranscripts(string(data)) {
			s.Transcript(cmd, r)
		}
	}
}

var exitLine = regexp.MustCompile(`^\? exit (\d+)$`)

// ParseTranscripts parses the transcript format LoadTranscripts reads.
func ParseTranscripts(text string) map[string]Reply {
	out := map[string]Reply{}
	var cmd string
	var body []string
	flush := func() {
		if cmd == "" {
			return
		}
		r := Reply{}
		if n := len(body); n > 0 {
			if m := exitLine.FindStringSubmatch(body[n-1]); m != nil {
				r.Exit, _ = strconv.Atoi(m[1])
				body = body[:n-1]
			}
		}
		if len(body) > 0 {
			r.Stdout = strings.Join(body, "\n") + "\n"
		}
		out[cmd] = r
	}
	lines := strings.Split(strings.TrimSuffix(text, "\n"), "\n")
	for _, l := range lines {
		if c, ok := strings.CutPrefix(l, "$ "); ok {
			flush()
			cmd, body = c, nil
			continue
		}
		if cmd != "" {
			body = append(body, l)
		}
	}
	flush()
	return out
}

// sha256Hex is FreeBSD's sha256 -q.
func sha256Hex(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}
