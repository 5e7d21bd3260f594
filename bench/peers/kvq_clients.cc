// bench/peers/kvq_clients.cc — kvq driven the two ways users run it: over its HTTP API with the
// client `kvq bench` uses (src/cli/client.h: one keep-alive connection per thread, long-poll
// accept), and in-process through the library (kvq/jobs.h on an LMDB store).
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/client.h"
#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "queue.h"

namespace kvq::peers {
namespace {

using nlohmann::json;
constexpr std::string_view kType = "bench";
// Long enough that the activity monitor never re-enqueues a job a benchmark worker holds.
constexpr int kTypeTimeoutSeconds = 600;

// Job ids must not collide with a previous run's finished jobs on the same store.
std::string run_tag() {
  std::random_device rd;
  return std::to_string(rd()) + "-";
}

// ---- over HTTP ----------------------------------------------------------------------------------

cli::Url parse_base(const std::string& address) {
  auto url = cli::parse_url("http://" + address);
  if (!url.ok()) throw std::invalid_argument("kvq-http: " + url.status().message());
  return *url;
}

class HttpClient final : public QueueClient {
 public:
  HttpClient(const cli::Url& url, const std::string& tag) : client_(url, ""), tag_(tag) {}

  void add(int64_t seq, const std::string& payload) override {
    count_request();
    check(client_.post(add_path_,
                       json{{"id", tag_ + std::to_string(seq)}, {"data", json::parse(payload)}}),
          "add");
  }

  bool reserve(Reserved& out, std::chrono::milliseconds wait) override {
    const json body = {{"timeout", (wait.count() + 999) / 1000}};
    count_request();
    cli::Response r = client_.post(accept_path_, body, wait + std::chrono::seconds(30));
    check(r, "accept");
    if (r.status == 204) return false;
    take(r.body.at("jobs").at(0), out);
    return true;
  }

  void finish(const Reserved& job) override {
    count_request();
    check(
        client_.post(cli::path("/v1/jobs", {kType, job.id, "finish"}), json{{"lock", job.handle}}),
        "finish");
  }

  // One request: the finish, and the next due job in its transaction (none: `next` is null).
  bool finish_and_reserve(const Reserved& done, Reserved& next) override {
    count_request();
    cli::Response r = client_.post(cli::path("/v1/jobs", {kType, done.id, "finish"}),
                                   json{{"lock", done.handle}, {"next", {{"timeout", 0}}}});
    check(r, "finish");
    auto it = r.body.find("next");
    if (it == r.body.end() || !it->is_object()) return false;
    take(*it, next);
    return true;
  }

  // One request each: a batch add, an accept of up to `max` (at most 100), a finish_many.
  void add_batch(int64_t first_seq, const std::vector<std::string>& payloads) override {
    json list = json::array();
    for (size_t i = 0; i < payloads.size(); ++i)
      list.push_back({{"id", tag_ + std::to_string(first_seq + static_cast<int64_t>(i))},
                      {"data", json::parse(payloads[i])}});
    count_request();
    check(client_.post(add_path_ + "/batch", json{{"jobs", list}}), "add batch");
  }

  void reserve_batch(std::vector<Reserved>& out, size_t max,
                     std::chrono::milliseconds wait) override {
    out.clear();
    const json body = {{"timeout", (wait.count() + 999) / 1000},
                       {"count", std::min<size_t>(max, 100)}};
    count_request();
    cli::Response r = client_.post(accept_path_, body, wait + std::chrono::seconds(30));
    check(r, "accept");
    if (r.status == 204) return;
    for (const auto& job : r.body.at("jobs")) {
      Reserved one;
      take(job, one);
      out.push_back(std::move(one));
    }
  }

  void finish_batch(const std::vector<Reserved>& done) override {
    json list = json::array();
    for (const auto& job : done)
      list.push_back({{"type", kType}, {"id", job.id}, {"lock", job.handle}});
    count_request();
    cli::Response r = client_.post("/v1/finish", json{{"jobs", list}});
    check(r, "finish many");
    for (const auto& one : r.body.at("results")) {
      if (!one.value("ok", false)) throw std::runtime_error("kvq-http: finish many: " + one.dump());
    }
  }

  cli::Client& client() { return client_; }

 private:
  static void take(const json& job, Reserved& out) {
    out.id = job.at("id").get<std::string>();
    out.handle = job.at("lock").get<std::string>();
    out.payload = job.at("data").dump();
  }
  static void check(const cli::Response& r, const char* what) {
    if (!r.ok()) throw std::runtime_error(std::string("kvq-http: ") + what + ": " + r.describe());
  }

  cli::Client client_;
  std::string tag_;
  const std::string add_path_ = cli::path("/v1/jobs", {kType});
  const std::string accept_path_ = cli::path("/v1/accept", {kType});
};

class KvqHttp final : public QueueSystem {
 public:
  KvqHttp(const std::string& address, std::string data_dir)
      : url_(parse_base(address)), tag_(run_tag()), data_dir_(std::move(data_dir)) {}
  void prepare() override {
    HttpClient admin(url_, tag_);
    cli::Response r =
        admin.client().put(cli::path("/v1/types", {kType}), json{{"timeout", kTypeTimeoutSeconds}});
    if (!r.ok()) throw std::runtime_error("kvq-http: set the type timeout: " + r.describe());
  }
  std::unique_ptr<QueueClient> connect() override {
    return std::make_unique<HttpClient>(url_, tag_);
  }
  int64_t commits() override { return data_dir_.empty() ? -1 : lmdb_commits(data_dir_); }

