package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/fwab/fwab/store"
	"github.com/fwab/fwab/store/pgtest"
)

// The load benchmark of a shared results store (BENCHMARKS.md): 1,000
// nightly runs of a 50-point matrix with 2 probes and 6 repeats, 600,000
// samples, generated in PostgreSQL; then the reading commands, each as a
// user runs it:
//
//	go test -run '^$' -bench BenchmarkFleetStore -benchtime 5x ./cmd/fwab
const (
	loadRuns, loadPoints, loadRepeats = 1000, 50, 6
)

func fleetSpec() string {
	var values []string
	for p := range loadPoints {
		values = append(values, fmt.Sprint(p*10))
	}
	return "target: lab\naxes:\n  rules@lan: [" + strings.Join(values, ", ") + "]\nprobes:\n" +
		"  - {name: up, direction: up, duration: 10s}\n  - {name: down, direction: down, duration: 10s}\n" +
		fmt.Sprintf("repeats: %d\n", loadRepeats)
}

func BenchmarkFleetStore(b *testing.B) {
	db, specFile := fleetStore(b)
	b.Setenv("FWAB_DB", db)

	for _, c := range []struct {
		name string
		args []string
		code int
	}{
		{"runs-list", []string{"runs", "list"}, exitOK},
		{"runs-list-testbed", []string{"runs", "list", "--testbed", "lab@000000000001"}, exitOK},
		{"report", []string{"report", "1000"}, exitOK},
		{"compare", []string{"compare", "1", "1000"}, exitFailure},
		{"trend", []string{"trend", specFile, "--testbed", "lab"}, exitFailure},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				out, errOut, code := runFwab(b, c.args...)
				if code != c.code {
					b.Fatalf("fwab %s = %d, want %d: %s\n%.500s", strings.Join(c.args, " "), code, c.code, errOut, out)
				}
			}
		})
	}
}

// fleetStore starts a PostgreSQL server with the benchmark's 1,000 runs
// in a database of its own: the database's URL and the spec's file.
func fleetStore(b testing.TB) (db, specFile string) {
	srv := pgtest.Start(b)
	db = srv.NewDatabase(b)
	spec := fleetSpec()
	specFile = filepath.Join(b.TempDir(), "nightly.yaml")
	os.WriteFile(specFile, []byte(spec), 0o644)
	st, err := store.Open(b.Context(), db)
	if err != nil {
		b.Fatal(err)
	}
	// One connection, so that the seed holds for the generation: the same
	// figures every time.
	conn, err := st.DB().Conn(b.Context())
	if err != nil {
		b.Fatal(err)
	}
	start := time.Now()
	for _, q := range []string{
		`SELECT setseed(0.5)`,
		`INSERT INTO runs (created, finished, status, spec, spec_hash, seed, fwab_version, target_name, testbed, target_info, firmware_version, config_hash)
		 SELECT to_char(timestamp '2024-01-01 02:00' + g * interval '1 day', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
		        to_char(timestamp '2024-01-01 04:00' + g * interval '1 day', 'YYYY-MM-DD"T"HH24:MI:SS"Z"'),
		        'done', $1, $2, g, 'bench', 'lab', 'lab@000000000001', '{}', CASE WHEN g < 500 THEN '2.7.2-RELEASE' ELSE '2.8.0-RELEASE' END, ''
		 FROM generate_series(1, ` + fmt.Sprint(loadRuns) + `) g`,
		`INSERT INTO points (run_id, idx, knobs, status)
		 SELECT r.id, p, '{"rules@lan":"' || (p * 10) || '"}', 'valid' FROM runs r, generate_series(0, ` + fmt.Sprint(loadPoints-1) + `) p`,
		// ±1 % noise, and 5 % slower from the 2.8.0 runs on.
		`INSERT INTO samples (run_id, point_idx, probe, round, repeat, direction, started, elapsed_ms, bits_per_second, sent_bps, retransmits, warnings, raw)
		 SELECT r.id, p, pr, rd, 0, CASE pr WHEN 'up' THEN 'up' ELSE 'down' END, r.created, 10000,
		        (940e6 - p * 1e6) * (1 + 0.02 * (random() - 0.5)) * CASE WHEN r.id > 500 THEN 0.95 ELSE 1 END, 941e6, 3, '[]', '{}'
		 FROM runs r, generate_series(0, ` + fmt.Sprint(loadPoints-1) + `) p, unnest(ARRAY['up', 'down']) pr, generate_series(0, ` + fmt.Sprint(loadRepeats-1) + `) rd`,
		// What autovacuum does to a table of nightly runs: the statistics,
		// and the visibility map an index-only scan needs.
		`VACUUM ANALYZE`,
	} {
		args := []any{}
		if strings.Contains(q, "$1") {
			args = []any{spec, store.HashSpec(spec)}
		}
		if _, err := conn.ExecContext(b.Context(), q, args...); err != nil {
			b.Fatalf("generating: %v", err)
		}
	}
	var n int
	conn.QueryRowContext(b.Context(), `SELECT count(*) FROM samples`).Scan(&n)
	conn.Close()
	st.Close()
	b.Logf("generated %d runs, %d samples in %s", loadRuns, n, time.Since(start).Round(time.Millisecond))
	return db, specFile
}
