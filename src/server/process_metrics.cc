#include "server/process_metrics.h"

#include "server/metrics.h"

#include <sys/resource.h>
#include <unistd.h>

#include <charconv>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#ifndef KVQ_VERSION
#define KVQ_VERSION "unknown"
#endif

namespace kvq::server {
namespace {

void gauge(std::ostream& out, const char* name, const char* type, const char* help,
           std::optional<double> value) {
  if (!value) return;
  out << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n"
      << name << " " << number(*value) << "\n";
}

// The fields of /proc/self/stat after the command's closing parenthesis (which may itself hold
// blanks and parentheses), so that fields()[0] is field 3, the state.
std::vector<std::string> stat_fields() {
  std::ifstream in("/proc/self/stat");
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const auto close = text.rfind(')');
  if (close == std::string::npos) return {};
  std::istringstream rest(text.substr(close + 1));
  std::vector<std::string> fields;
  for (std::string f; rest >> f;) fields.push_back(f);
  return fields;
}

std::optional<double> field_number(const std::vector<std::string>& fields, size_t field) {
  // `field` counts as proc(5) does, from 1; fields[0] is field 3.
  if (field < 3 || field - 3 >= fields.size()) return std::nullopt;
  double v = 0;
  const std::string& text = fields[field - 3];
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

// The machine's boot time, seconds since the epoch (/proc/stat's btime).
std::optional<double> boot_time() {
  std::ifstream in("/proc/stat");
  for (std::string key; in >> key;) {
    if (key == "btime") {
      double v = 0;
      if (in >> v) return v;
      return std::nullopt;
    }
    std::string rest;
    std::getline(in, rest);
  }
  return std::nullopt;
}

std::optional<double> open_fds() {
  std::error_code ec;
  std::filesystem::directory_iterator it("/proc/self/fd", ec);
  if (ec) return std::nullopt;
  double n = 0;
  for (; it != std::filesystem::directory_iterator(); it.increment(ec)) {
    if (ec) return std::nullopt;
    ++n;
  }
  return n - 1;  // the iterator's own descriptor
}

std::optional<double> max_fds() {
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) != 0 || limit.rlim_cur == RLIM_INFINITY) return std::nullopt;
  return static_cast<double>(limit.rlim_cur);
}

}  // namespace

void write_process_metrics(std::ostream& out) {
  const auto fields = stat_fields();
  const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
  const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
  // proc(5): utime 14, stime 15 (ticks), starttime 22 (ticks since boot), vsize 23 (bytes),
  // rss 24 (pages).
  std::optional<double> cpu, start, vsize, rss;
  if (auto u = field_number(fields, 14), s = field_number(fields, 15); u && s && ticks > 0)
    cpu = (*u + *s) / ticks;
  if (auto since_boot = field_number(fields, 22), boot = boot_time(); since_boot && boot)
    start = *boot + *since_boot / ticks;
  vsize = field_number(fields, 23);
  if (auto pages = field_number(fields, 24); pages && page > 0) rss = *pages * page;
  gauge(out, "process_cpu_seconds_total", "counter",
        "Total user and system CPU time spent in seconds.", cpu);
  gauge(out, "process_resident_memory_bytes", "gauge", "Resident memory size in bytes.", rss);
  gauge(out, "process_virtual_memory_bytes", "gauge", "Virtual memory size in bytes.", vsize);
  gauge(out, "process_open_fds", "gauge", "Number of open file descriptors.", open_fds());
  gauge(out, "process_max_fds", "gauge", "Maximum number of open file descriptors.", max_fds());
  gauge(out, "process_start_time_seconds", "gauge",
        "Start time of the process since unix epoch in seconds.", start);
}

void write_build_info(std::ostream& out) {
  out << "# HELP kvq_build_info The kvq build this server runs: always 1, its labels say which.\n"
      << "# TYPE kvq_build_info gauge\n"
      << "kvq_build_info{version=\"" << label(KVQ_VERSION) << "\"} 1\n";
}

void write_live_workers(std::ostream& out, workers::Workers& workers) {
  auto types = workers.types();
  if (!types.ok()) return;
  out << "# HELP kvq_workers Live registered workers by worker type, read from the store at "
         "scrape time (the cluster's: every server shows the same).\n"
      << "# TYPE kvq_workers gauge\n";
  for (const auto& type : *types) {
    auto membership = workers.workers(type);
    if (!membership.ok()) continue;
    out << "kvq_workers{worker_type=\"" << label(type) << "\"} " << membership->workers.size()
        << "\n";
  }
}

}  // namespace kvq::server
