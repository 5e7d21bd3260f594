# The two Quick start commands (make run, make test) and a few more for developers.
# Every target installs missing Debian packages first (scripts/install-deps.sh).

JOBS ?= $(shell nproc)
DATA ?= ./kvq-data
LISTEN ?= 127.0.0.1:7411

.PHONY: run package test test-reliability test-asan test-clang fuzz build deps deps-test bench bench-layers format check-format clean

# Starts kvq serve on the embedded default (an LMDB data directory) in the foreground. Builds
# what docs/library.md's examples run too: the C++ examples (build/release/examples/).
run: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target kvq library_quickstart registered_worker
	@echo "kvq: starting the server on http://$(LISTEN) with data in $(DATA) (Ctrl-C stops it)"
	@echo "kvq: the dashboard is at http://$(LISTEN)/"
	@echo "kvq: try, from another terminal:"
	@echo "  curl -X PUT http://$(LISTEN)/v1/types/email -d '{\"timeout\": 30}'"
	@echo "  curl -X POST http://$(LISTEN)/v1/jobs/email -d '{\"id\": \"welcome-1\", \"data\": {\"to\": \"ada@example.com\"}}'"
	@echo "  curl -X POST http://$(LISTEN)/v1/accept/email -d '{\"timeout\": 30}'"
	@echo "  ./build/release/src/cli/kvq ls email        (the CLI: ./build/release/src/cli/kvq help)"
	./build/release/src/cli/kvq serve --listen $(LISTEN) --data $(DATA)

# The Debian packages (cmake/package.cmake, docs/install.md): build/package/kvq_VERSION_ARCH.deb
# (the server, its systemd unit, /etc/kvq/kvq.env, kvq(1)) and kvq-dev_VERSION_ARCH.deb (the
# libraries, headers, CMake package and kvq.pc). Install with: sudo apt install ./build/package/kvq_*.deb
package: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS) --target kvq kvq_jobs kvq_workers kvq_kv_lmdb kvq_kv_etcd kvq_server
	cpack --config build/release/CPackConfig.cmake -B build/package
	@ls -1 build/package/*.deb

# The whole suite: the format check (scripts/check-format.sh), unit, conformance and end-to-end
# tests, then the reliability suite.
test: deps-test
	./scripts/check-format.sh
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -j $(JOBS) -LE reliability
	ctest --preset release -L reliability

# The reliability suite alone (tests/reliability): real faults against real servers — simulated
# power loss, full disks, descriptor exhaustion, hostile clients. Some need root (loop devices,
# mounts); as another user those cases are skipped and say why.
test-reliability: deps-test
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -L reliability

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer, built with clang (the asan
# preset: about twice as fast to compile as g++ there), less the reliability
# suite and the client libraries' own suites (label clients: they drive the same HTTP routes as
# the end-to-end tests, which do run here), the packaging tests (label packaging) and the
# groups' fairness measurement over 100,000 jobs (ASmallGroupIsServedAmidOneWithAHundredThousandJobs:
# 40 s a backend under ASan for adds and accepts that the other groups tests run too; make test
# runs it).
test-asan: deps-test
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS) -LE 'reliability|clients|packaging' \
	  -E 'ASmallGroupIsServedAmidOneWithAHundredThousandJobs'

# Builds with clang and runs the suite.
test-clang: deps-test
	cmake --preset clang >/dev/null
	cmake --build --preset clang -j $(JOBS)
	ctest --preset clang -j $(JOBS)

# Fuzzes the HTTP API and the beanstalkd protocol in process with libFuzzer under ASan and UBSan,
# FUZZ_SECONDS for each of three targets: tests/fuzz/api_fuzz.cc (requests to every route's
# handler), tests/fuzz/http_fuzz.cc (arbitrary bytes on a connection to the real HTTP server) and
# tests/fuzz/beanstalk_fuzz.cc (arbitrary bytes on a connection to the beanstalkd protocol's
# listener). The three run side by side (each libFuzzer process is one thread, and a machine has
# more than one core); each one's output goes to build/fuzz/<target>/log, printed if it fails.
# New inputs go to build/fuzz/<target>/corpus; a finding (crash, sanitizer report, 5xx
# reply or INTERNAL_ERROR, a connection left open, ...) stops the run with a non-zero exit and is saved under
# build/fuzz/<target>/findings/. Leaks are the ASan suite's to find (make test-asan): the fuzzed
# server lives for the whole run.
FUZZ_SECONDS ?= 60
fuzz: deps
	cmake --preset fuzz >/dev/null
	cmake --build --preset fuzz -j $(JOBS) --target api_fuzz http_fuzz beanstalk_fuzz
	pids=""; for target in api http beanstalk; do \
	  seeds=tests/fuzz/corpus; [ $$target = http ] && seeds=tests/fuzz/http_corpus; \
	  [ $$target = beanstalk ] && seeds=tests/fuzz/beanstalk_corpus; \
	  mkdir -p build/fuzz/$$target/corpus build/fuzz/$$target/findings && \
	  { ASAN_OPTIONS=detect_leaks=0 ./build/fuzz/tests/fuzz/$${target}_fuzz -max_total_time=$(FUZZ_SECONDS) \
	    -timeout=30 -max_len=4096 -dict=tests/fuzz/$$target.dict \
	    -artifact_prefix=build/fuzz/$$target/findings/ build/fuzz/$$target/corpus $$seeds \
	    >build/fuzz/$$target/log 2>&1 & } ; pids="$$pids $$!:$$target"; \
	done; failed=0; for p in $$pids; do \
	  if wait $${p%%:*}; then echo "fuzz: $${p#*:}: $$(grep -E '^Done|#[0-9]+.*DONE' build/fuzz/$${p#*:}/log | tail -1)"; \
	  else failed=1; echo "fuzz: $${p#*:} FAILED (build/fuzz/$${p#*:}/log):"; tail -60 build/fuzz/$${p#*:}/log; fi; \
	done; exit $$failed

# The C++ format (.clang-format: Google style, 100 columns). check-format fails naming every
# tracked .cc/.h file that clang-format would change; format rewrites them in place.
check-format: deps-test
	./scripts/check-format.sh

format: deps-test
	git ls-files -- '*.cc' '*.h' | xargs clang-format -i

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

# kvq next to beanstalkd, PostgreSQL and Redis (installs and starts them itself); writes
# docs/benchmarks.md and docs/benchmarks.png. About 20–25 minutes on 2 cores; see scripts/bench-peers.sh.
bench: build
	./scripts/bench-peers.sh

# The storage layer on its own: kv interface vs raw LMDB (docs/benchmarks-layers.md).
bench-layers: build
	./scripts/run-benchmarks.sh

deps:
	@./scripts/install-deps.sh

# The tests also need headless Chromium (the dashboard's test).
deps-test:
	@./scripts/install-deps.sh --test

clean:
	rm -rf build
