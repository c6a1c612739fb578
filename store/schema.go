package store

import (
	"strconv"
	"strings"
)

// migrations take the database from version i to i+1. Append only: a
// released migration is never edited.
//
// One list serves both dialects: the few places where SQLite and
// PostgreSQL spell a type differently are written as {{tokens}}, which
// dialect.schema expands (for SQLite, to exactly the text the first schema
// was released with). Everything else is SQL both accept.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE runs (
	id               {{id}},
	created          TEXT    NOT NULL,             -- RFC 3339, UTC
	finished         TEXT,
	status           TEXT    NOT NULL DEFAULT 'running'
	                 CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
	spec             TEXT    NOT NULL,             -- the matrix spec as given
	spec_hash        TEXT    NOT NULL,             -- sha256 of spec, hex
	seed             {{bigint}} NOT NULL,
	fwab_version     TEXT    NOT NULL,
	target_name      TEXT    NOT NULL,
	target_info      TEXT    NOT NULL DEFAULT '{}', -- JSON, no secrets
	firmware_version TEXT    NOT NULL DEFAULT '',
	config_hash      TEXT    NOT NULL DEFAULT ''    -- sha256 of the original config.xml
);

CREATE TABLE points (
	run_id {{bigint}} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	idx    INTEGER NOT NULL,
	knobs  TEXT    NOT NULL,                       -- JSON object knob -> value
	status TEXT    NOT NULL DEFAULT 'pending'
	       CHECK (status IN ('pending', 'valid', 'invalid', 'failed')),
	reason TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, idx)
);

CREATE TABLE samples (
	id                 {{id}},
	run_id             {{bigint}} NOT NULL,
	point_idx          INTEGER NOT NULL,
	probe              TEXT    NOT NULL,
	round              INTEGER NOT NULL,
	repeat             INTEGER NOT NULL,
	direction          TEXT    NOT NULL DEFAULT '',
	started            TEXT    NOT NULL,
	elapsed_ms         INTEGER NOT NULL DEFAULT 0,
	bits_per_second    {{real}},                       -- received, main flow
	sent_bps           {{real}},
	bidir_bps          {{real}},                       -- received, opposite flow of a bidir probe
	retransmits        {{bigint}},
	client_cpu         {{real}},                       -- percent of one core
	server_cpu         {{real}},
	rtt_ms             {{real}},                       -- TCP sender mean RTT
	jitter_ms          {{real}},
	lost_percent       {{real}},
	ping_avg_ms        {{real}},                       -- latency under load
	ping_loss_percent  {{real}},
	power_watts        {{real}},                       -- mean over the probe
	endpoint_cpu_bound {{bool}} NOT NULL DEFAULT {{false}},
	failed             {{bool}} NOT NULL DEFAULT {{false}},
	reason             TEXT    NOT NULL DEFAULT '',
	warnings           TEXT    NOT NULL DEFAULT '[]', -- JSON array
	raw                TEXT    NOT NULL DEFAULT '{}', -- JSON: the probe's reports
	UNIQUE (run_id, point_idx, probe, round, repeat),
	FOREIGN KEY (run_id, point_idx) REFERENCES points (run_id, idx) ON DELETE CASCADE
);

CREATE TABLE dut_metrics ({{dut_id}}
	sample_id   {{bigint}} NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
	time        TEXT    NOT NULL,
	cpu         {{real}},
	temp        {{real}},
	mem         {{real}},
	mbufs       {{bigint}}
);
CREATE INDEX dut_metrics_sample ON dut_metrics (sample_id);

CREATE TABLE events (
	id        {{id}},
	run_id    {{bigint}} NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	time      TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	point_idx INTEGER,
	message   TEXT    NOT NULL
);
CREATE INDEX events_run ON events (run_id);
`,
	// 2: testbeds: the target's name and a fingerprint of its hardware
	// ("" for runs an older fwab recorded).
	`
ALTER TABLE runs ADD COLUMN testbed TEXT NOT NULL DEFAULT '';
CREATE INDEX runs_testbed ON runs (testbed, spec_hash);
CREATE INDEX samples_run ON samples (run_id);

