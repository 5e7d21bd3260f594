#include "kv/etcd/commit_batcher.h"

#include <atomic>
#include <map>
#include <optional>
#include <set>

namespace kvq::kv::etcd {

// A thread in commit() or commit_together(), woken when one of its members is done.
struct CommitBatcher::Waiter {
  util::CondVar cv;
};

// A commit waiting for its outcome: a thread's (`waiter`, on its stack) or commit_async's
// (`done`, on the heap, deleted once done has been called).
struct CommitBatcher::Pending {
  Member member;
  size_t bytes = 0;
  Waiter* waiter = nullptr;
  std::function<void(Result<Committed>)> done;
  bool finished = false;
  std::optional<Result<Committed>> result;
};

// One request under way: its members, the outer Txn that holds them (or none: sent alone),
// and the outcome of each.
struct CommitBatcher::Request {
  std::vector<Pending*> members;
  etcdserverpb::TxnRequest outer;
  etcdserverpb::TxnResponse response;
  std::vector<etcdserverpb::TxnResponse> alone;  // the responses of members sent on their own
  std::vector<std::optional<Result<Committed>>> results;
  uint64_t requests = 0;
  bool refused = false;
  std::atomic<size_t> left{0};  // members sent alone still unanswered
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
  enqueue({&p});
  return std::move(*p.result);
}

std::vector<Result<Committed>> CommitBatcher::commit_together(std::vector<Member> members) {
  std::vector<Pending> pending(members.size());
  std::vector<Pending*> mine;
  for (size_t i = 0; i < members.size(); ++i) {
    pending[i].member = std::move(members[i]);
    mine.push_back(&pending[i]);
  }
  enqueue(mine);
  std::vector<Result<Committed>> out;
  for (auto& p : pending) out.push_back(std::move(*p.result));
  return out;
}

void CommitBatcher::commit_async(Member member, std::function<void(Result<Committed>)> done) {
  auto* p = new Pending;
  p->member = std::move(member);
  p->done = std::move(done);
  enqueue({p});
}

CommitBatcher::Counts CommitBatcher::counts() const {
  util::MutexLock lock(mu_);
  Counts counts = counts_;
  counts.under_way = sending_;
  return counts;
}

void CommitBatcher::enqueue(const std::vector<Pending*>& mine) {
  Waiter self;
  bool waits = false;
  for (auto* p : mine) {
    p->bytes = p->member.txn.ByteSizeLong();
    for (const auto& [key, value] : p->member.tokens) p->bytes += key.size() + value.size() + 8;
    if (!p->done) {
      p->waiter = &self;
      waits = true;
    }
  }
  util::MutexLock lock(mu_);
  for (auto* p : mine) queue_.push_back(p);
  pump();
  if (!waits) return;
  for (;;) {
    bool all_done = true;
    for (auto* p : mine) all_done = all_done && p->finished;
    if (all_done) return;
    self.cv.wait(mu_);
  }
}

void CommitBatcher::pump() {
  while (may_send()) {
    std::vector<Pending*> batch = take_batch();
    const bool heavy = batch.size() > kLightBatch;
    ++sending_;
    heavy_sending_ += heavy ? 1 : 0;
    // Unlocked: a request that cannot start ends at once, on this thread, in ended().
    mu_.unlock();
    send(std::move(batch));
    mu_.lock();
  }
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

void CommitBatcher::send_alone(const std::shared_ptr<Request>& request, size_t i) {
  Member& member = request->members[i]->member;
  fold_tokens(member);
  client_->txn_async(member.txn, &request->alone[i], [this, request, i](Status status) {
    if (status.ok()) {
      request->results[i] =
          Committed{request->alone[i].succeeded(), request->alone[i].header().revision()};
    } else {
      request->results[i] = std::move(status);
    }
    if (request->left.fetch_sub(1) == 1) ended(*request);
  });
}

void CommitBatcher::send(std::vector<Pending*> batch) {
  auto request = std::make_shared<Request>();
  request->members = std::move(batch);
  const size_t n = request->members.size();
  request->results.resize(n);
  if (n == 1) {
    request->requests = 1;
    request->left = 1;
    request->alone.resize(1);
    return send_alone(request, 0);
  }
  std::map<std::string, std::string> tokens;
  for (auto* p : request->members) {
    request->outer.add_success()->mutable_request_txn()->Swap(&p->member.txn);
    for (const auto& [key, value] : p->member.tokens) tokens.emplace(key, value);
  }
  for (const auto& [key, value] : tokens) {
    auto* put = request->outer.add_success()->mutable_request_put();
    put->set_key(key);
    put->set_value(value);
  }
  request->requests = 1;
  client_->txn_async(request->outer, &request->response, [this, request, n](Status status) {
    const auto& response = request->response;
    if (status.ok() && response.responses_size() < static_cast<int>(n)) {
      status =
          UnknownResult("etcd: a batch of " + std::to_string(n) + " commits was answered with " +
                        std::to_string(response.responses_size()) + " responses");
    }
    if (status.ok()) {
      for (size_t i = 0; i < n; ++i) {
        request->results[i] =
            Committed{response.responses(static_cast<int>(i)).response_txn().succeeded(),
                      response.header().revision()};
      }
    } else if (refused(status)) {
      // Refused before anything applied: each member goes again on its own, so a member that
      // itself breaks a limit gets its own refusal, and the others commit.
      request->refused = true;
      request->requests += n;
      request->left = n;
      request->alone.resize(n);  // before any is sent: their callbacks index it
      for (size_t i = 0; i < n; ++i) {
        request->members[i]->member.txn.Swap(
            request->outer.mutable_success(static_cast<int>(i))->mutable_request_txn());
      }
      for (size_t i = 0; i < n; ++i) send_alone(request, i);
      return;
    } else {
      for (auto& r : request->results) r = status;
    }
    ended(*request);
  });
}

void CommitBatcher::ended(Request& request) {
  const size_t n = request.members.size();
  std::vector<Pending*> called;  // commit_async's members, told after the lock is let go
  {
    util::MutexLock lock(mu_);
    counts_.requests += request.requests;
    counts_.members += n;
    if (n > 1 && !request.refused) counts_.batched += n;
    if (request.refused) ++counts_.refused;
    --sending_;
    heavy_sending_ -= n > kLightBatch ? 1 : 0;
    for (size_t i = 0; i < n; ++i) {
      Pending* p = request.members[i];
      p->result = std::move(request.results[i]);
      if (p->done) {
        called.push_back(p);
        continue;
      }
      p->finished = true;
      // Only the threads whose commits are done wake (once the lock is let go, a woken one may
      // return and take its Pending and Waiter with it). A notify_all of every waiting thread
      // after each request cost a context switch per waiting commit.
      p->waiter->cv.notify_one();
    }
    // The next request starts as this one ends, from this thread.
    pump();
  }
  for (Pending* p : called) {
    p->done(std::move(*p->result));
    delete p;
  }
}

}  // namespace kvq::kv::etcd