 private:
  cli::Url url_;
  std::string tag_;
  std::string data_dir_;
};

// ---- in-process ---------------------------------------------------------------------------------

class LibClient final : public QueueClient {
 public:
  LibClient(jobs::Jobs& jobs, const std::string& tag) : jobs_(jobs), tag_(tag) {}

  void add(int64_t seq, const std::string& payload) override {
    count_request();
    check(jobs_.add(kType, tag_ + std::to_string(seq), payload).status(), "add");
  }

  bool reserve(Reserved& out, std::chrono::milliseconds wait) override {
    count_request();
    auto job = jobs_.accept(kType, {.timeout = wait});
    if (job.status().code() == Code::kDeadlineExceeded) return false;
    check(job.status(), "accept");
    out.id = std::move(job->id);
    out.handle = std::move(job->lock);
    out.payload = std::move(job->data);
    return true;
  }

  void finish(const Reserved& reserved) override {
    jobs::Job job{.type = std::string(kType),
                  .id = reserved.id,
                  .lock = reserved.handle,
                  .data = reserved.payload};
    count_request();
    check(jobs_.finish(job), "finish");
  }

  // One call and one transaction: the finish, and the next due job if there is one.
  bool finish_and_reserve(const Reserved& done, Reserved& next) override {
    jobs::Job job{
        .type = std::string(kType), .id = done.id, .lock = done.handle, .data = done.payload};
    count_request();
    auto taken = jobs_.finish_and_accept(job, {}, {}, {.timeout = std::chrono::milliseconds(0)});
    check(taken.status(), "finish");
    if (!*taken) return false;
    next.id = std::move((*taken)->id);
    next.handle = std::move((*taken)->lock);
    next.payload = std::move((*taken)->data);
    return true;
  }

  // One transaction each: add_many, accept_many, finish_many.
  void add_batch(int64_t first_seq, const std::vector<std::string>& payloads) override {
    std::vector<jobs::NewJob> batch;
    batch.reserve(payloads.size());
    for (size_t i = 0; i < payloads.size(); ++i)
      batch.push_back({tag_ + std::to_string(first_seq + static_cast<int64_t>(i)), payloads[i]});
    count_request();
    check(jobs_.add_many(kType, batch).status(), "add_many");
  }

  void reserve_batch(std::vector<Reserved>& out, size_t max,
                     std::chrono::milliseconds wait) override {
    out.clear();
    count_request();
    auto taken = jobs_.accept_many(kType, max, {.timeout = wait});
    if (taken.status().code() == Code::kDeadlineExceeded) return;
    check(taken.status(), "accept_many");
    for (auto& job : *taken)
      out.push_back({std::move(job.lock), std::move(job.id), std::move(job.data)});
  }

  void finish_batch(const std::vector<Reserved>& done) override {
    std::vector<jobs::Job> handles;
    handles.reserve(done.size());
    for (const auto& r : done)
      handles.push_back(
          {.type = std::string(kType), .id = r.id, .lock = r.handle, .data = r.payload});
    count_request();
    auto finished = jobs_.finish_many(handles);
    check(finished.status(), "finish_many");
    for (const Status& s : *finished) check(s, "finish_many");
  }

 private:
  static void check(const Status& status, const char* what) {
    if (!status.ok())
      throw std::runtime_error(std::string("kvq-lib: ") + what + ": " + status.to_string());
  }

  jobs::Jobs& jobs_;
  const std::string& tag_;
};

class KvqLib final : public QueueSystem {
 public:
  KvqLib(const std::string& data_dir, bool durable) : tag_(run_tag()), data_dir_(data_dir) {
    auto store = open_lmdb_store(
        {.path = data_dir, .durability = durable ? Durability::kDurable : Durability::kRelaxed});
    if (!store.ok())
      throw std::runtime_error("kvq-lib: open " + data_dir + ": " + store.status().to_string());
    auto opened = jobs::Jobs::open(*store);
    if (!opened.ok()) throw std::runtime_error("kvq-lib: " + opened.status().to_string());
    jobs_ = std::move(*opened);
  }
  void prepare() override {
    Status s = jobs_->set_type_timeout(kType, std::chrono::seconds(kTypeTimeoutSeconds));
    if (!s.ok()) throw std::runtime_error("kvq-lib: set the type timeout: " + s.to_string());
  }
  std::unique_ptr<QueueClient> connect() override {
    return std::make_unique<LibClient>(*jobs_, tag_);
  }
  int64_t commits() override { return lmdb_commits(data_dir_); }
  nlohmann::json stats() override {
    const kv::RetryCounts retries = kv::retry_counts();
    return {{"retries_conflict", retries.aborted}, {"retries_unavailable", retries.unavailable}};
  }

 private:
  std::string tag_;
  std::string data_dir_;
  std::unique_ptr<jobs::Jobs> jobs_;
};

}  // namespace

std::unique_ptr<QueueSystem> open_kvq_http(const std::string& address,
                                           const std::string& data_dir) {
  return std::make_unique<KvqHttp>(address, data_dir);
}

std::unique_ptr<QueueSystem> open_kvq_lib(const std::string& data_dir, bool durable) {
  return std::make_unique<KvqLib>(data_dir, durable);
}

}  // namespace kvq::peers
