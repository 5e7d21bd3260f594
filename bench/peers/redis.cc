// bench/peers/redis.cc — Redis's "reliable queue" pattern through hiredis: LPUSH to add; BLMOVE
// from the queue's tail to a processing list to reserve, so a job a worker dies with is still
// in Redis; LREM from the processing list to acknowledge.
#include <hiredis/hiredis.h>

#include <cstring>
#include <string>
#include <vector>

#include "queue.h"

namespace kvq::peers {
namespace {

constexpr const char* kQueue = "bench:queue";
constexpr const char* kProcessing = "bench:processing";

class Reply {
 public:
  explicit Reply(void* reply) : reply_(static_cast<redisReply*>(reply)) {}
  ~Reply() {
    if (reply_) freeReplyObject(reply_);
  }
  Reply(const Reply&) = delete;
  Reply& operator=(const Reply&) = delete;
  redisReply* operator->() const { return reply_; }
  explicit operator bool() const { return reply_ != nullptr; }

 private:
  redisReply* reply_;
};

class RedisClient final : public QueueClient {
 public:
  explicit RedisClient(const std::string& address) {
    auto [host, port] = split_host_port(address);
    ctx_ = redisConnect(host.c_str(), port);
    if (ctx_ == nullptr || ctx_->err)
      throw std::runtime_error("redis: cannot connect to " + address + ": " +
                               (ctx_ ? ctx_->errstr : "out of memory"));
  }
  ~RedisClient() override { redisFree(ctx_); }

  void add(int64_t, const std::string& payload) override {
    count_request();
    Reply r(redisCommand(ctx_, "LPUSH %s %b", kQueue, payload.data(), payload.size()));
    check(r, "LPUSH");
  }

  bool reserve(Reserved& out, std::chrono::milliseconds wait) override {
    // BLMOVE's timeout 0 would block forever; a zero wait is a plain LMOVE.
    count_request();
    Reply r(wait.count() > 0 ? redisCommand(ctx_, "BLMOVE %s %s RIGHT LEFT %.3f", kQueue,
                                            kProcessing, wait.count() / 1000.0)
                             : redisCommand(ctx_, "LMOVE %s %s RIGHT LEFT", kQueue, kProcessing));
    check(r, "BLMOVE");
    if (r->type == REDIS_REPLY_NIL) return false;
    if (r->type != REDIS_REPLY_STRING)
      throw std::runtime_error("redis: BLMOVE: unexpected reply type");
    out.payload.assign(r->str, r->len);
    out.handle.clear();
    return true;
  }

  void finish(const Reserved& job) override {
    count_request();
    Reply r(
        redisCommand(ctx_, "LREM %s 1 %b", kProcessing, job.payload.data(), job.payload.size()));
    check(r, "LREM");
    if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
      throw std::runtime_error("redis: LREM removed nothing");
  }

  // One LPUSH of every payload: Redis's own call for many values.
  void add_batch(int64_t, const std::vector<std::string>& payloads) override {
    std::vector<const char*> argv = {"LPUSH", kQueue};
    std::vector<size_t> lens = {5, std::strlen(kQueue)};
    for (const auto& p : payloads) {
      argv.push_back(p.data());
      lens.push_back(p.size());
    }
    count_request();
    Reply r(redisCommandArgv(ctx_, static_cast<int>(argv.size()), argv.data(), lens.data()));
    check(r, "LPUSH");
  }

  // A pipeline of `max` LMOVEs (one round trip); when it took none, a BLMOVE waits for one.
  void reserve_batch(std::vector<Reserved>& out, size_t max,
                     std::chrono::milliseconds wait) override {
    out.clear();
    for (size_t i = 0; i < max; ++i)
      redisAppendCommand(ctx_, "LMOVE %s %s RIGHT LEFT", kQueue, kProcessing);
    count_request();
    for (size_t i = 0; i < max; ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK)
        throw std::runtime_error(std::string("redis: LMOVE: ") + ctx_->errstr);
      Reply r(raw);
      check(r, "LMOVE");
      if (r->type == REDIS_REPLY_STRING) out.push_back({"", "", std::string(r->str, r->len)});
    }
    if (!out.empty() || wait.count() == 0) return;
    Reserved one;
    if (reserve(one, wait)) out.push_back(std::move(one));
  }

  // A pipeline of LREMs: one round trip.
  void finish_batch(const std::vector<Reserved>& jobs) override {
    for (const auto& job : jobs)
      redisAppendCommand(ctx_, "LREM %s 1 %b", kProcessing, job.payload.data(), job.payload.size());
    count_request();
    for (size_t i = 0; i < jobs.size(); ++i) {
      void* raw = nullptr;
      if (redisGetReply(ctx_, &raw) != REDIS_OK)
        throw std::runtime_error(std::string("redis: LREM: ") + ctx_->errstr);
      Reply r(raw);
      check(r, "LREM");
      if (r->type != REDIS_REPLY_INTEGER || r->integer != 1)
        throw std::runtime_error("redis: LREM removed nothing");
    }
  }

  void command(const char* text) {
    Reply r(redisCommand(ctx_, text));
    check(r, text);
  }

 private:
  void check(const Reply& r, const char* what) {
    if (!r) throw std::runtime_error(std::string("redis: ") + what + ": " + ctx_->errstr);
    if (r->type == REDIS_REPLY_ERROR)
      throw std::runtime_error(std::string("redis: ") + what + ": " + r->str);
  }

  redisContext* ctx_ = nullptr;
};

class Redis final : public QueueSystem {
 public:
  explicit Redis(std::string address) : address_(std::move(address)) {}
  void prepare() override {
    RedisClient client(address_);
    client.command("DEL bench:queue bench:processing");
  }
  std::unique_ptr<QueueClient> connect() override {
    return std::make_unique<RedisClient>(address_);
  }

 private:
  std::string address_;
};

}  // namespace

std::unique_ptr<QueueSystem> open_redis(const std::string& address) {
  return std::make_unique<Redis>(address);
}

}  // namespace kvq::peers
