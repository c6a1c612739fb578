// Package store keeps sweep results in SQLite (modernc.org/sqlite, no cgo),
// the default, or in PostgreSQL (github.com/jackc/pgx/v5) for a fleet of
// testbeds writing to one database: runs, their matrix points, the samples
// probed at each point with the DUT's metrics during them, and the events
// of the run. Every sample is written in
// its own transaction as soon as it is measured, so a crash loses at most the
// sample in flight, and a resumed run skips what is already recorded.
//
// Both run the same queries and the same schema (see migrations); every
// write that is one transaction on SQLite is one on PostgreSQL, and ids come
// back with RETURNING on both.
//
// The SQLite database is opened in WAL mode, so reports can read while a sweep
// writes, with synchronous=FULL: each committed sample is on disk before
// RecordSample returns. A sample takes seconds to measure and an fsync
// milliseconds, so FULL costs nothing noticeable; NORMAL would survive a
// killed fwab just as well but could lose the last samples on a power cut,
// which is a real risk on the test bench next to a firewall being rebooted.
package store

import (
	"bytes"
	"cmp"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sync/errgroup"

	"github.com/fwab/fwab/probe"

	"modernc.org/sqlite" // registers the "sqlite" driver
	sqlite3 "modernc.org/sqlite/lib"
)

// Store is an open results database.
type Store struct {
	db       *sql.DB
	location string // the path, or the URL without its password
	dialect  dialect
}

// Errors callers can test for with errors.Is.
var (
	ErrNotFound  = errors.New("not found")
	ErrDuplicate = errors.New("already recorded")
)

// DefaultPath is ~/.local/share/fwab/results.db (or $XDG_DATA_HOME/fwab).
func DefaultPath() string {
	if d := os.Getenv("XDG_DATA_HOME"); d != "" {
		return filepath.Join(d, "fwab", "results.db")
	}
	home, err := os.UserHomeDir()
	if err != nil {
		return "results.db"
	}
	return filepath.Join(home, ".local", "share", "fwab", "results.db")
}

// Open opens the results database at location, creating it if needed, and
// brings its schema up to date. A location that is a postgres:// or
// postgresql:// URL is a PostgreSQL database (see OpenPostgres); anything
// else is the path of an SQLite file, created with its folder.
func Open(ctx context.Context, location string) (*Store, error) {
	if IsURL(location) {
		return openPostgres(ctx, location, false)
	}
	return openSQLite(ctx, location)
}

func openSQLite(ctx context.Context, path string) (*Store, error) {
	if path == "" {
		return nil, errors.New("results database path is empty")
	}
	if strings.ContainsAny(path, "?#") {
		return nil, fmt.Errorf("results database path %q: '?' and '#' are not allowed in the file name", path)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("results database: %w", err)
	}
	// busy_timeout first: switching a new file to WAL takes a lock that
	// another fwab opening it at the same moment may hold.
	dsn := "file:" + path +
		"?_pragma=busy_timeout(10000)&_pragma=foreign_keys(1)&_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate"
	db, err := sql.Open("sqlite", dsn)
	if err != nil {
		return nil, fmt.Errorf("results database %s: %w", path, err)
	}
	s := &Store{db: db, location: path, dialect: sqliteDialect}
	// A new file's first connection (the pragmas, then the migration)
	// can find it busy without waiting, when other fwabs open the same
	// new file at once; the migration is one transaction, so it is simply
	// tried again.
	for attempt := 1; ; attempt++ {
		err = s.migrate(ctx)
		if !isBusy(err) || attempt == 50 {
			break
		}
		time.Sleep(time.Duration(attempt) * 20 * time.Millisecond)
	}
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("results database %s: %w", path, err)
	}
	return s, nil
}

// isBusy says err is SQLite's SQLITE_BUSY (or one of its extended codes).
func isBusy(err error) bool {
	var se *sqlite.Error
	return errors.As(err, &se) && se.Code()&0xff == sqlite3.SQLITE_BUSY
}

// Close closes the database.
func (s *Store) Close() error { return s.db.Close() }

// DB gives read access for reports that need their own queries; write
// them with ? placeholders and pass them through Rebind.
func (s *Store) DB() *sql.DB { return s.db }

// Rebind turns a query written with ? placeholders into this database's
// dialect.
func (s *Store) Rebind(query string) string { return s.dialect.rebind(query) }

// Location is where the database is: its file, or its URL with any
// password replaced by xxxxx. It is safe to print.
func (s *Store) Location() string { return s.location }

// Dialect is "sqlite" or "postgres".
func (s *Store) Dialect() string { return s.dialect.name }

func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return s.db.ExecContext(ctx, s.dialect.rebind(query), args...)
}

func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	return s.db.QueryContext(ctx, s.dialect.rebind(query), args...)
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return s.db.QueryRowContext(ctx, s.dialect.rebind(query), args...)
}

// tx is a transaction that speaks the store's dialect.
type tx struct {
	*sql.Tx
	d dialect
}

func (s *Store) begin(ctx context.Context) (tx, error) {
	t, err := s.db.BeginTx(ctx, nil)
	return tx{t, s.dialect}, err
}

func (t tx) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	return t.ExecContext(ctx, t.d.rebind(query), args...)
}

func (t tx) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	return t.QueryRowContext(ctx, t.d.rebind(query), args...)
}

// migrateLock is the PostgreSQL advisory lock that makes fwab processes
// starting at once on one database migrate it one after another (SQLite's
// immediate transactions do the same for a file).
const migrateLock = 0x66776162 // "fwab"

