#include "kv/etcd/commit_batcher.h"

#include <map>
#include <optional>
#include <set>

namespace kvq::kv::etcd {

// A thread in drive(), woken only when one of its members is done or it may send a batch.
struct CommitBatcher::Waiter {
  util::CondVar cv;
};

struct CommitBatcher::Pending {
  Member member;
  size_t bytes = 0;
  Waiter* waiter = nullptr;
  bool done = false;
  std::optional<Result<Committed>> result;
};

namespace {

bool is_key(const Span& s) {
  return s.end.size() == s.begin.size() + 1 && s.end.back() == '\0' &&
         s.end.compare(0, s.begin.size(), s.begin) == 0;
}

// What the members of a batch compared, wrote and touched, for finding a newcomer's conflicts.
class Footprint {
 public:
  bool conflicts(const Member& m) const {
    for (const auto& s : m.compared) {
      if (hits(s, written_) || hits(s, tokens_)) return true;
    }
    for (const auto& s : m.written) {
      if (hits(s, compared_) || hits(s, written_) || hits(s, tokens_)) return true;
    }
    for (const auto& [key, value] : m.tokens) {
      const Span s = Span::key(key);
      if (hits(s, compared_) || hits(s, written_)) return true;
    }
    return false;
  }
  void add(const Member& m) {
    for (const auto& s : m.compared) compared_.add(s);
    for (const auto& s : m.written) written_.add(s);
    for (const auto& [key, value] : m.tokens) tokens_.add(Span::key(key));
  }
  // How many of m's tokens the batch does not write yet (each costs an outer operation).
  size_t new_tokens(const Member& m) const {
    size_t n = 0;
    for (const auto& [key, value] : m.tokens) n += tokens_.keys.count(key) ? 0 : 1;
    return n;
  }

