# The two Quick start commands (make run, make test) and a few more for developers.
# Every target installs missing Debian packages first (scripts/install-deps.sh).

JOBS ?= $(shell nproc)
DATA ?= ./kvq-data

.PHONY: run test test-asan test-clang build deps bench clean

run: build
	./build/release/src/cli/kvq demo --data $(DATA)

test: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)
	ctest --preset release -j $(JOBS)

# The whole suite under AddressSanitizer and UndefinedBehaviorSanitizer.
test-asan: deps
	cmake --preset asan >/dev/null
	cmake --build --preset asan -j $(JOBS)
	ctest --preset asan -j $(JOBS)

# Builds with clang and runs the suite (fuzzing needs clang).
test-clang: deps
	cmake --preset clang >/dev/null
	cmake --build --preset clang -j $(JOBS)
	ctest --preset clang -j $(JOBS)

build: deps
	cmake --preset release >/dev/null
	cmake --build --preset release -j $(JOBS)

bench: build
	./scripts/run-benchmarks.sh

deps:
	@./scripts/install-deps.sh

clean:
	rm -rf build
