// bench/bench_dirs.h — fresh data directories for benchmarks, under $KVQ_BENCH_DIR, else
// $TMPDIR, else /tmp (which must be a real disk for the sync figures to mean anything).
#pragma once

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
    error = "mkdtemp(" + templ + ") failed: " + std::error_code(errno, std::generic_category()).message();
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

}  // namespace kvq::bench
