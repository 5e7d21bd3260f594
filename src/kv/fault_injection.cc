#include "kv/fault_injection.h"

#include <random>
#include <thread>

#include "util/mutex.h"

namespace kvq::kv {

// State shared by the store and the transactions it hands out (which may outlive it).
struct FaultInjectingStore::Shared {
  explicit Shared(const FaultOptions& options) : options(options), rng(options.seed) {}

  util::Mutex mu;
  FaultOptions options KVQ_GUARDED_BY(mu);
  std::mt19937_64 rng KVQ_GUARDED_BY(mu);
  FaultCounts counts KVQ_GUARDED_BY(mu);

  bool roll(double rate) KVQ_REQUIRES(mu) {
    if (rate <= 0) return false;
    return std::uniform_real_distribution<double>(0, 1)(rng) < rate;
  }
  std::chrono::microseconds read_latency() {
    util::MutexLock lock(mu);
    return options.read_latency;
  }
  void count_delayed_read() {
    util::MutexLock lock(mu);
    ++counts.delayed_reads;
  }
  void count_written_commit() {
    util::MutexLock lock(mu);
    ++counts.written_commits;
  }
  bool inject_unavailable() {
    util::MutexLock lock(mu);
    if (!roll(options.unavailable_rate)) return false;
    ++counts.unavailable;
    return true;
  }
};

namespace {

enum class CommitFault { kNone, kConflict, kUnavailable, kUnknownApplied, kUnknownNotApplied };

class FaultInjectingTransaction : public Transaction {
 public:
  FaultInjectingTransaction(std::unique_ptr<Transaction> inner,
                            std::shared_ptr<FaultInjectingStore::Shared> shared)
      : inner_(std::move(inner)), shared_(std::move(shared)) {}

  Result<std::optional<std::string>> get(std::string_view key, ReadOptions options) override {
    if (shared_->inject_unavailable()) return Unavailable("injected: store unavailable on read");
    const bool delayed = delay_first_read();
    auto result = inner_->get(key, options);
    if (delayed) shared_->count_delayed_read();
    return result;
  }
  Result<std::vector<KeyValue>> get_range(std::string_view begin, std::string_view end,
                                          RangeOptions options) override {
    if (shared_->inject_unavailable()) return Unavailable("injected: store unavailable on read");
    const bool delayed = delay_first_read();
    auto result = inner_->get_range(begin, end, options);
    if (delayed) shared_->count_delayed_read();
    return result;
  }
  void set(std::string_view key, std::string_view value) override {
    wrote_ = true;
    inner_->set(key, value);
  }
  void clear(std::string_view key) override {
    wrote_ = true;
    inner_->clear(key);
  }
  void touch(std::string_view key) override {
    wrote_ = true;
    inner_->touch(key);
  }
  bool allow_stale_reads() override { return inner_->allow_stale_reads(); }
  void clear_range(std::string_view begin, std::string_view end) override {
    wrote_ = true;
    inner_->clear_range(begin, end);
  }
  Status add_read_conflict_key(std::string_view key) override {
    const bool delayed = delay_first_read();
    Status s = inner_->add_read_conflict_key(key);
    if (delayed) shared_->count_delayed_read();
    return s;
  }
  Result<Watch> watch(std::string_view key) override {
    const bool delayed = delay_first_read();
    auto result = inner_->watch(key);
    if (delayed) shared_->count_delayed_read();
    return result;
  }
  Result<uint64_t> read_version() override {
    const bool delayed = delay_first_read();
    auto result = inner_->read_version();
    if (delayed) shared_->count_delayed_read();
    return result;
  }
  uint64_t committed_version() const override { return inner_->committed_version(); }

  Status commit() override {
    auto [fault, latency] = pick_fault();
    if (latency.count() > 0) std::this_thread::sleep_for(latency);
    switch (fault) {
      case CommitFault::kConflict: return Aborted("injected: commit conflict");
      case CommitFault::kUnavailable: return Unavailable("injected: store unavailable on commit");
      case CommitFault::kUnknownNotApplied: return UnknownResult("injected: commit result unknown");
      case CommitFault::kUnknownApplied: {
        Status s = commit_inner();
        return s.ok() ? UnknownResult("injected: commit result unknown (it applied)") : s;
      }
      case CommitFault::kNone: break;
    }
    return commit_inner();
  }

 private:
  std::pair<CommitFault, std::chrono::microseconds> pick_fault() {
    util::MutexLock lock(shared_->mu);
    auto& o = shared_->options;
    auto& c = shared_->counts;
    CommitFault fault = CommitFault::kNone;
    if (shared_->roll(o.conflict_rate)) {
      ++c.conflicts;
      fault = CommitFault::kConflict;
    } else if (shared_->roll(o.unavailable_rate)) {
      ++c.unavailable;
      fault = CommitFault::kUnavailable;
    } else if (shared_->roll(o.unknown_result_rate)) {
      const bool applied = shared_->roll(0.5);
      ++(applied ? c.unknown_applied : c.unknown_not_applied);
      fault = applied ? CommitFault::kUnknownApplied : CommitFault::kUnknownNotApplied;
    }
    return {fault, o.commit_latency};
  }

  Status commit_inner() {
    Status s = inner_->commit();
    if (s.ok() && wrote_) shared_->count_written_commit();
    return s;
  }

  // Sleeps read_latency before the transaction's first read, which (on both backends) is the
  // one that fixes its read version; returns whether it slept.
  bool delay_first_read() {
    if (read_) return false;
    read_ = true;
    const auto latency = shared_->read_latency();
    if (latency.count() <= 0) return false;
    std::this_thread::sleep_for(latency);
    return true;
  }

  std::unique_ptr<Transaction> inner_;
  std::shared_ptr<FaultInjectingStore::Shared> shared_;
  bool read_ = false;
  bool wrote_ = false;  // set, clear, touch or clear_range: its commit counts as written
};

}  // namespace

FaultInjectingStore::FaultInjectingStore(std::shared_ptr<Store> inner, FaultOptions options)
    : shared_(std::make_shared<Shared>(options)), inner_(std::move(inner)) {}

FaultInjectingStore::~FaultInjectingStore() = default;

Result<std::unique_ptr<Transaction>> FaultInjectingStore::begin() {
  if (shared_->inject_unavailable()) return Unavailable("injected: store unavailable on begin");
  KVQ_ASSIGN_OR_RETURN(auto txn, inner_->begin());
  return std::unique_ptr<Transaction>(
      std::make_unique<FaultInjectingTransaction>(std::move(txn), shared_));
}

std::string FaultInjectingStore::describe() const { return "faults(" + inner_->describe() + ")"; }

FaultCounts FaultInjectingStore::counts() const {
  util::MutexLock lock(shared_->mu);
  return shared_->counts;
}

void FaultInjectingStore::set_options(const FaultOptions& options) {
  util::MutexLock lock(shared_->mu);
  shared_->options = options;
}

}  // namespace kvq::kv