-- One row per measured sample of every complete run, in the shape
-- time-series tools read (Apache Otava, Grafana): the run's time and
-- testbed, the point (its knobs, JSON) and probe, the figures.
CREATE VIEW fwab_samples_by_run AS
SELECT r.id AS run_id, r.created AS run_created, r.testbed, r.target_name,
       r.firmware_version, r.spec_hash, p.knobs AS point, x.probe,
       x.round, x.repeat, x.bits_per_second / 1000000.0 AS mbps, x.retransmits
FROM runs r
JOIN samples x ON x.run_id = r.id
JOIN points p ON p.run_id = x.run_id AND p.idx = x.point_idx
WHERE r.status = 'done' AND NOT x.failed;
`,
	// 3: the drift check. A run may re-measure its baseline point at its
	// end, as round -1 (DriftRound); the samples view keeps to the regular
	// rounds, and fwab_drift_by_run holds the re-measurements.
	`
DROP VIEW fwab_samples_by_run;
CREATE VIEW fwab_samples_by_run AS
SELECT r.id AS run_id, r.created AS run_created, r.testbed, r.target_name,
       r.firmware_version, r.spec_hash, p.knobs AS point, x.probe,
       x.round, x.repeat, x.bits_per_second / 1000000.0 AS mbps, x.retransmits
FROM runs r
JOIN samples x ON x.run_id = r.id
JOIN points p ON p.run_id = x.run_id AND p.idx = x.point_idx
WHERE r.status = 'done' AND NOT x.failed AND x.round >= 0;

CREATE VIEW fwab_drift_by_run AS
SELECT r.id AS run_id, r.created AS run_created, r.testbed, r.target_name,
       r.firmware_version, r.spec_hash, p.knobs AS point, x.probe,
       x.started, x.bits_per_second / 1000000.0 AS mbps
FROM runs r
JOIN samples x ON x.run_id = r.id
JOIN points p ON p.run_id = x.run_id AND p.idx = x.point_idx
WHERE NOT x.failed AND x.round = -1;
`,
	// 4: an index that holds everything a history reads of the samples
	// (fwab trend), so that the database answers from it without the
	// samples' rows.
	`
CREATE INDEX samples_history ON samples (run_id, point_idx, probe, bits_per_second)
	WHERE NOT failed AND bits_per_second IS NOT NULL AND round >= 0;
`,
}

// dialect is what differs between the two databases fwab writes.
type dialect struct {
	name   string
	tokens *strings.Replacer // schema {{tokens}} to this dialect's SQL
	// dutOrder is the column giving dut_metrics rows in insertion order.
	dutOrder string
	// numbered is true where placeholders are $1, $2, ... rather than ?.
	numbered bool
	// bpsList aggregates a group's bits_per_second into one value, each
	// figure exact: a text of them comma-separated, or where bpsBinary,
	// their 8-byte IEEE 754 form big-endian one after another (no
	// conversion to text and back).
	bpsList   string
	bpsBinary bool
}

var (
	sqliteDialect = dialect{
		name: "sqlite",
		tokens: strings.NewReplacer(
			"{{id}}", "INTEGER PRIMARY KEY", "{{bigint}}", "INTEGER", "{{real}}", "REAL",
			"{{bool}}", "INTEGER", "{{false}}", "0", "{{dut_id}}", ""),
		dutOrder: "rowid",
		bpsList:  "group_concat(x.bits_per_second, ',')",
	}
	postgresDialect = dialect{
		name: "postgres",
		tokens: strings.NewReplacer(
			"{{id}}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY", "{{bigint}}", "BIGINT",
			"{{real}}", "DOUBLE PRECISION", "{{bool}}", "BOOLEAN", "{{false}}", "FALSE",
			"{{dut_id}}", "\n\tid          BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY,"),
		dutOrder:  "id",
		numbered:  true,
		bpsList:   "string_agg(float8send(x.bits_per_second), '')",
		bpsBinary: true,
	}
)

// schema is migration text in this dialect.
func (d dialect) schema(migration string) string { return d.tokens.Replace(migration) }

// rebind turns the ? placeholders fwab's queries are written with into this
// dialect's. fwab's queries hold no ? inside string literals.
func (d dialect) rebind(query string) string {
	if !d.numbered || !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	n := 0
	for _, r := range query {
		if r == '?' {
			n++
			b.WriteString("$")
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}
