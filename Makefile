GO      ?= go
BIN     := bin/fwab
# Tests run as root in CI so the lab tests run; they skip with a message otherwise.
# The packages whose tests send real traffic through the lab (TRAFFIC_PKGS)
# run one at a time, so that their throughput comparisons do not compete
# for the 2 cores; within them, the tests that check behaviour rather than
# throughput call t.Parallel, so Go runs them two at a time once the
# package's sequential (comparing) tests are done. The other packages, which
# wait on emulated firewalls far more than they compute, run two at a time
# after them.
TESTFLAGS ?= -count=1 -timeout 18m
TRAFFIC_PKGS := ./lab ./lab/inspect ./probe ./cmd/fwab

.PHONY: all setup build test demo bench fuzz load faults vet man clean

all: build

setup:
	./scripts/setup.sh

build:
	$(GO) build -o $(BIN) ./cmd/fwab

test: vet
	$(GO) test $(TESTFLAGS) -p 1 $(TRAFFIC_PKGS)
	$(GO) test $(TESTFLAGS) -p 2 $$($(GO) list ./... | grep -v -x -F $(foreach p,$(TRAFFIC_PKGS),-e github.com/fwab/fwab/$(patsubst ./%,%,$(p))))

demo: build
	./scripts/demo.sh

# examples/sample-results.db, the results database to try report, compare
# and trend on: four short nightly runs on a lab of its own, a firmware
# upgrade with a 10 % slowdown between runs 2 and 3 (root; about 7 minutes).
.PHONY: sample-db
sample-db: build
	./scripts/sample-db.sh

bench: build
	./bench/run.sh

# Every fuzz target for FUZZTIME each (CI: the default 10s).
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

# The load tests at full size: a 1,000-point dry run and a 200-point lab
# sweep of 1 s probes (root; about 7 minutes), with peak RSS and leak checks.
LOADPOINTS ?= 200
load:
	FWAB_LOAD_POINTS=$(LOADPOINTS) $(GO) test -count=1 -timeout 40m -v -run '^TestLoad' ./cmd/fwab

# The fault-injection suite on the lab (root): kill -9, management link
# drop, a silent management link, reboot, iperf3 endpoint loss, firewall
# disk full/read-only, on each flavor's lab in turn (FAULTS_FLAVORS); prints
# a table per flavor and fails when any trial lost anything. FAULTS_SEED
# reproduces a run's kill times; FAULTS_KILLS sets the number of kill
# trials, split across the flavors.
FAULTS_SEED    ?= 0
FAULTS_KILLS   ?= 20
FAULTS_FLAVORS ?= pfsense,opnsense
# Both flavors take about 30 min on a 2-core machine (pfSense 12, OPNsense
# 18); the timeout leaves room above that.
faults:
	$(GO) test -tags faults -run '^TestFaults$$' -count=1 -v -timeout 45m ./cmd/fwab -faults.seed $(FAULTS_SEED) -faults.kills $(FAULTS_KILLS) -faults.flavors $(FAULTS_FLAVORS)

# staticcheck is pinned by go.mod's tool directive; tidy -diff fails when
# go.mod or go.sum is not tidy.
vet:
	$(GO) vet ./...
	$(GO) vet -tags faults ./cmd/fwab
	$(GO) tool staticcheck ./...
	$(GO) mod tidy -diff

# A man page per command, into man/ (man -l man/fwab.1).
man: build
	$(BIN) gen-man man

clean:
	rm -rf bin man
