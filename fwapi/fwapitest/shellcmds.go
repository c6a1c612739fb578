package fwapitest

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// installBuiltins registers the FreeBSD file, text and process commands the
// pfSense driver may use, working on the server's folder.
func (s *SSHServer) installBuiltins() {
	s.handlers["cat"] = cmdCat
	s.handlers["cp"] = cmdCp
	s.handlers["mv"] = cmdMv
	s.handlers["rm"] = cmdRm
	s.handlers["mkdir"] = cmdMkdir
	s.handlers["ls"] = cmdLs
	s.handlers["wc"] = cmdWc
	s.handlers["head"] = cmdHead
	s.handlers["grep"] = cmdGrep
	s.handlers["sha256"] = cmdSha256
	s.handlers["date"] = cmdDate
	s.handlers["sleep"] = cmdSleep
	s.handlers["sync"] = func(context.Context, *SSHServer, []string, io.Reader, io.Writer, io.Writer) int { return 0 }
	s.handlers["daemon"] = cmdDaemon
	s.handlers["kill"] = cmdKill
	s.handlers["pkill"] = cmdPkill
}

func usage(stderr io.Writer, format string, args ...any) int {
	fmt.Fprintf(stderr, format+"\n", args...)
	return 64
}

func cmdCat(_ context.Context, s *SSHServer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) == 1 {
		io.Copy(stdout, stdin)
		return 0
	}
	code := 0
	for _, p := range args[1:] {
		data, err := os.ReadFile(s.Path(p))
		if err != nil {
			fmt.Fprintf(stderr, "cat: %s: No such file or directory\n", p)
			code = 1
			continue
		}
		stdout.Write(data)
	}
	return code
}

func cmdCp(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	if len(args) != 3 {
		return usage(stderr, "usage: cp source_file target_file")
	}
	data, err := os.ReadFile(s.Path(args[1]))
	if err != nil {
		fmt.Fprintf(stderr, "cp: %s: No such file or directory\n", args[1])
		return 1
	}
	dst := s.Path(args[2])
	if fi, err := os.Stat(dst); err == nil && fi.IsDir() {
		dst = filepath.Join(dst, filepath.Base(args[1]))
	}
	if err := os.WriteFile(dst, data, 0o644); err != nil {
		fmt.Fprintf(stderr, "cp: %s: %v\n", args[2], err)
		return 1
	}
	return 0
}

func cmdMv(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	if len(args) != 3 {
		return usage(stderr, "usage: mv source target")
	}
	if err := os.Rename(s.Path(args[1]), s.Path(args[2])); err != nil {
		fmt.Fprintf(stderr, "mv: rename %s to %s: No such file or directory\n", args[1], args[2])
		return 1
	}
	return 0
}

func cmdRm(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	force, recursive := false, false
	var paths []string
	for _, a := range args[1:] {
		switch {
		case a == "-f":
			force = true
		case a == "-r" || a == "-R":
			recursive = true
		case a == "-rf" || a == "-fr":
			force, recursive = true, true
		default:
			paths = append(paths, a)
		}
	}
	code := 0
	for _, p := range paths {
		lp := s.Path(p)
		fi, err := os.Lstat(lp)
		if err != nil {
			if !force {
				fmt.Fprintf(stderr, "rm: %s: No such file or directory\n", p)
				code = 1
			}
			continue
		}
		if fi.IsDir() && !recursive {
			fmt.Fprintf(stderr, "rm: %s: is a directory\n", p)
			code = 1
			continue
		}
		if err := os.RemoveAll(lp); err != nil {
			fmt.Fprintf(stderr, "rm: %s: %v\n", p, err)
			code = 1
		}
	}
	return code
}

