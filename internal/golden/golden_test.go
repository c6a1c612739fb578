package golden

import (
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// recorder stands in for a test, to see what the helpers report.
type recorder struct {
	testing.TB
	errs  []string
	fatal bool
}

func (r *recorder) Helper() {}

func (r *recorder) Errorf(format string, args ...any) {
	r.errs = append(r.errs, fmt.Sprintf(format, args...))
}

func (r *recorder) Fatalf(format string, args ...any) {
	r.Errorf(format, args...)
	r.fatal = true
	runtime.Goexit()
}

func (r *recorder) Fatal(args ...any) { r.Fatalf("%s", fmt.Sprint(args...)) }

// record runs fn against a recorder, as a test body would run.
func record(t *testing.T, fn func(testing.TB)) *recorder {
	r := &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(r)
	}()
	<-done
	return r
}

// inTestdata runs the test in a fresh folder holding testdata/ with files.
func inTestdata(t *testing.T, files map[string]string) {
	t.Helper()
	t.Chdir(t.TempDir())
	if err := os.Mkdir(Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	for name, content := range files {
		if err := os.WriteFile(filepath.Join(Dir, name), []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func setUpdate(t *testing.T, v bool) {
	old := *update
	*update = v
	t.Cleanup(func() { *update = old })
}

func TestOutput(t *testing.T) {
	tests := []struct {
		name           string
		files          map[string]string
		stdout, stderr string
		wantErrs       []string // substrings, one per reported error
		wantFatal      bool
	}{
		{name: "match", files: map[string]string{"x.txt": "out\n", "x.txt.stderr": "warn\n"}, stdout: "out\n", stderr: "warn\n"},
		{name: "no stderr file, empty stderr", files: map[string]string{"x.txt": "out\n"}, stdout: "out\n"},
		{name: "stdout differs", files: map[string]string{"x.txt": "out\n"}, stdout: "other\n",
			wantErrs: []string{"testdata/x.txt differs (-want +got)"}},
		{name: "stderr unexpected", files: map[string]string{"x.txt": "out\n"}, stdout: "out\n", stderr: "warning: boom\n",
			wantErrs: []string{"testdata/x.txt.stderr differs"}},
		{name: "stderr missing", files: map[string]string{"x.txt": "out\n", "x.txt.stderr": "warn\n"}, stdout: "out\n",
			wantErrs: []string{"testdata/x.txt.stderr differs"}},
		{name: "both differ", files: map[string]string{"x.txt": "out\n", "x.txt.stderr": "warn\n"}, stdout: "b\n", stderr: "c\n",
			wantErrs: []string{"testdata/x.txt differs", "testdata/x.txt.stderr differs"}},
		{name: "no golden file", stdout: "out\n", wantErrs: []string{"run go test -update"}, wantFatal: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			inTestdata(t, tt.files)
			r := record(t, func(tb testing.TB) { Output(tb, "x.txt", tt.stdout, tt.stderr) })
			if len(r.errs) != len(tt.wantErrs) {
				t.Fatalf("Output reported %d errors %q, want %d", len(r.errs), r.errs, len(tt.wantErrs))
			}
			for i, want := range tt.wantErrs {
				if !strings.Contains(r.errs[i], want) {
					t.Errorf("error %d = %q, want it to contain %q", i, r.errs[i], want)
				}
			}
			if r.fatal != tt.wantFatal {
				t.Errorf("fatal = %v, want %v", r.fatal, tt.wantFatal)
			}
		})
	}
}

func TestFileDiff(t *testing.T) {
	inTestdata(t, map[string]string{"a.txt": "one\ntwo\nthree\n"})
	r := record(t, func(tb testing.TB) { File(tb, "a.txt", []byte("one\n2\nthree\n")) })
	if len(r.errs) != 1 {
		t.Fatalf("File reported %q, want one error", r.errs)
	}
	for _, line := range []string{"-", "two", "+", "2"} {
		if !strings.Contains(r.errs[0], line) {
			t.Errorf("report %q lacks %q of a diff", r.errs[0], line)
		}
	}
}

func TestUpdate(t *testing.T) {
	inTestdata(t, map[string]string{"x.txt": "old\n", "x.txt.stderr": "old warning\n", "y.txt.stderr": "stale\n"})
	setUpdate(t, true)
	r := record(t, func(tb testing.TB) {
		Output(tb, "x.txt", "new\n", "new warning\n")
		Output(tb, "y.txt", "y\n", "")
		File(tb, "sub/z.json", []byte("{}\n"))
	})
	if len(r.errs) != 0 {
		t.Fatalf("-update reported %q", r.errs)
	}
	for name, want := range map[string]string{"x.txt": "new\n", "x.txt.stderr": "new warning\n", "y.txt": "y\n", "sub/z.json": "{}\n"} {
		got, err := os.ReadFile(filepath.Join(Dir, name))
		if err != nil || string(got) != want {
			t.Errorf("after -update %s = %q (%v), want %q", name, got, err, want)
		}
	}
	if _, err := os.Stat(filepath.Join(Dir, "y.txt.stderr")); !os.IsNotExist(err) {
		t.Errorf("-update with an empty stderr left y.txt.stderr (stat: %v)", err)
	}

	setUpdate(t, false)
	r = record(t, func(tb testing.TB) {
		Output(tb, "x.txt", "new\n", "new warning\n")
		Output(tb, "y.txt", "y\n", "")
	})
	if len(r.errs) != 0 {
		t.Errorf("the rewritten files do not match what was written: %q", r.errs)
	}
}