 private:
  struct Spans {
    std::set<std::string, std::less<>> keys;
    std::vector<Span> ranges;
    void add(const Span& s) {
      if (is_key(s)) {
        keys.insert(s.begin);
      } else {
        ranges.push_back(s);
      }
    }
  };
  static bool hits(const Span& s, const Spans& spans) {
    if (auto it = spans.keys.lower_bound(s.begin); it != spans.keys.end() && *it < s.end)
      return true;
    for (const auto& r : spans.ranges) {
      if (r.begin < s.end && s.begin < r.end) return true;
    }
    return false;
  }
  Spans compared_, written_, tokens_;
};

bool refused(const Status& s) {
  return s.code() == Code::kInvalidArgument || s.code() == Code::kResourceExhausted;
}

}  // namespace

CommitBatcher::CommitBatcher(std::shared_ptr<Client> client, BatchLimits limits)
    : client_(std::move(client)), limits_(limits) {}

Result<Committed> CommitBatcher::commit(Member member) {
  Pending p;
  p.member = std::move(member);
  drive({&p});
  return std::move(*p.result);
}

std::vector<Result<Committed>> CommitBatcher::commit_together(std::vector<Member> members) {
  std::vector<Pending> pending(members.size());
  std::vector<Pending*> mine;
  for (size_t i = 0; i < members.size(); ++i) {
    pending[i].member = std::move(members[i]);
    mine.push_back(&pending[i]);
  }
  drive(mine);
  std::vector<Result<Committed>> out;
  for (auto& p : pending) out.push_back(std::move(*p.result));
  return out;
}

CommitBatcher::Counts CommitBatcher::counts() const {
  util::MutexLock lock(mu_);
  Counts counts = counts_;
  counts.under_way = sending_;
  return counts;
}

void CommitBatcher::drive(const std::vector<Pending*>& mine) {
  for (auto* p : mine) {
    p->bytes = p->member.txn.ByteSizeLong();
    for (const auto& [key, value] : p->member.tokens) p->bytes += key.size() + value.size() + 8;
  }
  Waiter self;
  util::MutexLock lock(mu_);
  for (auto* p : mine) {
    p->waiter = &self;
    queue_.push_back(p);
  }
  for (;;) {
    bool all_done = true;
    for (auto* p : mine) all_done = all_done && p->done;
    if (all_done) break;
    if (may_send()) {
      // Any waiting thread sends the next batch, its own members or not: whoever is free.
      std::vector<Pending*> batch = take_batch();
      const bool heavy = batch.size() > kLightBatch;
      ++sending_;
      heavy_sending_ += heavy ? 1 : 0;
      lock.unlock();
      send(batch);
      lock.lock();
      --sending_;
      heavy_sending_ -= heavy ? 1 : 0;
      continue;
    }
    self.cv.wait(mu_);
  }
  // Someone must send what is still queued: the oldest waiting commit's thread, if no batch
  // is under way to wake it when it ends.
  if (may_send()) queue_.front()->waiter->cv.notify_one();
}

bool CommitBatcher::may_send() const {
  if (queue_.empty()) return false;
  if (sending_ < limits_.in_flight) return true;
  // Light load: one more request, if every one under way and the next are light.
  return sending_ < limits_.in_flight + 1 && heavy_sending_ == 0 && queue_.size() <= kLightBatch;
}

std::vector<CommitBatcher::Pending*> CommitBatcher::take_batch() {
  std::vector<Pending*> batch;
  Footprint footprint;
  size_t ops = 0, bytes = 0;
  for (auto it = queue_.begin(); it != queue_.end() && batch.size() < limits_.max_members;) {
    Pending* p = *it;
    const size_t cost = 1 + footprint.new_tokens(p->member);
    if (!batch.empty()) {
      if (ops + cost > limits_.max_ops || bytes + p->bytes > limits_.max_bytes) {
        ++it;
        continue;
      }
      if (footprint.conflicts(p->member)) {
        ++counts_.kept_apart;
        ++it;
        continue;
      }
    }
    footprint.add(p->member);
    ops += cost;
    bytes += p->bytes;
    batch.push_back(p);
    it = queue_.erase(it);
  }
  return batch;
}

void fold_tokens(Member& member) {
  for (const auto& [key, value] : member.tokens) {
    auto* put = member.txn.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
  }
  member.tokens.clear();
}

Result<Committed> CommitBatcher::send_alone(Member& member) {
  fold_tokens(member);
  etcdserverpb::TxnResponse response;
  KVQ_RETURN_IF_ERROR(client_->txn(member.txn, &response));
  return Committed{response.succeeded(), response.header().revision()};
}

void CommitBatcher::send(const std::vector<Pending*>& batch) {
  std::vector<std::optional<Result<Committed>>> results(batch.size());
  uint64_t requests = 0;
  bool was_refused = false;
  if (batch.size() == 1) {
    results[0] = send_alone(batch[0]->member);
    requests = 1;
  } else {
    etcdserverpb::TxnRequest outer;
    std::map<std::string, std::string> tokens;
    for (auto* p : batch) {
      outer.add_success()->mutable_request_txn()->Swap(&p->member.txn);
      for (const auto& [key, value] : p->member.tokens) tokens.emplace(key, value);
    }
    for (const auto& [key, value] : tokens) {
      auto* put = outer.add_success()->mutable_request_put();
      put->set_key(key);
      put->set_value(value);
    }
    etcdserverpb::TxnResponse response;
    Status status = client_->txn(outer, &response);
    requests = 1;
    if (status.ok() && response.responses_size() < static_cast<int>(batch.size())) {
      status = UnknownResult("etcd: a batch of " + std::to_string(batch.size()) +
                             " commits was answered with " +
                             std::to_string(response.responses_size()) + " responses");
    }
    if (status.ok()) {
      for (size_t i = 0; i < batch.size(); ++i) {
        results[i] = Committed{response.responses(static_cast<int>(i)).response_txn().succeeded(),
                               response.header().revision()};
      }
    } else if (refused(status)) {
      // Refused before anything applied: each member goes again on its own, so a member that
      // itself breaks a limit gets its own refusal, and the others commit.
      was_refused = true;
      for (size_t i = 0; i < batch.size(); ++i) {
        batch[i]->member.txn.Swap(
            outer.mutable_success(static_cast<int>(i))->mutable_request_txn());
        results[i] = send_alone(batch[i]->member);
        ++requests;
      }
    } else {
      for (auto& r : results) r = status;
    }
  }
  util::MutexLock lock(mu_);
  counts_.requests += requests;
  counts_.members += batch.size();
  if (batch.size() > 1 && !was_refused) counts_.batched += batch.size();
  if (was_refused) ++counts_.refused;
  for (size_t i = 0; i < batch.size(); ++i) {
    batch[i]->result = std::move(results[i]);
    batch[i]->done = true;
    // Only the threads whose commits are done wake (once the lock is let go, a woken one may
    // return and take its Pending and Waiter with it). A notify_all of every waiting thread
    // after each batch cost a context switch per waiting commit.
    batch[i]->waiter->cv.notify_one();
  }
}

}  // namespace kvq::kv::etcd