func cmdMkdir(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	parents := false
	var paths []string
	for _, a := range args[1:] {
		if a == "-p" {
			parents = true
			continue
		}
		paths = append(paths, a)
	}
	if len(paths) == 0 {
		return usage(stderr, "usage: mkdir [-p] directory ...")
	}
	for _, p := range paths {
		var err error
		if parents {
			err = os.MkdirAll(s.Path(p), 0o755)
		} else {
			err = os.Mkdir(s.Path(p), 0o755)
		}
		if err != nil {
			if os.IsExist(err) {
				fmt.Fprintf(stderr, "mkdir: %s: File exists\n", p)
			} else {
				fmt.Fprintf(stderr, "mkdir: %s: No such file or directory\n", p)
			}
			return 1
		}
	}
	return 0
}

func cmdLs(_ context.Context, s *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	for _, p := range args[1:] {
		if strings.HasPrefix(p, "-") {
			continue
		}
		entries, err := os.ReadDir(s.Path(p))
		if err != nil {
			if _, serr := os.Stat(s.Path(p)); serr == nil {
				fmt.Fprintln(stdout, p)
				continue
			}
			fmt.Fprintf(stderr, "ls: %s: No such file or directory\n", p)
			return 1
		}
		for _, e := range entries {
			fmt.Fprintln(stdout, e.Name())
		}
	}
	return 0
}

func input(s *SSHServer, files []string, stdin io.Reader, stderr io.Writer) (io.Reader, int) {
	if len(files) == 0 {
		return stdin, 0
	}
	data, err := os.ReadFile(s.Path(files[0]))
	if err != nil {
		fmt.Fprintf(stderr, "%s: No such file or directory\n", files[0])
		return nil, 1
	}
	return bytes.NewReader(data), 0
}

func cmdWc(_ context.Context, s *SSHServer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 2 || args[1] != "-l" {
		return usage(stderr, "usage: wc -l [file]")
	}
	in, code := input(s, args[2:], stdin, stderr)
	if code != 0 {
		return code
	}
	data, _ := io.ReadAll(in)
	fmt.Fprintf(stdout, "%8d\n", bytes.Count(data, []byte("\n")))
	return 0
}

func cmdHead(_ context.Context, s *SSHServer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	if len(args) < 3 || args[1] != "-n" {
		return usage(stderr, "usage: head -n count [file]")
	}
	n, err := strconv.Atoi(args[2])
	if err != nil {
		return usage(stderr, "head: illegal line count -- %s", args[2])
	}
	in, code := input(s, args[3:], stdin, stderr)
	if code != 0 {
		return code
	}
	sc := bufio.NewScanner(in)
	for i := 0; i < n && sc.Scan(); i++ {
		fmt.Fprintln(stdout, sc.Text())
	}
	io.Copy(io.Discard, in)
	return 0
}

func cmdGrep(_ context.Context, s *SSHServer, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	count := false
	var rest []string
	for _, a := range args[1:] {
		switch a {
		case "-c":
			count = true
		case "-E":
		default:
			rest = append(rest, a)
		}
	}
	if len(rest) == 0 {
		return usage(stderr, "usage: grep [-c] [-E] pattern [file]")
	}
	re, err := regexp.Compile(rest[0])
	if err != nil {
		fmt.Fprintf(stderr, "grep: %v\n", err)
		return 2
	}
	in, code := input(s, rest[1:], stdin, stderr)
	if code != 0 {
		return 2
	}
	n := 0
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		if re.MatchString(sc.Text()) {
			n++
			if !count {
				fmt.Fprintln(stdout, sc.Text())
			}
		}
	}
	if count {
		fmt.Fprintln(stdout, n)
	}
	if n == 0 {
		return 1
	}
	return 0
}

func cmdSha256(_ context.Context, s *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 3 || args[1] != "-q" {
		return usage(stderr, "usage: sha256 -q file")
	}
	data, err := os.ReadFile(s.Path(args[2]))
	if err != nil {
		fmt.Fprintf(stderr, "sha256: %s: No such file or directory\n", args[2])
		return 1
	}
	fmt.Fprintln(stdout, sha256Hex(data))
	return 0
}

