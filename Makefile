GO      ?= go
BIN     := bin/fwab
# Tests run as root in CI so the lab tests run; they skip with a message otherwise.
# -p 1: packages one at a time, so throughput tests do not compete for the 2 cores.
TESTFLAGS ?= -count=1 -p 1 -timeout 18m

.PHONY: all setup build test demo bench fuzz vet clean

all: build

setup:
	./scripts/setup.sh

build:
	$(GO) build -o $(BIN) ./cmd/fwab

test:
	$(GO) vet ./...
	$(GO) test $(TESTFLAGS) ./...

demo: build
	./scripts/demo.sh

bench: build
	./bench/run.sh

# Every fuzz target for FUZZTIME each (CI: the default 10s).
FUZZTIME ?= 10s
fuzz:
	GO=$(GO) FUZZTIME=$(FUZZTIME) ./scripts/fuzz.sh

vet:
	$(GO) vet ./...

clean:
	rm -rf bin
