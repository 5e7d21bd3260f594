// cli/commands_top.cc — kvq top: live job counts per type and state, from /metrics.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <map>
#include <thread>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "prometheus.h"

namespace kvq::cli {

using Json = nlohmann::json;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

constexpr char kTopUsage[] =
    "usage: kvq top [--interval SECONDS] [--once]\n"
    "\n"
    "Shows live job counts per type and state, refreshing every SECONDS (default 2).\n"
    "Counts come from the server's /metrics (kvq_jobs, counted up to 100,000 each); the\n"
    "accept and finish rates are those of the server process answering.\n"
    "  --once    print one table and exit (with --json: {\"types\": [...]})\n";

struct TypeRow {
  std::string type;
  Json timeout;
  std::optional<double> pending, running, finished;
  std::optional<double> accepts, finishes;  // counters
};

// One snapshot: the types, and their counts from /metrics (or /pending); or the failed answer
// to the listing of the types.
struct Snapshot {
  std::vector<TypeRow> rows;
  std::optional<Response> failure;
};

Snapshot snapshot(Client& client) {
  Response types = client.get("/v1/types");
  if (!types.ok()) return {{}, std::move(types)};
  std::map<std::string, TypeRow> by_type;
  for (const auto& t : value_of(types.body, "types", Json::array())) {
    const std::string name = value_of(t, "type", std::string());
    by_type[name] = TypeRow{name,         value_of(t, "timeout", Json()),
                            std::nullopt, std::nullopt,
                            std::nullopt, std::nullopt,
                            std::nullopt};
  }
  Response metrics = client.get("/metrics");
  bool have_gauge = false;
  if (metrics.ok()) {
    for (const auto& s : parse_metrics(metrics.text)) {
      auto type_it = s.labels.find("type");
      if (type_it == s.labels.end()) continue;
      TypeRow& row = by_type[type_it->second];
      row.type = type_it->second;
      if (s.name == "kvq_jobs") {
        have_gauge = true;
        const auto state = s.labels.find("state");
        if (state == s.labels.end()) continue;
        if (state->second == "pending") row.pending = s.value;
        if (state->second == "running") row.running = s.value;
        if (state->second == "finished") row.finished = s.value;
      } else if (s.name == "kvq_accepts_total") {
        row.accepts = s.value;
      } else if (s.name == "kvq_finishes_total") {
        row.finishes = s.value;
      }
    }
  }
  std::vector<TypeRow> rows;
  for (auto& [name, row] : by_type) {
    if (!have_gauge) {  // no usable /metrics: due pending jobs only
      Response p = client.get(path("/v1/types", {name}) + "/pending");
      if (p.ok()) row.pending = value_of(p.body, "pending", 0.0);
    } else {
      if (!row.pending) row.pending = 0;
      if (!row.running) row.running = 0;
      if (!row.finished) row.finished = 0;
    }
    rows.push_back(row);
  }
  return {std::move(rows), std::nullopt};
}

std::string count_cell(const std::optional<double>& v) {
  if (!v) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.0f", *v);
  return buf;
}

std::string rate_cell(const std::optional<double>& now, const std::optional<double>& before,
                      double seconds) {
  if (!now || !before || seconds <= 0) return "-";
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f", std::max(0.0, *now - *before) / seconds);
  return buf;
}

std::string format_top(const std::vector<TypeRow>& rows, const std::vector<TypeRow>& previous,
                       double seconds) {
  std::map<std::string, const TypeRow*> prev;
  for (const auto& r : previous) prev[r.type] = &r;
  std::vector<std::vector<std::string>> table;
  for (const auto& r : rows) {
    const TypeRow* p = prev.count(r.type) ? prev[r.type] : nullptr;
    table.push_back({r.type, r.timeout.is_number() ? format_seconds(r.timeout.get<double>()) : "-",
                     count_cell(r.pending), count_cell(r.running), count_cell(r.finished),
                     rate_cell(r.accepts, p ? p->accepts : std::nullopt, seconds),
                     rate_cell(r.finishes, p ? p->finishes : std::nullopt, seconds)});
  }
  if (table.empty()) return "no types\n";
  return format_table(
      {"TYPE", "TIMEOUT", "PENDING", "RUNNING", "FINISHED", "ACCEPTS/S", "FINISHES/S"}, table);
}

Json top_json(const std::vector<TypeRow>& rows) {
  Json types = Json::array();
  for (const auto& r : rows) {
    Json t = {{"type", r.type}, {"timeout", r.timeout}};
    t["pending"] = r.pending ? Json(static_cast<int64_t>(*r.pending)) : Json();
    t["running"] = r.running ? Json(static_cast<int64_t>(*r.running)) : Json();
    t["finished"] = r.finished ? Json(static_cast<int64_t>(*r.finished)) : Json();
    types.push_back(std::move(t));
  }
  return Json{{"types", std::move(types)}};
}

}  // namespace

int run_top(int argc, char** argv) {
  auto begun =
      begin_command(argc, argv, "top", kTopUsage, {{"interval", true}, {"once", false}}, 0, 0);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  double interval = 2;
  if (inv.args.has("interval")) {
    auto v = parse_double(inv.args.value("interval"));
    if (!v || *v <= 0) return inv.usage_error("--interval needs a number of seconds > 0");
    interval = *v;
  }
  const bool once = inv.args.flag("once");
  std::vector<TypeRow> rows, previous;
  auto previous_at = Clock::now();
  for (bool first = true;; first = false) {
    const auto at = Clock::now();
    Snapshot snap = snapshot(*inv.client);
    const bool ok = !snap.failure;
    if (ok) rows = std::move(snap.rows);
    const std::string error = ok ? "" : snap.failure->describe();
    const double elapsed = std::chrono::duration<double>(at - previous_at).count();
    if (once) {
      if (!ok) return inv.fail(*snap.failure);
      if (inv.json) {
        print_json(top_json(rows));
      } else {
        std::fputs(format_top(rows, {}, 0).c_str(), stdout);
      }
      return kExitOk;
    }
    if (inv.json) {
      if (ok)
        print_json(top_json(rows));
      else
        std::fprintf(stderr, "%s: %s\n", inv.name.c_str(), error.c_str());
    } else {
      const auto wall = std::chrono::system_clock::now();
      std::string screen = "\x1b[H\x1b[2J";
      screen += "kvq top  " + inv.client->url().base + "  " +
                format_time_ms(
                    std::chrono::duration_cast<milliseconds>(wall.time_since_epoch()).count()) +
                "  (every " + format_seconds(interval) + ", Ctrl-C to quit)\n\n";
      screen += ok ? format_top(rows, first ? std::vector<TypeRow>() : previous, elapsed)
                   : "error: " + error + "\n";
      std::fputs(screen.c_str(), stdout);
      std::fflush(stdout);
    }
    if (ok) {
      previous = rows;
      previous_at = at;
    }
    std::this_thread::sleep_for(milliseconds(static_cast<int64_t>(interval * 1000)));
  }
}

}  // namespace kvq::cli
