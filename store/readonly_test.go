package store

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Reading never creates, grows or migrates a database.
func TestOpenReadOnly(t *testing.T) {
	ctx := t.Context()
	s, path := sqliteOnly.open(t)
	id := newRun(t, s)
	s.Close()
	before, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}

	r, err := OpenReadOnly(ctx, path)
	if err != nil {
		t.Fatalf("OpenReadOnly(%s): %v", path, err)
	}
	if _, err := r.Run(ctx, id); err != nil {
		t.Errorf("Run(%d) on a read-only store: %v", id, err)
	}
	if _, err := r.CreateRun(ctx, Run{Spec: "x", Target: "lab"}); err == nil {
		t.Errorf("CreateRun on a read-only store succeeded")
	}
	r.Close()
	if after, _ := os.ReadFile(path); !bytes.Equal(before, after) {
		t.Errorf("opening read-only changed the database file")
	}

	dir := t.TempDir()
	missing := filepath.Join(dir, "nope.db")
	if _, err := OpenReadOnly(ctx, missing); !errors.Is(err, fs.ErrNotExist) || !strings.Contains(err.Error(), missing) {
		t.Errorf("OpenReadOnly(missing) = %v; want a not-exist error naming the file", err)
	}
	if _, err := os.Stat(missing); err == nil {
		t.Errorf("OpenReadOnly created %s", missing)
	}

	empty := filepath.Join(dir, "empty.db")
	text := filepath.Join(dir, "notes.txt")
	os.WriteFile(empty, nil, 0o644)
	os.WriteFile(text, []byte("these are not results\n"), 0o644)
	for _, p := range []string{empty, text} {
		_, err := OpenReadOnly(ctx, p)
		if !errors.Is(err, ErrNotResults) || !strings.Contains(err.Error(), p) {
			t.Errorf("OpenReadOnly(%s) = %v; want ErrNotResults naming the file", filepath.Base(p), err)
		}
		if fi, _ := os.Stat(p); fi.Size() > int64(len("these are not results\n")) {
			t.Errorf("OpenReadOnly(%s) grew the file to %d bytes", filepath.Base(p), fi.Size())
		}
	}
}

// A database of a newer fwab is refused with both versions named; an older
// one asks for a migration and is left as it is.
func TestOpenReadOnlySchema(t *testing.T) {
	eachBackend(t, func(t *testing.T, b backend) {
		ctx := t.Context()
		for _, tt := range []struct {
			version int
			want    string
		}{
			{len(migrations) + 1, "newer than this fwab"},
			{0, "fwab db migrate"},
		} {
			w, p := b.open(t)
			if _, err := w.exec(ctx, `UPDATE schema_version SET version = ?`, tt.version); err != nil {
				t.Fatal(err)
			}
			w.Close()
			_, err := OpenReadOnly(ctx, p)
			if err == nil || !strings.Contains(err.Error(), tt.want) || errors.Is(err, ErrOlderSchema) != (tt.version < len(migrations)) {
				t.Errorf("schema %d: OpenReadOnly = %v; want an error containing %q", tt.version, err, tt.want)
			}
		}
		// A read-only store writes nothing.
		w, p := b.open(t)
		w.Close()
		r, err := OpenReadOnly(ctx, p)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		if _, err := r.CreateRun(ctx, Run{Spec: "x", Target: "lab"}); err == nil {
			t.Errorf("CreateRun on a read-only store succeeded")
		}
	})
}

func TestLatestEvents(t *testing.T) {
	eachBackend(t, testLatestEvents)
}

func testLatestEvents(t *testing.T, b backend) {
	ctx := t.Context()
	s, _ := b.open(t)
	if got, err := s.LatestEvents(ctx, "lab", "apply-cost"); err != nil || got != nil {
		t.Errorf("LatestEvents on an empty database = %v, %v", got, err)
	}
	old, newer, other := newRun(t, s), newRun(t, s), newRun(t, s)
	for _, e := range []struct {
		run  int64
		kind string
		msg  string
	}{{old, "apply-cost", "old"}, {newer, "apply-cost", "new-1"}, {newer, "warning", "not this kind"}, {newer, "apply-cost", "new-2"}} {
		if err := s.RecordEvent(ctx, e.run, Event{Kind: e.kind, Point: 0, Message: e.msg}); err != nil {
			t.Fatal(err)
		}
	}
	_ = other // a newer run without such events does not hide the one with them
	got, err := s.LatestEvents(ctx, "lab", "apply-cost")
	if err != nil || len(got) != 2 || got[0].Message != "new-1" || got[1].Message != "new-2" {
		t.Errorf("LatestEvents = %+v, %v; want the newer run's two", got, err)
	}
	if got, _ := s.LatestEvents(ctx, "other-box", "apply-cost"); len(got) != 0 {
		t.Errorf("another target's events: %+v", got)
	}
}
