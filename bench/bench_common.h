// bench/bench_common.h — what every kvq benchmark program shares: start-up with a default
// minimum time, and fresh data directories under $KVQ_BENCH_DIR, else $TMPDIR, else /tmp
// (which must be a real disk for the sync figures to mean anything).
#pragma once

#include <benchmark/benchmark.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <string>
#include <system_error>
#include <vector>

namespace kvq::bench {

inline std::string bench_base_dir() {
  for (const char* var : {"KVQ_BENCH_DIR", "TMPDIR"}) {
    if (const char* v = std::getenv(var); v != nullptr && *v != '\0') return v;
  }
  return "/tmp";
}

// A fresh directory named after `program`, or "" (with `error` set) if mkdtemp failed.
inline std::string make_temp_dir(const std::string& program, std::string& error) {
  std::string templ = bench_base_dir() + "/" + program + ".XXXXXX";
  std::vector<char> buf(templ.begin(), templ.end());
  buf.push_back('\0');
  if (mkdtemp(buf.data()) == nullptr) {
    error = "mkdtemp(" + templ +
            ") failed: " + std::error_code(errno, std::generic_category()).message();
    return "";
  }
  return std::string(buf.data());
}

inline void remove_dir(std::string& dir) {
  if (dir.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  dir.clear();
}

// Initializes Google Benchmark with `default_min_time` (e.g. "--benchmark_min_time=1") placed
// before the user's arguments, so a --benchmark_min_time on the command line wins. (MinTime()
// on each benchmark would ignore the flag and put "min_time:..." into every name.) Returns
// false, after reporting them, if arguments were not recognised.
inline bool init_benchmarks(int argc, char** argv, const char* default_min_time) {
  static std::string default_flag;
  default_flag = default_min_time;
  std::vector<char*> args;
  args.push_back(argv[0]);
  args.push_back(default_flag.data());
  for (int i = 1; i < argc; ++i) args.push_back(argv[i]);
  args.push_back(nullptr);
  int n = argc + 1;
  benchmark::Initialize(&n, args.data());
  return !benchmark::ReportUnrecognizedArguments(n, args.data());
}

}  // namespace kvq::bench