func cmdDate(_ context.Context, _ *SSHServer, args []string, _ io.Reader, stdout, stderr io.Writer) int {
	if len(args) != 2 || args[1] != "+%s" {
		return usage(stderr, "usage: date +%%s")
	}
	fmt.Fprintln(stdout, time.Now().Unix())
	return 0
}

func cmdSleep(ctx context.Context, _ *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	if len(args) != 2 {
		return usage(stderr, "usage: sleep seconds")
	}
	secs, err := strconv.ParseFloat(args[1], 64)
	if err != nil {
		return usage(stderr, "sleep: invalid time interval: %s", args[1])
	}
	select {
	case <-ctx.Done():
		return 130
	case <-time.After(time.Duration(secs * float64(time.Second))):
		return 0
	}
}

// cmdDaemon is daemon -f -p PIDFILE CMD ARGS...: the command runs detached,
// outliving the SSH session, and can be stopped with kill or pkill -F.
func cmdDaemon(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	var pidFile string
	i := 1
	for ; i < len(args); i++ {
		switch args[i] {
		case "-f":
		case "-p":
			i++
			if i < len(args) {
				pidFile = args[i]
			}
		default:
			goto done
		}
	}
done:
	if i >= len(args) {
		return usage(stderr, "usage: daemon [-f] [-p pidfile] command arguments ...")
	}
	cmdline := shellWords(args[i:])
	if args[i] == "/bin/sh" && len(args) > i+1 {
		script, err := os.ReadFile(s.Path(args[i+1]))
		if err != nil {
			fmt.Fprintf(stderr, "daemon: %s: No such file or directory\n", args[i+1])
			return 1
		}
		cmdline = string(script)
	}
	ctx, cancel := context.WithCancel(context.Background())
	d := &daemonProc{cmd: strings.Join(args[i:], " "), cancel: cancel, done: make(chan struct{})}
	s.mu.Lock()
	s.nextPID++
	pid := s.nextPID
	s.daemons[pid] = d
	s.mu.Unlock()
	if pidFile != "" {
		if err := os.WriteFile(s.Path(pidFile), []byte(strconv.Itoa(pid)+"\n"), 0o644); err != nil {
			fmt.Fprintf(stderr, "daemon: pidfile %s: %v\n", pidFile, err)
			return 1
		}
	}
	go func() {
		defer close(d.done)
		s.runLine(ctx, cmdline, strings.NewReader(""), io.Discard, io.Discard)
		s.mu.Lock()
		delete(s.daemons, pid)
		s.mu.Unlock()
		if pidFile != "" {
			os.Remove(s.Path(pidFile))
		}
	}()
	return 0
}

func shellWords(words []string) string {
	q := make([]string, len(words))
	for i, w := range words {
		q[i] = "'" + strings.ReplaceAll(w, "'", `'"'"'`) + "'"
	}
	return strings.Join(q, " ")
}

func (s *SSHServer) killPID(pid int) bool {
	s.mu.Lock()
	d, ok := s.daemons[pid]
	s.mu.Unlock()
	if !ok {
		return false
	}
	d.cancel()
	<-d.done
	return true
}

func cmdKill(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	code := 0
	for _, a := range args[1:] {
		if strings.HasPrefix(a, "-") {
			continue
		}
		pid, err := strconv.Atoi(a)
		if err != nil || !s.killPID(pid) {
			fmt.Fprintf(stderr, "kill: %s: No such process\n", a)
			code = 1
		}
	}
	return code
}

func cmdPkill(_ context.Context, s *SSHServer, args []string, _ io.Reader, _, stderr io.Writer) int {
	if len(args) != 3 || args[1] != "-F" {
		return usage(stderr, "usage: pkill -F pidfile")
	}
	data, err := os.ReadFile(s.Path(args[2]))
	if err != nil {
		fmt.Fprintf(stderr, "pkill: cannot open pidfile `%s': No such file or directory\n", args[2])
		return 2
	}
	pid, _ := strconv.Atoi(strings.TrimSpace(string(data)))
	if !s.killPID(pid) {
		return 1
	}
	return 0
}
