# vcon-server: the two commands are `make run` and `make test`.
GO      ?= go
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
PKG      = github.com/vcon-server/vcon-server
# Pure Go, no build id, no paths: the same source gives the same bytes.
LDFLAGS  = -s -w -buildid= -X $(PKG)/cli.Version=$(VERSION)
BUILD    = CGO_ENABLED=0 $(GO) build -trimpath -buildvcs=false -ldflags "$(LDFLAGS)"

.PHONY: build run test test-tools docs-test lint bench perf soak scale replica-bench webhook-bench audit-log-bench lawful-basis-bench signatures-bench fuzz release release-check clean

build:
	$(BUILD) -o bin/vcon-server .

# Runs the server on a local data directory under .local/ with a demo
# tenant and keys, printing the curl commands to try it.
run: build
	scripts/run-local.sh

# Everything: formatting, vet, and every test with the race detector,
# against real S3 servers and real DuckDB, which test-tools installs; then
# test/openapi, the OpenAPI document checked with an OpenAPI library and
# linted by Redocly's CLI (installed by test-tools too), and test/tlog, the
# audit logs checked with golang.org/x/mod's sumdb/tlog and sumdb/note,
# modules of their own so that the libraries are no requirement of the
# binary.
test: lint test-tools
	$(GO) test -race -timeout 30m ./...
	cd test/openapi && $(GO) test -count=1 ./...
	cd test/tlog && $(GO) test -count=1 ./...

test-tools:
	scripts/install-test-tools.sh
	scripts/install-duckdb.sh
	scripts/install-redocly.sh
	scripts/install-mcp-client.sh
	cd test/openapi && $(GO) mod download
	cd test/tlog && $(GO) mod download

# The documentation pages, run against the real binary (also part of test).
docs-test: build test-tools
	$(GO) test -count=1 -v ./docs/

lint:
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	cd test/openapi && $(GO) vet ./...
	cd test/tlog && $(GO) vet ./...

# Every Go benchmark, then perf's table.
bench: test-tools
	$(GO) test -run '^$$' -bench . -benchtime 2s ./...
	$(PERF)

# Issue 15's benchmark table: what the server adds to the S3 calls and the
# disk writes it makes (S3 store and read at 8 and 16 clients against a
# do-nothing TLS proxy and raw S3, the data directory against an fsync
# loop, packed reads, a pack run, export, p50/p99, server and export RSS,
# and issue 31's replica rows: make replica-bench's ingest, max_lag 1 and
# 0 against the replica off on the data directory and on S3), each figure
# beside its baseline from the same run, as one markdown table; 15 to 19
# minutes on 2 shared cores, most of it 110,000 stores.
# Knobs (test/bench/perf_test.go): VCON_PERF_SECONDS, VCON_PERF_VERSIONS
# (100,000 by default; 990000 for RSS at 1,000,000), VCON_PERF_ROWS,
# VCON_CPUPROFILE_DIR (the server's CPU profile per row),
# VCON_BENCH_S3=minio. It installs only the S3 server it runs on. Never
# part of test.
PERF = VCON_PERF=1 $(GO) test -count=1 -timeout 180m -v -run '^TestPerf$$' ./test/bench/
perf:
	scripts/install-test-tools.sh $${VCON_BENCH_S3:-versitygw}
	$(PERF)

release:
	mkdir -p dist && rm -f dist/vcon-server-linux-* dist/SHA256SUMS
	GOOS=linux GOARCH=amd64 $(BUILD) -o dist/vcon-server-linux-amd64 .
	GOOS=linux GOARCH=arm64 $(BUILD) -o dist/vcon-server-linux-arm64 .
	cd dist && sha256sum vcon-server-* > SHA256SUMS && cat SHA256SUMS

# The long forms of the reliability suite: load, faults and kills for
# SOAK per test (about a dozen minutes at the default), verifying every
# acknowledged version afterwards.
SOAK ?= 3m
soak: test-tools
	VCON_SOAK=$(SOAK) $(GO) test -count=1 -timeout 180m -v -run 'TestLoadThroughFaults|TestParquetThroughFaults|TestKillsUnderLoad|TestLoadS3|TestLoad$$|TestCrashPoints' ./test/reliability/

# The scale benchmark (issue 20): catalogs of 10,000, 100,000 and 1,000,000
# versions, the time per version and peak RSS of check, check --deep,
# export, the purge sweep, listing, master-key rotate and start-up, run as
# the real binary; VCON_SCALE_SIZES=2000,10000 picks the sizes. Never part
# of test.
scale:
	VCON_SCALE=1 $(GO) test -count=1 -timeout 180m -v -run '^TestScale$$' ./test/scale/

# The replica's benchmark (issues 14 and 31): stores of 4 KiB vCons by 8
# clients with the replica off, max_lag 1 and max_lag 0, on the data
# directory (replica in a directory) and on S3 (versitygw on loopback,
# replica in the bucket), 5 interleaved rounds of 5 s, the medians, ratios
# against the replica off in the same run, p50/p99 and the bytes and PUTs
# uploaded per stored version (test/kit/replicabench); then a 0d DELETE's
# latency and restore's time at VCON_REPLICA_BENCH_VERSIONS (100,000 by
# default). About 6 minutes on 2 shared cores. Knobs (test/replica/
# bench_test.go): VCON_REPLICA_BENCH_SECONDS, _ROUNDS, _STORAGE=dir|s3,
# _PROFILE, _OTHER (another build's max_lag = 0 row in the same rounds),
# _TARGETS (a directory on another disk for the directory replicas).
# make perf has the same ingest rows. Never part of test.
replica-bench:
	scripts/install-test-tools.sh versitygw
	VCON_REPLICA_BENCH=1 $(GO) test -count=1 -timeout 180m -v -run '^TestReplicaBench$$' ./test/replica/

# The webhooks' benchmark (issue 18): ingest with a webhook on and off
# (stores a second each, and on/off), and an idempotent retry's time
# against a new store's. Never part of test.
webhook-bench:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkIngestWebhook$$' -benchtime 1x ./test/webhooks/
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkIdempotentRetry$$' -benchtime 200x ./test/webhooks/

# The audit logs' benchmarks (issue 28): what an append costs a record
# (cpu-µs/op, leaf against row), a verify of 10,000 records, and stores and
# reads of the real binary against the same binary without the trees
# (-tags nologtree), alternating rounds in one run. Never part of test.
audit-log-bench:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkAuditAppend$$' -benchtime 50000x ./catalog/
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkVerify$$' ./internal/auditlog/
	$(GO) test -count=1 -timeout 30m -run '^$$' -bench '^BenchmarkLogTrees$$' -benchtime 3x ./test/e2e/

# The lawful basis's benchmark (issue 29): reads of the real binary by a
# key bound to a purpose, each decided, against reads by a key bound to
# none, alternating rounds on one server in one run (bound/unbound). Never
# part of test.
lawful-basis-bench:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkPurposeReads$$' -benchtime 1x ./test/e2e/

signatures-bench:
	$(GO) test -count=1 -run '^$$' -bench '^BenchmarkSignedIngest$$' -benchtime 1x ./test/e2e/

# Every fuzz target for FUZZTIME seconds each.
FUZZTIME ?= 60
fuzz:
	scripts/fuzz-all.sh $(FUZZTIME)

# Two release builds from clean copies must give identical checksums, static
# binaries, stamped with their version.
release-check:
	VCON_RELEASE_CHECK=1 $(GO) test -count=1 -run TestReleaseCheck -v ./test/e2e/

clean:
	rm -rf bin dist/vcon-server-linux-* dist/SHA256SUMS