func (s *Store) migrate(ctx context.Context) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if s.dialect.name == postgresDialect.name {
		if _, err := tx.exec(ctx, `SELECT pg_advisory_xact_lock(?)`, migrateLock); err != nil {
			return err
		}
	}
	if _, err := tx.exec(ctx, `CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)`); err != nil {
		return err
	}
	var version int
	err = tx.queryRow(ctx, `SELECT version FROM schema_version`).Scan(&version)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		if _, err := tx.exec(ctx, `INSERT INTO schema_version (version) VALUES (0)`); err != nil {
			return err
		}
	case err != nil:
		return err
	}
	if version > len(migrations) {
		return newerSchemaError(version)
	}
	for v := version; v < len(migrations); v++ {
		if _, err := tx.exec(ctx, s.dialect.schema(migrations[v])); err != nil {
			return fmt.Errorf("migrating to schema version %d: %w", v+1, err)
		}
	}
	if _, err := tx.exec(ctx, `UPDATE schema_version SET version = ?`, len(migrations)); err != nil {
		return err
	}
	return tx.Commit()
}

// RunStatus is where a run stands.
type RunStatus string

// Run statuses.
const (
	Running   RunStatus = "running"
	Done      RunStatus = "done"
	Failed    RunStatus = "failed"
	Cancelled RunStatus = "cancelled"
)

// Run is one sweep.
type Run struct {
	ID          int64
	Created     time.Time
	Finished    time.Time // zero while running
	Status      RunStatus
	Spec        string // the matrix spec text
	SpecHash    string // sha256 of Spec; computed by CreateRun
	Seed        int64
	FwabVersion string
	Target      string
	// Testbed is the box measured: the target's name and a fingerprint
	// of its hardware (CPU, NICs and drivers, endpoint hosts), not of its
	// software, so a firmware upgrade stays on one testbed. "" for runs
	// from before testbeds were recorded.
	Testbed    string
	TargetInfo json.RawMessage // what was known of the target: flavor, version, NICs (never secrets)
	Firmware   string
	ConfigHash string // sha256 of the original config.xml
}

// RunSummary is a run with its counts, for listings.
type RunSummary struct {
	Run
	Points, Samples, FailedSamples int
}

// HashSpec is the spec hash stored with a run.
func HashSpec(spec string) string {
	sum := sha256.Sum256([]byte(spec))
	return hex.EncodeToString(sum[:])
}

// specURL is an http(s) URL in a spec's text: up to the whitespace or
// quote that ends a YAML scalar.
var specURL = regexp.MustCompile(`(?i)https?://[^\s'"<>]+`)

// redactSpec is a spec's text as a run keeps and shows it: every URL in
// it (a smart plug's, power: url:) without its userinfo (user:password@),
// query (?token=..., ?password_file=...) and fragment, which may carry
// credentials. The run's SpecHash stays the hash of the spec as given.
func redactSpec(spec string) string {
	return specURL.ReplaceAllStringFunc(spec, func(tok string) string {
		// What ends a scalar in a YAML flow collection is not the URL's.
		end := len(tok)
		for end > 0 && strings.ContainsRune(",}]", rune(tok[end-1])) {
			end--
		}
		core, tail := tok[:end], tok[end:]
		if strings.HasPrefix(tail, "]") && strings.Count(core, "[") > strings.Count(core, "]") {
			core, tail = core+"]", tail[1:] // an IPv6 host's bracket
		}
		i := strings.Index(core, "://") + 3
		scheme, rest := core[:i], core[i:]
		if q := strings.IndexAny(rest, "?#"); q >= 0 {
			rest = rest[:q]
		}
		if at := strings.LastIndex(rest, "@"); at >= 0 {
			rest = rest[at+1:]
		}
		return scheme + rest + tail
	})
}

const timeFormat = time.RFC3339Nano

func formatTime(t time.Time) string { return t.UTC().Format(timeFormat) }

func parseTime(s sql.NullString) time.Time {
	if !s.Valid || s.String == "" {
		return time.Time{}
	}
	t, _ := time.Parse(timeFormat, s.String)
	return t
}

// CreateRun records a new run and returns its id. Created, Status and
// SpecHash are filled in.
func (s *Store) CreateRun(ctx context.Context, r Run) (int64, error) {
	if r.Target == "" {
		return 0, errors.New("create run: target name is empty")
	}
	info := r.TargetInfo
	if len(info) == 0 {
		info = json.RawMessage("{}")
	}
	if !json.Valid(info) {
		return 0, errors.New("create run: target info is not valid JSON")
	}
	created := r.Created
	if created.IsZero() {
		created = time.Now()
	}
	var id int64
	err := s.queryRow(ctx, `INSERT INTO runs
		(created, status, spec, spec_hash, seed, fwab_version, target_name, testbed, target_info, firmware_version, config_hash)
		VALUES (?, 'running', ?, ?, ?, ?, ?, ?, ?, ?, ?) RETURNING id`,
		formatTime(created), redactSpec(r.Spec), HashSpec(r.Spec), r.Seed, r.FwabVersion, r.Target, r.Testbed, string(info), r.Firmware, r.ConfigHash).Scan(&id)
	if err != nil {
		return 0, fmt.Errorf("create run: %w", err)
	}
	return id, nil
}

