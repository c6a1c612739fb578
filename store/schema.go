package store

// migrations take the database from version i to i+1. Append only: a
// released migration is never edited.
var migrations = []string{
	// 1: the first schema.
	`
CREATE TABLE runs (
	id               INTEGER PRIMARY KEY,
	created          TEXT    NOT NULL,             -- RFC 3339, UTC
	finished         TEXT,
	status           TEXT    NOT NULL DEFAULT 'running'
	                 CHECK (status IN ('running', 'done', 'failed', 'cancelled')),
	spec             TEXT    NOT NULL,             -- the matrix spec as given
	spec_hash        TEXT    NOT NULL,             -- sha256 of spec, hex
	seed             INTEGER NOT NULL,
	fwab_version     TEXT    NOT NULL,
	target_name      TEXT    NOT NULL,
	target_info      TEXT    NOT NULL DEFAULT '{}', -- JSON, no secrets
	firmware_version TEXT    NOT NULL DEFAULT '',
	config_hash      TEXT    NOT NULL DEFAULT ''    -- sha256 of the original config.xml
);

CREATE TABLE points (
	run_id INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	idx    INTEGER NOT NULL,
	knobs  TEXT    NOT NULL,                       -- JSON object knob -> value
	status TEXT    NOT NULL DEFAULT 'pending'
	       CHECK (status IN ('pending', 'valid', 'invalid', 'failed')),
	reason TEXT    NOT NULL DEFAULT '',
	PRIMARY KEY (run_id, idx)
);

CREATE TABLE samples (
	id                 INTEGER PRIMARY KEY,
	run_id             INTEGER NOT NULL,
	point_idx          INTEGER NOT NULL,
	probe              TEXT    NOT NULL,
	round              INTEGER NOT NULL,
	repeat             INTEGER NOT NULL,
	direction          TEXT    NOT NULL DEFAULT '',
	started            TEXT    NOT NULL,
	elapsed_ms         INTEGER NOT NULL DEFAULT 0,
	bits_per_second    REAL,                       -- received, main flow
	sent_bps           REAL,
	bidir_bps          REAL,                       -- received, opposite flow of a bidir probe
	retransmits        INTEGER,
	client_cpu         REAL,                       -- percent of one core
	server_cpu         REAL,
	rtt_ms             REAL,                       -- TCP sender mean RTT
	jitter_ms          REAL,
	lost_percent       REAL,
	ping_avg_ms        REAL,                       -- latency under load
	ping_loss_percent  REAL,
	power_watts        REAL,                       -- mean over the probe
	endpoint_cpu_bound INTEGER NOT NULL DEFAULT 0,
	failed             INTEGER NOT NULL DEFAULT 0,
	reason             TEXT    NOT NULL DEFAULT '',
	warnings           TEXT    NOT NULL DEFAULT '[]', -- JSON array
	raw                TEXT    NOT NULL DEFAULT '{}', -- JSON: the probe's reports
	UNIQUE (run_id, point_idx, probe, round, repeat),
	FOREIGN KEY (run_id, point_idx) REFERENCES points (run_id, idx) ON DELETE CASCADE
);

CREATE TABLE dut_metrics (
	sample_id   INTEGER NOT NULL REFERENCES samples (id) ON DELETE CASCADE,
	time        TEXT    NOT NULL,
	cpu         REAL,
	temp        REAL,
	mem         REAL,
	mbufs       INTEGER
);
CREATE INDEX dut_metrics_sample ON dut_metrics (sample_id);

CREATE TABLE events (
	id        INTEGER PRIMARY KEY,
	run_id    INTEGER NOT NULL REFERENCES runs (id) ON DELETE CASCADE,
	time      TEXT    NOT NULL,
	kind      TEXT    NOT NULL,
	point_idx INTEGER,
	message   TEXT    NOT NULL
);
CREATE INDEX events_run ON events (run_id);
`,
}
