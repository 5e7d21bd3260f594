// The dashboard: its page (dashboard/index.html, compiled in) at / and /dashboard, and
// GET /v1/stats, what the page polls for: every type's counts, this server's accept and finish
// totals, and the worker types.
#include <chrono>

#include "server/api.h"

namespace kvq::server {

// The page, generated at build time from dashboard/index.html (dashboard/embed.cmake).
std::string_view dashboard_page();

namespace {

using Ex = std::shared_ptr<Exchange>;

uint64_t total_of(const std::map<std::string, uint64_t>& totals, const std::string& type) {
  auto it = totals.find(type);
  return it == totals.end() ? 0 : it->second;
}

uint64_t sum(const std::map<std::string, uint64_t>& totals) {
  uint64_t n = 0;
  for (const auto& [type, count] : totals) n += count;
  return n;
}

Result<nlohmann::json> type_stats(Api& api, const Metrics::Totals& totals) {
  KVQ_ASSIGN_OR_RETURN(std::vector<TypeCounts> counted, count_jobs(api.jobs));
  auto out = nlohmann::json::array();
  for (const auto& [type, counts] : counted) {
    auto settings = api.jobs.get_type(type);
    if (settings.status().code() == Code::kNotFound) continue;  // cleared since it was listed
    if (!settings.ok()) return settings.status();
    nlohmann::json entry = type_json(type, *settings);
    entry.update({{"pending", counts.pending},
                  {"scheduled", counts.scheduled},
                  {"running", counts.running},
                  {"finished", counts.finished},
                  {"dead", counts.dead},
                  {"cancelled", counts.cancelled},
                  {"waiting", counts.waiting},
                  {"accepts", total_of(totals.accepts, type)},
                  {"finishes", total_of(totals.finishes, type)}});
    out.push_back(std::move(entry));
  }
  return out;
}

Result<nlohmann::json> worker_type_stats(workers::Workers& workers) {
  KVQ_ASSIGN_OR_RETURN(std::vector<std::string> types, workers.types());
  auto out = nlohmann::json::array();
  for (const auto& type : types) {
    KVQ_ASSIGN_OR_RETURN(workers::Membership membership, workers.workers(type));
    out.push_back(
        {{"type", type}, {"version", membership.version}, {"workers", membership.workers.size()}});
  }
  return out;
}

Result<nlohmann::json> stats(Api& api) {
  // The time and the totals are read together: between two answers, the totals' change over
  // the time's is a rate.
  const auto now = std::chrono::system_clock::now();
  const Metrics::Totals totals = api.metrics.totals();
  KVQ_ASSIGN_OR_RETURN(nlohmann::json types, type_stats(api, totals));
  KVQ_ASSIGN_OR_RETURN(nlohmann::json worker_types, worker_type_stats(api.workers));
  return nlohmann::json{
      {"time",
       std::chrono::duration_cast<std::chrono::milliseconds>(now.time_since_epoch()).count()},
      {"accepts", sum(totals.accepts)},
      {"finishes", sum(totals.finishes)},
      {"types", std::move(types)},
      {"worker_types", std::move(worker_types)}};
}

}  // namespace

void add_dashboard_routes(Router& router, Api& api) {
  // The page holds no data, so it needs no token; it sends the one its user enters.
  auto page = [](Request&, Ex ex) {
    ex->reply({200, std::string(dashboard_page()), "text/html; charset=utf-8"});
  };
  router.add("GET", "/", page, Router::Access::kPublic);
  router.add("GET", "/dashboard", page, Router::Access::kPublic);
  router.add("GET", "/v1/stats", [&api](Request&, Ex ex) {
    auto body = stats(api);
    if (!body.ok()) return reply_status(*ex, body.status());
    reply_json(*ex, 200, *body);
  });
}

}  // namespace kvq::server