// FinishRun marks a run done, failed or cancelled.
func (s *Store) FinishRun(ctx context.Context, run int64, status RunStatus) error {
	switch status {
	case Done, Failed, Cancelled:
	default:
		return fmt.Errorf("finish run %d: status %q is not done, failed or cancelled", run, status)
	}
	res, err := s.exec(ctx, `UPDATE runs SET status = ?, finished = ? WHERE id = ?`, string(status), formatTime(time.Now()), run)
	if err != nil {
		return fmt.Errorf("finish run %d: %w", run, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("finish run %d: %w", run, ErrNotFound)
	}
	return nil
}

// Reopen marks a finished run as running again, for a resume.
func (s *Store) Reopen(ctx context.Context, run int64) error {
	res, err := s.exec(ctx, `UPDATE runs SET status = 'running', finished = NULL WHERE id = ?`, run)
	if err != nil {
		return fmt.Errorf("reopen run %d: %w", run, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("reopen run %d: %w", run, ErrNotFound)
	}
	return nil
}

const runColumns = `id, created, finished, status, spec, spec_hash, seed, fwab_version, target_name, testbed, target_info, firmware_version, config_hash`

func scanRun(sc interface{ Scan(...any) error }, extra ...any) (Run, error) {
	var r Run
	var created, finished sql.NullString
	var status, info string
	dest := append([]any{&r.ID, &created, &finished, &status, &r.Spec, &r.SpecHash, &r.Seed, &r.FwabVersion, &r.Target, &r.Testbed, &info, &r.Firmware, &r.ConfigHash}, extra...)
	if err := sc.Scan(dest...); err != nil {
		return r, err
	}
	r.Created, r.Finished = parseTime(created), parseTime(finished)
	r.Spec = redactSpec(r.Spec) // runs recorded before CreateRun redacted it
	r.Status = RunStatus(status)
	r.TargetInfo = json.RawMessage(info)
	return r, nil
}

// Run returns one run.
func (s *Store) Run(ctx context.Context, id int64) (Run, error) {
	r, err := scanRun(s.queryRow(ctx, `SELECT `+runColumns+` FROM runs WHERE id = ?`, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, fmt.Errorf("run %d: %w", id, ErrNotFound)
	}
	if err != nil {
		return r, fmt.Errorf("run %d: %w", id, err)
	}
	return r, nil
}

// Runs lists all runs, newest first, with their counts.
func (s *Store) Runs(ctx context.Context) ([]RunSummary, error) {
	rows, err := s.query(ctx, `SELECT `+runColumns+`,
		(SELECT count(*) FROM points p WHERE p.run_id = runs.id),
		(SELECT count(*) FROM samples x WHERE x.run_id = runs.id),
		(SELECT count(*) FROM samples x WHERE x.run_id = runs.id AND x.failed)
		FROM runs ORDER BY id DESC`)
	if err != nil {
		return nil, fmt.Errorf("list runs: %w", err)
	}
	defer rows.Close()
	var out []RunSummary
	for rows.Next() {
		var rs RunSummary
		r, err := scanRun(rows, &rs.Points, &rs.Samples, &rs.FailedSamples)
		if err != nil {
			return nil, fmt.Errorf("list runs: %w", err)
		}
		rs.Run = r
		out = append(out, rs)
	}
	return out, rows.Err()
}

// PointStatus is what became of a matrix point.
type PointStatus string

// Point statuses.
const (
	Pending PointStatus = "pending" // not reached yet
	Valid   PointStatus = "valid"   // applied and verified; its samples count
	Invalid PointStatus = "invalid" // refused before touching the firewall (the target cannot take it)
	Broken  PointStatus = "failed"  // apply or verify failed; Reason says how
)

// Point is one configuration of the matrix.
type Point struct {
	Index  int
	Knobs  map[string]string
	Status PointStatus
	Reason string
}

// AddPoints records the points of a run. Recording the same points again
// (a resume) is allowed; a point whose knobs differ from the recorded ones
// is refused, because the spec changed under the run.
func (s *Store) AddPoints(ctx context.Context, run int64, points []Point) error {
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("add points: %w", err)
	}
	defer tx.Rollback()
	for _, p := range points {
		knobs, err := json.Marshal(p.Knobs)
		if err != nil {
			return fmt.Errorf("add points: %w", err)
		}
		status := p.Status
		if status == "" {
			status = Pending
		}
		var have string
		err = tx.queryRow(ctx, `SELECT knobs FROM points WHERE run_id = ? AND idx = ?`, run, p.Index).Scan(&have)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			if _, err := tx.exec(ctx, `INSERT INTO points (run_id, idx, knobs, status, reason) VALUES (?, ?, ?, ?, ?)`,
				run, p.Index, string(knobs), string(status), p.Reason); err != nil {
				return fmt.Errorf("add point %d to run %d: %w", p.Index, run, err)
			}
		case err != nil:
			return fmt.Errorf("add points: %w", err)
		case have != string(knobs):
			return fmt.Errorf("point %d of run %d is recorded as %s, not %s: the spec changed since the run started; start a new run", p.Index, run, have, knobs)
		}
	}
	return tx.Commit()
}

// SetPointStatus records what became of a point.
func (s *Store) SetPointStatus(ctx context.Context, run int64, index int, status PointStatus, reason string) error {
	res, err := s.exec(ctx, `UPDATE points SET status = ?, reason = ? WHERE run_id = ? AND idx = ?`, string(status), reason, run, index)
	if err != nil {
		return fmt.Errorf("point %d of run %d: %w", index, run, err)
	}
	if n, _ := res.RowsAffected(); n == 0 {
		return fmt.Errorf("point %d of run %d: %w", index, run, ErrNotFound)
	}
	return nil
}

// Points returns a run's points in order.
func (s *Store) Points(ctx context.Context, run int64) ([]Point, error) {
	rows, err := s.query(ctx, `SELECT idx, knobs, status, reason FROM points WHERE run_id = ? ORDER BY idx`, run)
	if err != nil {
		return nil, fmt.Errorf("points of run %d: %w", run, err)
	}
	defer rows.Close()
	var out []Point
	for rows.Next() {
		var p Point
		var knobs, status string
		if err := rows.Scan(&p.Index, &knobs, &status, &p.Reason); err != nil {
			return nil, err
		}
		if err := json.Unmarshal([]byte(knobs), &p.Knobs); err != nil {
			return nil, fmt.Errorf("point %d of run %d: knobs: %w", p.Index, run, err)
		}
		p.Status = PointStatus(status)
		out = append(out, p)
	}
	return out, rows.Err()
}

// Key names one sample of a run: the unit a resume skips.
type Key struct {
	Run   int64
	Point int
	Probe string // a probe name from the spec, such as "tcp-up" or "udp-64"
	// Round is the 0-based round the sample was measured in, or
	// DriftRound.
	Round  int
	Repeat int
}

// DriftRound is the Round of a run's re-measurement of its baseline point
// after every regular round (the drift check): kept apart from the
// point's regular rounds so that no statistic counts it as one of them
// and a report can say how far the run drifted between its start and its
// end.
const DriftRound = -1

// Drift reports whether the key is the run's end-of-run re-measurement of
// its baseline.
func (k Key) Drift() bool { return k.Round == DriftRound }

func (k Key) String() string {
	return fmt.Sprintf("run %d point %d probe %s round %d repeat %d", k.Run, k.Point, k.Probe, k.Round, k.Repeat)
}

// Sample is one recorded probe result. Unknown figures are NaN.
type Sample struct {
	Key
	Direction string
	Started   time.Time
	Elapsed   time.Duration

	BitsPerSecond    float64
	SentBPS          float64
	BidirBPS         float64
	Retransmits      int64 // -1 when unknown
	ClientCPU        float64
	ServerCPU        float64
	RTTms            float64
	JitterMS         float64
	LostPercent      float64
	PingAvgMS        float64
	PingLossPercent  float64
	PowerWatts       float64
	EndpointCPUBound bool

	Failed   bool
	Reason   string
	Warnings []string
	Raw      json.RawMessage // the probe's own reports, as JSON

	DUT []probe.DUTMetrics
}

// Unknown is the value of a figure that was not measured.
var Unknown = math.NaN()

// FromProbe turns a probe's sample into a row.
func FromProbe(k Key, ps probe.Sample) Sample {
	s := Sample{
		Key: k, Direction: string(ps.Direction), Started: ps.Started, Elapsed: ps.Elapsed,
		BitsPerSecond: Unknown, SentBPS: Unknown, BidirBPS: Unknown, Retransmits: -1,
		ClientCPU: Unknown, ServerCPU: Unknown, RTTms: Unknown, JitterMS: Unknown, LostPercent: Unknown,
		PingAvgMS: Unknown, PingLossPercent: Unknown, PowerWatts: Unknown,
		EndpointCPUBound: ps.EndpointCPUBound, Failed: ps.Failed, Reason: ps.Reason,
		Warnings: ps.Warnings, DUT: ps.DUT,
	}
	if r := ps.Result; r != nil {
		s.BitsPerSecond = r.Flow.ReceivedBPS
		s.SentBPS = r.Flow.SentBPS
		s.Retransmits = r.Flow.Retransmits
		if r.BidirFlow != nil {
			s.BidirBPS = r.BidirFlow.ReceivedBPS
		}
		if r.RTT != nil {
			s.RTTms = float64(r.RTT.Mean) / float64(time.Millisecond)
		}
		if r.UDP != nil {
			s.JitterMS = r.UDP.JitterMS
			s.LostPercent = r.UDP.LostPercent
		}
	}
	if ps.ClientCPU >= 0 {
		s.ClientCPU = ps.ClientCPU
	}
	if ps.ServerCPU >= 0 {
		s.ServerCPU = ps.ServerCPU
	}
	if ps.Ping != nil {
		s.PingAvgMS = float64(ps.Ping.Avg) / float64(time.Millisecond)
		s.PingLossPercent = ps.Ping.LossPercent
	}
	if len(ps.Power) > 0 {
		var sum float64
		for _, p := range ps.Power {
			sum += p.Watts
		}
		s.PowerWatts = sum / float64(len(ps.Power))
	}
	raw := map[string]any{"port": ps.Port, "parallel": ps.Parallel, "udp": ps.UDP, "length": ps.Length}
	if json.Valid(ps.ClientJSON) {
		raw["client"] = json.RawMessage(ps.ClientJSON)
	} else if len(ps.ClientJSON) > 0 {
		raw["client_text"] = string(ps.ClientJSON)
	}
	if json.Valid(ps.ServerJSON) {
		raw["server"] = json.RawMessage(ps.ServerJSON)
	} else if len(ps.ServerJSON) > 0 {
		raw["server_text"] = string(ps.ServerJSON)
	}
	if ps.Ping != nil {
		raw["ping"] = ps.Ping
	}
	if len(ps.Power) > 0 {
		raw["power"] = ps.Power
	}
	if ps.NDR != nil {
		raw["ndr"] = ps.NDR // the rate search's result and every trial
	}
	if ps.Connect != nil {
		raw["connect"] = ps.Connect // a connection-rate probe's report
	}
	if ps.HTTP != nil {
		raw["http"] = ps.HTTP // an http probe's report
	}
	if ps.Canary != nil {
		raw["canary"] = ps.Canary // the IPS canary run beside the probe
	}
	if len(ps.Links) > 0 {
		raw["links"] = ps.Links // each link's figures, where the sample sums several run at once
		raw["start_skew_ms"] = float64(ps.StartSkew) / float64(time.Millisecond)
	}
	s.Raw, _ = json.Marshal(raw)
	return s
}

// nullable stores NaN and infinities as NULL.
func nullable(v float64) any {
	if math.IsNaN(v) || math.IsInf(v, 0) {
		return nil
	}
	return v
}

func fromNull(v sql.NullFloat64) float64 {
	if !v.Valid {
		return Unknown
	}
	return v.Float64
}

// RecordSample writes a sample and its DUT metrics in one transaction. A
// sample already recorded under the same key is refused with ErrDuplicate.
func (s *Store) RecordSample(ctx context.Context, x Sample) error {
	if x.Probe == "" {
		return fmt.Errorf("record sample %s: probe name is empty", x.Key)
	}
	if x.Round < DriftRound {
		return fmt.Errorf("record sample %s: round %d: rounds count from 0 (%d is the drift check)", x.Key, x.Round, DriftRound)
	}
	warnings := x.Warnings
	if warnings == nil {
		warnings = []string{}
	}
	w, err := json.Marshal(warnings)
	if err != nil {
		return err
	}
	raw := x.Raw
	if len(raw) == 0 {
		raw = json.RawMessage("{}")
	}
	if !json.Valid(raw) {
		return fmt.Errorf("record sample %s: raw record is not valid JSON", x.Key)
	}
	var retr any
	if x.Retransmits >= 0 {
		retr = x.Retransmits
	}
	started := x.Started
	if started.IsZero() {
		started = time.Now()
	}
	sampleArgs := []any{x.Run, x.Point, x.Probe, x.Round, x.Repeat, x.Direction, formatTime(started), x.Elapsed.Milliseconds(),
		nullable(x.BitsPerSecond), nullable(x.SentBPS), nullable(x.BidirBPS), retr, nullable(x.ClientCPU), nullable(x.ServerCPU),
		nullable(x.RTTms), nullable(x.JitterMS), nullable(x.LostPercent), nullable(x.PingAvgMS), nullable(x.PingLossPercent), nullable(x.PowerWatts),
		x.EndpointCPUBound, x.Failed, x.Reason, string(w), string(raw)}
	if s.dialect.numbered {
		return s.recordSampleOnce(ctx, x, sampleArgs)
	}
	tx, err := s.begin(ctx)
	if err != nil {
		return fmt.Errorf("record sample %s: %w", x.Key, s.unreachable(err))
	}
	defer tx.Rollback()
	var id int64
	err = tx.queryRow(ctx, insertSample+` RETURNING id`, sampleArgs...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("record sample %s: %w", x.Key, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("record sample %s: %w", x.Key, s.unreachable(err))
	}
	// The DUT's metrics in as few statements as can be.
	const perInsert = 500 // DUT metric rows per statement
	for dut := x.DUT; len(dut) > 0; {
		chunk := dut[:min(len(dut), perInsert)]
		dut = dut[len(chunk):]
		args := make([]any, 0, 6*len(chunk))
		for _, m := range chunk {
			args = append(append(args, id), dutArgs(m)...)
		}
		values := strings.Repeat(", (?, ?, ?, ?, ?, ?)", len(chunk))[2:]
		if _, err := tx.exec(ctx, `INSERT INTO dut_metrics (sample_id, time, cpu, temp, mem, mbufs) VALUES `+values, args...); err != nil {
			return fmt.Errorf("record sample %s: DUT metrics: %w", x.Key, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("record sample %s: %w", x.Key, s.unreachable(err))
	}
	return nil
}

const insertSample = `INSERT INTO samples
		(run_id, point_idx, probe, round, repeat, direction, started, elapsed_ms,
		 bits_per_second, sent_bps, bidir_bps, retransmits, client_cpu, server_cpu,
		 rtt_ms, jitter_ms, lost_percent, ping_avg_ms, ping_loss_percent, power_watts,
		 endpoint_cpu_bound, failed, reason, warnings, raw)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
		ON CONFLICT (run_id, point_idx, probe, round, repeat) DO NOTHING`

// dutArgs are a DUT metrics row's values but its sample id.
func dutArgs(m probe.DUTMetrics) []any {
	var mbufs any
	if m.MbufsInUse > 0 {
		mbufs = m.MbufsInUse
	}
	var temp any
	if m.TempCelsius != 0 {
		temp = m.TempCelsius
	}
	return []any{formatTime(m.Time), nullable(m.CPUPercent), temp, nullable(m.MemUsedPct), mbufs}
}

// recordSampleOnce is RecordSample on PostgreSQL: the sample and its DUT
// metrics in one statement, which is one transaction and one round trip
// to the server instead of four. The metrics go as one array a column,
// so that the statement is the same text for any number of them: prepared
// once per connection, and its parameters are 30 rather than 25 + 5 a row.
func (s *Store) recordSampleOnce(ctx context.Context, x Sample, sampleArgs []any) error {
	times := make([]string, len(x.DUT))
	cpu, temp, mem := make([]*float64, len(x.DUT)), make([]*float64, len(x.DUT)), make([]*float64, len(x.DUT))
	mbufs := make([]*int64, len(x.DUT))
	for i, m := range x.DUT {
		v := dutArgs(m)
		times[i] = v[0].(string)
		cpu[i], temp[i], mem[i] = floatOrNil(v[1]), floatOrNil(v[2]), floatOrNil(v[3])
		if n, ok := v[4].(int64); ok {
			mbufs[i] = &n
		}
	}
	args := append(sampleArgs, times, cpu, temp, mem, mbufs)
	var id int64
	err := s.queryRow(ctx, `WITH s AS (`+insertSample+` RETURNING id),
		d AS (INSERT INTO dut_metrics (sample_id, time, cpu, temp, mem, mbufs)
			SELECT s.id, v.time, v.cpu, v.temp, v.mem, v.mbufs
			FROM s, unnest(?::text[], ?::float8[], ?::float8[], ?::float8[], ?::bigint[]) WITH ORDINALITY AS v (time, cpu, temp, mem, mbufs, n)
			ORDER BY v.n)
		SELECT id FROM s`, args...).Scan(&id)
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("record sample %s: %w", x.Key, ErrDuplicate)
	}
	if err != nil {
		return fmt.Errorf("record sample %s: %w", x.Key, s.unreachable(err))
	}
	return nil
}

// floatOrNil is a dutArgs value as a nullable float8 array element.
func floatOrNil(v any) *float64 {
	if f, ok := v.(float64); ok {
		return &f
	}
	return nil
}

// Completed returns the keys of every sample recorded for a run: what a
// resume must not repeat.
func (s *Store) Completed(ctx context.Context, run int64) (map[Key]bool, error) {
	rows, err := s.query(ctx, `SELECT point_idx, probe, round, repeat FROM samples WHERE run_id = ?`, run)
	if err != nil {
		return nil, fmt.Errorf("samples of run %d: %w", run, err)
	}
	defer rows.Close()
	done := map[Key]bool{}
	for rows.Next() {
		k := Key{Run: run}
		if err := rows.Scan(&k.Point, &k.Probe, &k.Round, &k.Repeat); err != nil {
			return nil, err
		}
		done[k] = true
	}
	return done, rows.Err()
}

// Samples returns a run's samples with their DUT metrics, in the order they
// were recorded.
func (s *Store) Samples(ctx context.Context, run int64) ([]Sample, error) {
	rows, err := s.query(ctx, `SELECT id, point_idx, probe, round, repeat, direction, started, elapsed_ms,
		bits_per_second, sent_bps, bidir_bps, retransmits, client_cpu, server_cpu,
		rtt_ms, jitter_ms, lost_percent, ping_avg_ms, ping_loss_percent, power_watts,
		endpoint_cpu_bound, failed, reason, warnings, raw
		FROM samples WHERE run_id = ? ORDER BY id`, run)
	if err != nil {
		return nil, fmt.Errorf("samples of run %d: %w", run, err)
	}
	defer rows.Close()
	var out []Sample
	byID := map[int64]int{}
	for rows.Next() {
		x := Sample{Key: Key{Run: run}}
		var id, elapsed int64
		var started sql.NullString
		var bps, sent, bidir, ccpu, scpu, rtt, jit, lost, ping, pingLoss, power sql.NullFloat64
		var retr sql.NullInt64
		var warnings, raw string
		if err := rows.Scan(&id, &x.Point, &x.Probe, &x.Round, &x.Repeat, &x.Direction, &started, &elapsed,
			&bps, &sent, &bidir, &retr, &ccpu, &scpu, &rtt, &jit, &lost, &ping, &pingLoss, &power,
			&x.EndpointCPUBound, &x.Failed, &x.Reason, &warnings, &raw); err != nil {
			return nil, fmt.Errorf("samples of run %d: %w", run, err)
		}
		x.Started, x.Elapsed = parseTime(started), time.Duration(elapsed)*time.Millisecond
		x.BitsPerSecond, x.SentBPS, x.BidirBPS = fromNull(bps), fromNull(sent), fromNull(bidir)
		x.Retransmits = -1
		if retr.Valid {
			x.Retransmits = retr.Int64
		}
		x.ClientCPU, x.ServerCPU, x.RTTms = fromNull(ccpu), fromNull(scpu), fromNull(rtt)
		x.JitterMS, x.LostPercent = fromNull(jit), fromNull(lost)
		x.PingAvgMS, x.PingLossPercent, x.PowerWatts = fromNull(ping), fromNull(pingLoss), fromNull(power)
		if err := json.Unmarshal([]byte(warnings), &x.Warnings); err != nil {
			return nil, fmt.Errorf("sample %s: warnings: %w", x.Key, err)
		}
		x.Raw = json.RawMessage(raw)
		byID[id] = len(out)
		out = append(out, x)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	rows.Close()

	mrows, err := s.query(ctx, `SELECT m.sample_id, m.time, m.cpu, m.temp, m.mem, m.mbufs
		FROM dut_metrics m JOIN samples x ON x.id = m.sample_id WHERE x.run_id = ? ORDER BY m.`+s.dialect.dutOrder, run)
	if err != nil {
		return nil, fmt.Errorf("DUT metrics of run %d: %w", run, err)
	}
	defer mrows.Close()
	for mrows.Next() {
		var id int64
		var t sql.NullString
		var cpu, temp, mem sql.NullFloat64
		var mbufs sql.NullInt64
		if err := mrows.Scan(&id, &t, &cpu, &temp, &mem, &mbufs); err != nil {
			return nil, err
		}
		i, ok := byID[id]
		if !ok {
			continue // written after the samples were read
		}
		out[i].DUT = append(out[i].DUT, probe.DUTMetrics{Time: parseTime(t), CPUPercent: cpu.Float64, TempCelsius: temp.Float64, MemUsedPct: mem.Float64, MbufsInUse: mbufs.Int64})
	}
	return out, mrows.Err()
}

// Event is something that happened during a run: a point applied, a
// rollback, a warning, an error.
type Event struct {
	Time    time.Time
	Kind    string // "apply", "verify", "rollback", "warning", "error", ...
	Point   int    // -1 when not about a point
	Message string
}

// EventBlackout is the kind of the event a sweep records after each apply
// whose blackout it measured (probe.Blackout); the message is a
// BlackoutEvent in JSON.
const EventBlackout = "blackout"

// BlackoutEvent is an EventBlackout's message: the apply's service
// actions and what the blackout stream saw.
type BlackoutEvent struct {
	Actions []string `json:"actions"`
	probe.BlackoutResult
	// Failed is true where the step failed (its apply, or traffic never
	// passed again): the blackout then includes the retry and whatever
	// the failure did.
	Failed bool `json:"failed,omitempty"`
}

// RecordEvent appends an event to a run's journal.
func (s *Store) RecordEvent(ctx context.Context, run int64, e Event) error {
	if e.Kind == "" {
		return errors.New("record event: kind is empty")
	}
	t := e.Time
	if t.IsZero() {
		t = time.Now()
	}
	var point any
	if e.Point >= 0 {
		point = e.Point
	}
	if _, err := s.exec(ctx, `INSERT INTO events (run_id, time, kind, point_idx, message) VALUES (?, ?, ?, ?, ?)`,
		run, formatTime(t), e.Kind, point, e.Message); err != nil {
		return fmt.Errorf("record event for run %d: %w", run, err)
	}
	return nil
}

// LatestEvents returns the events of one kind from the newest run on
// target that recorded any, in order; none when no run did.
func (s *Store) LatestEvents(ctx context.Context, target, kind string) ([]Event, error) {
	var run sql.NullInt64
	if err := s.queryRow(ctx, `SELECT max(e.run_id) FROM events e JOIN runs r ON r.id = e.run_id WHERE r.target_name = ? AND e.kind = ?`, target, kind).Scan(&run); err != nil {
		return nil, fmt.Errorf("events of target %s: %w", target, err)
	}
	if !run.Valid {
		return nil, nil
	}
	all, err := s.Events(ctx, run.Int64)
	if err != nil {
		return nil, err
	}
	var out []Event
	for _, e := range all {
		if e.Kind == kind {
			out = append(out, e)
		}
	}
	return out, nil
}

// Events returns a run's events in order.
func (s *Store) Events(ctx context.Context, run int64) ([]Event, error) {
	rows, err := s.query(ctx, `SELECT time, kind, point_idx, message FROM events WHERE run_id = ? ORDER BY id`, run)
	if err != nil {
		return nil, fmt.Errorf("events of run %d: %w", run, err)
	}
	defer rows.Close()
	var out []Event
	for rows.Next() {
		var e Event
		var t sql.NullString
		var point sql.NullInt64
		if err := rows.Scan(&t, &e.Kind, &point, &e.Message); err != nil {
			return nil, err
		}
		e.Time = parseTime(t)
		e.Point = -1
		if point.Valid {
			e.Point = int(point.Int64)
		}
		out = append(out, e)
	}
	return out, rows.Err()
}

// HistoryRun is one complete run as a history reads it: when and where it
// ran, its points' knobs, and the throughput of each successful sample.
type HistoryRun struct {
	ID       int64
	Created  time.Time
	Testbed  string
	Target   string
	Firmware string
	Knobs    map[int]string // point index to its knobs, JSON
	Measured []Measured
}

// Measured is the headline figure of a run's successful samples of one
// probe at one point, in no particular order: their throughput, for a
// connect probe (which measures none) their connection rate, for an http
// probe its transactions a second.
type Measured struct {
	Point         int
	Probe         string
	BitsPerSecond []float64
	// ConnectsPerSecond are a connect probe's rates, from each sample's
	// report; BitsPerSecond is then empty.
	ConnectsPerSecond []float64
	// TransactionsPerSecond are an http probe's rates, from each
	// sample's report; BitsPerSecond is then empty.
	TransactionsPerSecond []float64
}

// RateProbes names the probes whose headline is a rate in their reports,
// not throughput: a History follows that rate for them.
type RateProbes struct {
	Connect []string // kind: connect, which measures no throughput
	HTTP    []string // kind: http, whose headline is transactions a second
}

// History returns every complete run made from the spec with hash
// specHash that keep accepts (nil: all), oldest first, with the throughput
// of each successful sample, or for the probes rates names their rate.
// It reads only what a trend needs, so that years of nightly runs load at
// once.
func (s *Store) History(ctx context.Context, specHash string, keep func(HistoryRun) bool, rates RateProbes) ([]HistoryRun, error) {
	const done = ` FROM runs r WHERE r.spec_hash = ? AND r.status = 'done'`
	rows, err := s.query(ctx, `SELECT r.id, r.created, r.testbed, r.target_name, r.firmware_version`+done+` ORDER BY r.id`, specHash)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	var runs []HistoryRun
	for rows.Next() {
		var h HistoryRun
		var c sql.NullString
		if err := rows.Scan(&h.ID, &c, &h.Testbed, &h.Target, &h.Firmware); err != nil {
			rows.Close()
			return nil, fmt.Errorf("history: %w", err)
		}
		h.Created, h.Knobs = parseTime(c), map[int]string{}
		if keep == nil || keep(h) {
			runs = append(runs, h)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil || len(runs) == 0 {
		return runs, err
	}
	byID := make(map[int64]*HistoryRun, len(runs))
	for i := range runs {
		byID[runs[i].ID] = &runs[i]
	}
	rows, err = s.query(ctx, `SELECT p.run_id, p.idx, p.knobs FROM points p WHERE p.run_id IN (SELECT r.id`+done+`)`, specHash)
	if err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	for rows.Next() {
		var run int64
		var idx int
		var knobs string
		if err := rows.Scan(&run, &idx, &knobs); err != nil {
			rows.Close()
			return nil, fmt.Errorf("history: %w", err)
		}
		if h := byID[run]; h != nil {
			h.Knobs[idx] = knobs
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, fmt.Errorf("history: %w", err)
	}
	// The figures of the kept runs only (another testbed's runs of the
	// spec are not read), in parts of consecutive runs read at once, one
	// a core: the database and the parsing of its answer both run on
	// every core.
	part := min(historyPart, (len(runs)+runtime.GOMAXPROCS(0)-1)/runtime.GOMAXPROCS(0))
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(runtime.GOMAXPROCS(0))
	for first := 0; first < len(runs); first += part {
		chunk := runs[first:min(first+part, len(runs))]
		g.Go(func() error { return s.historyFigures(gctx, chunk, rates) })
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return runs, nil
}

// historyPart is the most runs one query of History's figures names.
const historyPart = 500

// historyFigures reads the throughput of every successful sample of runs
// (consecutive runs of a History, oldest first) into their Measured, or
// for the probes rates names their rate.
func (s *Store) historyFigures(ctx context.Context, runs []HistoryRun, rates RateProbes) error {
	args := make([]any, len(runs))
	for i, r := range runs {
		args[i] = r.ID
	}
	// One row per run, point and probe, its figures in one value: a
	// sixth of the rows a row per sample makes, which is most of the
	// time. The covering index samples_history (schema version 4)
	// answers it alone.
	rows, err := s.query(ctx, `SELECT x.run_id, x.point_idx, x.probe, `+s.dialect.bpsList+` FROM samples x
		WHERE x.run_id IN (?`+strings.Repeat(", ?", len(runs)-1)+`) AND NOT x.failed AND x.bits_per_second IS NOT NULL AND x.round >= 0
		GROUP BY x.run_id, x.point_idx, x.probe`, args...)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	probes := map[string]string{} // one copy of each probe name
	var slab []float64            // the figures' backing, allocated in blocks
	next := 0                     // the run of runs the rows are at
	for rows.Next() {
		var run int64
		var point int
		var probe, list sql.RawBytes
		if err := rows.Scan(&run, &point, &probe, &list); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		h := runAt(runs, run, &next)
		if h == nil {
			continue
		}
		name, ok := probes[string(probe)]
		if !ok {
			name = string(probe)
			probes[name] = name
		}
		if slices.Contains(rates.HTTP, name) {
			continue // followed in transactions a second (historyRates)
		}
		var n int
		if s.dialect.bpsBinary {
			if len(list)%8 != 0 {
				return fmt.Errorf("history: run %d point %d probe %s: %d bytes of figures, not a multiple of 8", run, point, name, len(list))
			}
			n = len(list) / 8
		} else {
			n = bytes.Count(list, []byte(",")) + 1
		}
		if cap(slab)-len(slab) < n {
			slab = make([]float64, 0, max(n, 4096))
		}
		m := Measured{Point: point, Probe: name, BitsPerSecond: slab[len(slab) : len(slab) : len(slab)+n]}
		slab = slab[:len(slab)+n]
		if s.dialect.bpsBinary {
			for i := 0; i < len(list); i += 8 {
				m.BitsPerSecond = append(m.BitsPerSecond, math.Float64frombits(binary.BigEndian.Uint64(list[i:])))
			}
		} else {
			for v := range bytes.SplitSeq(list, []byte(",")) {
				bps, err := strconv.ParseFloat(string(v), 64)
				if err != nil {
					return fmt.Errorf("history: run %d point %d probe %s: %w", run, point, name, err)
				}
				m.BitsPerSecond = append(m.BitsPerSecond, bps)
			}
		}
		h.Measured = append(h.Measured, m)
	}
	if err := rows.Err(); err != nil {
		return fmt.Errorf("history: %w", err)
	}
	rows.Close()
	if len(rates.Connect)+len(rates.HTTP) == 0 {
		return nil
	}
	return s.historyRates(ctx, runs, args, rates)
}

// runAt is the run of runs (sorted by ID) with that id, looked for from
// *next, where the last one was (rows come in any order, mostly a run's
// together); nil when runs has none.
func runAt(runs []HistoryRun, id int64, next *int) *HistoryRun {
	if *next >= len(runs) || runs[*next].ID != id {
		i, found := slices.BinarySearchFunc(runs, id, func(h HistoryRun, id int64) int { return cmp.Compare(h.ID, id) })
		if !found {
			return nil
		}
		*next = i
	}
	return &runs[*next]
}

// historyRates reads the rates of the successful samples of the probes
// rates names from their reports: a connect probe's connection rate, an
// http probe's transactions a second. The samples' unique index (run,
// point, probe, …) finds them; only theirs are read whole.
func (s *Store) historyRates(ctx context.Context, runs []HistoryRun, runIDs []any, rates RateProbes) error {
	args := slices.Clone(runIDs)
	names := slices.Concat(rates.Connect, rates.HTTP)
	for _, p := range names {
		args = append(args, p)
	}
	rows, err := s.query(ctx, `SELECT x.run_id, x.point_idx, x.probe, x.raw FROM samples x
		WHERE x.run_id IN (?`+strings.Repeat(", ?", len(runIDs)-1)+`) AND x.probe IN (?`+strings.Repeat(", ?", len(names)-1)+`)
		AND NOT x.failed AND x.round >= 0
		ORDER BY x.run_id, x.point_idx, x.probe, x.id`, args...)
	if err != nil {
		return fmt.Errorf("history: %w", err)
	}
	defer rows.Close()
	next := 0
	for rows.Next() {
		var run int64
		var point int
		var name string
		var raw []byte
		if err := rows.Scan(&run, &point, &name, &raw); err != nil {
			return fmt.Errorf("history: %w", err)
		}
		var r struct {
			Connect *probe.ConnectResult `json:"connect"`
			HTTP    *probe.HTTPResult    `json:"http"`
		}
		if json.Unmarshal(raw, &r) != nil {
			continue // no rate to follow (a report does not parse: the report command skips it too)
		}
		var rate float64
		isHTTP := false
		switch {
		case r.Connect != nil && slices.Contains(rates.Connect, name):
			rate = r.Connect.PerSecond
		case r.HTTP != nil && slices.Contains(rates.HTTP, name):
			rate, isHTTP = r.HTTP.PerSecond, true
		default:
			continue
		}
		h := runAt(runs, run, &next)
		if h == nil {
			continue
		}
		if n := len(h.Measured); n == 0 || h.Measured[n-1].Point != point || h.Measured[n-1].Probe != name || len(h.Measured[n-1].BitsPerSecond) > 0 {
			h.Measured = append(h.Measured, Measured{Point: point, Probe: name})
		}
		m := &h.Measured[len(h.Measured)-1]
		if isHTTP {
			m.TransactionsPerSecond = append(m.TransactionsPerSecond, rate)
		} else {
			m.ConnectsPerSecond = append(m.ConnectsPerSecond, rate)
		}
	}
	return rows.Err()
}
