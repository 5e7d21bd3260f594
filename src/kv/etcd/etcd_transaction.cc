#include "kv/etcd/etcd_transaction.h"

#include <algorithm>

#include "util/random.h"

namespace kvq::kv::etcd {
namespace {

constexpr int64_t kPage = 500;

// The rows a get_range of `options` asks etcd for at a time.
int64_t page_of(const RangeOptions& options) {
  return options.limit ? std::min<int64_t>(kPage, static_cast<int64_t>(options.limit) + 16) : kPage;
}

// The request for one page of [begin, end) (full keys), in key order or reverse.
etcdserverpb::RangeRequest page_request(std::string begin, std::string end, bool reverse,
                                        int64_t page) {
  etcdserverpb::RangeRequest request;
  request.set_key(std::move(begin));
  request.set_range_end(std::move(end));
  request.set_limit(page);
  request.set_sort_order(reverse ? etcdserverpb::RangeRequest::DESCEND
                                 : etcdserverpb::RangeRequest::ASCEND);
  request.set_sort_target(etcdserverpb::RangeRequest::KEY);
  return request;
}

// The stored keys of a range at one revision, fetched a page at a time.
class EtcdRangeSource : public RangeSource {
 public:
  EtcdRangeSource(
      std::function<Status(etcdserverpb::RangeRequest&, etcdserverpb::RangeResponse*)> fetch,
      std::string prefix, std::string begin, std::string end, bool reverse, int64_t page)
      : fetch_(std::move(fetch)),
        prefix_(std::move(prefix)),
        begin_(std::move(begin)),
        end_(std::move(end)),
        reverse_(reverse),
        page_(page) {}

  Status start() { return load(); }
  bool valid() const override { return index_ < rows_.kvs_size(); }
  std::string_view key() const override {
    return std::string_view(rows_.kvs(index_).key()).substr(prefix_.size());
  }
  std::string_view value() const override { return rows_.kvs(index_).value(); }
  int64_t mod_revision() const { return rows_.kvs(index_).mod_revision(); }
  Status next() override {
    if (++index_ < rows_.kvs_size() || !rows_.more()) return Status::OK();
    // Continue after the last key of this page.
    const std::string& last = rows_.kvs(rows_.kvs_size() - 1).key();
    if (reverse_)
      end_ = last;
    else
      begin_ = last + '\0';
    return load();
  }

 private:
  Status load() {
    etcdserverpb::RangeRequest request = page_request(begin_, end_, reverse_, page_);
    index_ = 0;
    return fetch_(request, &rows_);
  }

  std::function<Status(etcdserverpb::RangeRequest&, etcdserverpb::RangeResponse*)> fetch_;
  std::string prefix_, begin_, end_;
  bool reverse_;
  int64_t page_;
  etcdserverpb::RangeResponse rows_;
  int index_ = 0;
};

// What a store handle remembers of a value read (nullopt: absent).
std::optional<Remembered::Value> as_remembered(
    const std::optional<EtcdTransaction::Stored>& stored) {
  if (!stored) return std::nullopt;
  return Remembered::Value{stored->mod_revision, stored->value};
}

Status check_key(std::string_view key) {
  if (key.empty() || key.size() > kMaxKeySize) {
    return InvalidArgument("key of " + std::to_string(key.size()) + " bytes is outside 1.." +
                           std::to_string(kMaxKeySize));
  }
  return Status::OK();
}

}  // namespace

Status EtcdTransaction::range(etcdserverpb::RangeRequest& request,
                              etcdserverpb::RangeResponse* response) {
  if (committed_) return FailedPrecondition("the transaction has already committed");
  request.set_revision(revision_);
  // After the first read, which fixes revision_, a read at that revision asks for the same data
  // whichever member holds it: serializable spares it etcd's ReadIndex round. A member behind
  // revision_ (after a failover) refuses it as a future revision, which is kAborted: kv::run
  // starts the transaction over. The first read is linearizable unless the transaction allowed
  // a stale one (allow_stale_reads).
  request.set_serializable(revision_ != 0 || stale_ok_);
  auto page = prefetched_pages_.find(page_key(request));
  if (page != prefetched_pages_.end()) {
    if (defer_) {
      *response = page->second;  // kept: the body's next run reads it again
    } else {
      *response = std::move(page->second);
      prefetched_pages_.erase(page);
    }
    return Status::OK();
  }
  if (defer_) {
    deferred_pages_.push_back(request);
    return Unavailable("etcd: read deferred to the transaction's next round trip");
  }
  const int64_t floor = stale_first_read_floor();
  KVQ_RETURN_IF_ERROR(client_->range(request, response));
  if (response->header().revision() < floor) {
    request.set_serializable(false);
    KVQ_RETURN_IF_ERROR(client_->range(request, response));
  }
  remembered_->saw_revision(response->header().revision());
  if (revision_ == 0) revision_ = response->header().revision();
  return Status::OK();
}

Result<std::optional<EtcdTransaction::Stored>> EtcdTransaction::read_stored(std::string_view key) {
  KVQ_RETURN_IF_ERROR(check_key(key));
  if (committed_) return FailedPrecondition("the transaction has already committed");
  if (auto it = fetched_.find(key); it != fetched_.end()) return it->second;
  if (defer_) {
    deferred_keys_.emplace_back(key);
    return Unavailable("etcd: read deferred to the transaction's next round trip");
  }
  etcdserverpb::RangeRequest request;
  request.set_key(full(key));
  etcdserverpb::RangeResponse response;
  KVQ_RETURN_IF_ERROR(range(request, &response));
  std::optional<Stored> stored;
  if (response.kvs_size() > 0)
    stored = Stored{response.kvs(0).mod_revision(), response.kvs(0).value()};
  refresh_remembered(request.key(), stored);
  fetched_.emplace(std::string(key), stored);
  return stored;
}

void EtcdTransaction::record_read(std::string_view key, const std::optional<Stored>& stored) {
  // The first observation is what the commit must still find.
  reads_.try_emplace(std::string(key), stored ? stored->mod_revision : 0);
}

Result<std::optional<EtcdTransaction::Stored>> EtcdTransaction::guess(std::string_view key,
                                                                      const ReadOptions& options) {
  KVQ_RETURN_IF_ERROR(check_key(key));
  if (committed_) return FailedPrecondition("the transaction has already committed");
  if (auto it = fetched_.find(key); it != fetched_.end()) return it->second;
  std::optional<Stored> stored;
  if (!options.assume_absent) {
    const std::string full_key = full(key);
    auto known = remembered_->find(full_key);
    if (!known) {
      // Not seen yet: read it now, at this transaction's revision, and remember it (a read
      // deferred is remembered when fetched: take_read).
      if (defer_) to_remember_.insert(std::string(key));
      KVQ_ASSIGN_OR_RETURN(stored, read_stored(key));
      remembered_->remember(full_key, as_remembered(stored));
      return stored;
    }
    if (*known) stored = Stored{(*known)->mod_revision, std::move((*known)->value)};
  }
  fetched_.emplace(std::string(key), stored);
  guessed_.emplace_back(key);
  return stored;
}

void EtcdTransaction::refresh_remembered(const std::string& full_key,
                                         const std::optional<Stored>& stored) {
  remembered_->refresh(full_key, as_remembered(stored));
}

void EtcdTransaction::forget_guesses() {
  for (const auto& key : guessed_) remembered_->forget(full(key));
}

etcdserverpb::TxnRequest EtcdTransaction::guess_checks() const {
  // A Txn of compares alone writes nothing: etcd answers it as a read (no Raft proposal).
  etcdserverpb::TxnRequest request;
  for (const auto& key : guessed_) {
    if (auto read = reads_.find(key); read != reads_.end())
      compare_read(request, key, read->second);
  }
  return request;
}

Status EtcdTransaction::check_guesses() {
  if (guessed_.empty()) return Status::OK();
  etcdserverpb::TxnRequest request = guess_checks();
  etcdserverpb::TxnResponse response;
  Status status = client_->txn(request, &response);
  if (status.ok() && response.succeeded()) return Status::OK();
  forget_guesses();
  if (!status.ok()) return status;
  return Aborted("a key this transaction guessed holds something else");
}

Result<std::optional<std::string>> EtcdTransaction::get(std::string_view key, ReadOptions options) {
  if (auto buffered = buffer_.lookup(key)) return *buffered;
  if (guesses(options)) {
    // Checked at commit whatever `snapshot` says: that is what makes a guess safe.
    KVQ_ASSIGN_OR_RETURN(auto guessed, guess(key, options));
    record_read(key, guessed);
    if (!guessed) return std::optional<std::string>();
    return std::optional<std::string>(std::move(guessed->value));
  }
  KVQ_ASSIGN_OR_RETURN(auto stored, read_stored(key));
  if (!options.snapshot) record_read(key, stored);
  if (!stored) return std::optional<std::string>();
  return std::optional<std::string>(std::move(stored->value));
}

Result<EtcdTransaction::ReadPlan> EtcdTransaction::plan_read(
    const std::vector<std::string>& keys, std::vector<etcdserverpb::RangeRequest> pages) {
  if (committed_) return FailedPrecondition("the transaction has already committed");
  ReadPlan plan;
  for (const auto& key : keys) {
    if (buffer_.lookup(key)) continue;
    KVQ_RETURN_IF_ERROR(check_key(key));
    if (!fetched_.count(key) &&
        std::find(plan.keys.begin(), plan.keys.end(), key) == plan.keys.end())
      plan.keys.push_back(key);
  }
  for (const auto& key : plan.keys)
    plan.request.add_success()->mutable_request_range()->set_key(full(key));
  for (auto& page : pages) {
    PageKey key = page_key(page);
    // Prefetched already and not yet read: the read to come answers from that.
    if (prefetched_pages_.count(key) ||
        std::find(plan.pages.begin(), plan.pages.end(), key) != plan.pages.end())
      continue;
    plan.pages.push_back(std::move(key));
    *plan.request.add_success()->mutable_request_range() = std::move(page);
  }
  for (auto& op : *plan.request.mutable_success()) {
    // As range() says; a Txn of serializable reads is served by the member alone.
    op.mutable_request_range()->set_revision(revision_);
    op.mutable_request_range()->set_serializable(revision_ != 0 || stale_ok_);
  }
  plan.floor = stale_first_read_floor();
  return plan;
}

bool EtcdTransaction::behind_floor(ReadPlan& plan) {
  if (plan.response.header().revision() >= plan.floor) return false;
  for (auto& op : *plan.request.mutable_success())
    op.mutable_request_range()->set_serializable(false);
  plan.floor = 0;
  return true;
}

Status EtcdTransaction::take_read(ReadPlan& plan) {
  auto& response = plan.response;
  if (response.responses_size() != plan.request.success_size()) {
    return Unavailable("etcd: a read Txn answered " + std::to_string(response.responses_size()) +
                       " of " + std::to_string(plan.request.success_size()) + " ranges");
  }
  // A Txn without compares reads every range at one revision, the current one when
  // revision_ is still 0 (its header tells which).
  remembered_->saw_revision(response.header().revision());
  if (revision_ == 0) revision_ = response.header().revision();
  int i = 0;
  for (const auto& key : plan.keys) {
    const auto& rows = response.responses(i++).response_range();
    std::optional<Stored> stored;
    if (rows.kvs_size() > 0) stored = Stored{rows.kvs(0).mod_revision(), rows.kvs(0).value()};
    if (to_remember_.erase(key)) {
      remembered_->remember(full(key), as_remembered(stored));
    } else {
      refresh_remembered(full(key), stored);
    }
    fetched_.emplace(key, std::move(stored));
  }
  for (auto& page : plan.pages) {
    auto* rows = response.mutable_responses(i++)->mutable_response_range();
    rows->mutable_header()->set_revision(revision_);
    prefetched_pages_.insert_or_assign(std::move(page), std::move(*rows));
  }
  return Status::OK();
}

Status EtcdTransaction::fetch(const std::vector<std::string>& keys,
                              const std::vector<RangeRead>& ranges) {
  std::vector<etcdserverpb::RangeRequest> pages;
  for (const auto& r : ranges) {
    if (r.begin >= r.end) continue;
    pages.push_back(
        page_request(full(r.begin), full(r.end), r.options.reverse, page_of(r.options)));
  }
  KVQ_ASSIGN_OR_RETURN(ReadPlan plan, plan_read(keys, std::move(pages)));
  if (plan.request.success_size() == 0) return Status::OK();
  if (defer_) {
    deferred_keys_.insert(deferred_keys_.end(), plan.keys.begin(), plan.keys.end());
    for (size_t i = plan.keys.size(); i < static_cast<size_t>(plan.request.success_size()); ++i)
      deferred_pages_.push_back(plan.request.success(static_cast<int>(i)).request_range());
    return Unavailable("etcd: reads deferred to the transaction's next round trip");
  }
  if (plan.pages.empty() && plan.keys.size() == 1) return read_stored(plan.keys[0]).status();
  KVQ_RETURN_IF_ERROR(client_->txn(plan.request, &plan.response));
  if (behind_floor(plan)) KVQ_RETURN_IF_ERROR(client_->txn(plan.request, &plan.response));
  return take_read(plan);
}

void EtcdTransaction::fetch_deferred(std::function<void(Status)> done) {
  auto finished = called_back(std::move(done));
  deferred_version_ = false;
  auto planned = plan_read(std::exchange(deferred_keys_, {}), std::exchange(deferred_pages_, {}));
  if (!planned.ok()) return finished(planned.status());
  auto plan = std::make_shared<ReadPlan>(std::move(*planned));
  if (plan->request.success_size() == 0) {
    if (revision_ != 0) return finished(Status::OK());
    // Only the read version was asked for: any key's range says it.
    auto* only = plan->request.add_success()->mutable_request_range();
    only->set_key(full("\x01"));
    only->set_count_only(true);
    only->set_serializable(stale_ok_);
  }
  // take_read fixes revision_ from any answer (that range's included: it has no key or page).
  auto take = [this, plan, finished](Status status) mutable {
    if (!status.ok()) return finished(status);
    finished(take_read(*plan));
  };
  client_->txn_async(plan->request, &plan->response,
                     [this, plan, take = std::move(take)](Status status) mutable {
                       if (!status.ok() || !behind_floor(*plan)) return take(std::move(status));
                       client_->txn_async(plan->request, &plan->response, std::move(take));
                     });
}

std::function<void(Status)> EtcdTransaction::called_back(std::function<void(Status)> done) {
  callbacks_->started();
  return [callbacks = callbacks_, done = std::move(done)](Status status) mutable {
    callbacks->post([done = std::move(done), status = std::move(status)] { done(status); });
  };
}

void EtcdTransaction::restart() {
  reads_.clear();
  ranges_.clear();
  buffer_ = WriteBuffer();
  tokens_.clear();
  deferred_ = Status::OK();
  deferred_keys_.clear();
  deferred_pages_.clear();
  deferred_version_ = false;
}

Result<std::vector<std::optional<std::string>>> EtcdTransaction::get_many(
    const std::vector<std::string>& keys, ReadOptions options) {
  if (guesses(options)) return Transaction::get_many(keys, options);  // get() of each
  KVQ_RETURN_IF_ERROR(fetch(keys, {}));
  std::vector<std::optional<std::string>> values(keys.size());
  for (size_t i = 0; i < keys.size(); ++i) {
    if (auto buffered = buffer_.lookup(keys[i])) {
      values[i] = std::move(*buffered);
      continue;
    }
    const auto& stored = fetched_.find(keys[i])->second;
    if (!options.snapshot) record_read(keys[i], stored);
    if (stored) values[i] = stored->value;
  }
  return values;
}

void EtcdTransaction::prefetch(const std::vector<std::string>& keys,
                               const std::vector<RangeRead>& ranges, ReadOptions options) {
  // Snapshot: what it fetched is tracked by the read that uses it (get records the first
  // observation, from fetched_; get_range what it returns). A failure is the later reads' to
  // meet again.
  if (!guesses(options)) {
    (void)fetch(keys, ranges);
    return;
  }
  std::vector<std::string> unguessed;  // the keys the guessing reads will ask etcd for
  if (!options.assume_absent) {
    for (const auto& key : keys) {
      if (!remembered_->knows(full(key))) unguessed.push_back(key);
    }
  }
  (void)fetch(unguessed, ranges);
}

Result<std::vector<KeyValue>> EtcdTransaction::get_range(std::string_view begin,
                                                         std::string_view end,
                                                         RangeOptions options) {
  if (begin >= end) return std::vector<KeyValue>();
  const int64_t page = page_of(options);
  EtcdRangeSource stored([this](auto& request, auto* response) { return range(request, response); },
                         client_->prefix(), full(begin), full(end), options.reverse, page);
  KVQ_RETURN_IF_ERROR(stored.start());
  std::vector<std::pair<std::string, int64_t>> seen;
  KVQ_ASSIGN_OR_RETURN(auto merged, merge_range(stored, buffer_, begin, end, options, [&] {
                         seen.emplace_back(std::string(stored.key()), stored.mod_revision());
                       }));
  if (!options.snapshot) {
    // Insertions and changes show as a newer mod_revision in the covered part; deletions of
    // what was seen show in the per-key compares.
    for (auto& [key, mod] : seen) reads_.try_emplace(std::move(key), mod);
    ranges_.emplace_back(std::move(merged.covered_begin), std::move(merged.covered_end));
  }
  return std::move(merged.rows);
}

void EtcdTransaction::set(std::string_view key, std::string_view value) {
  if (Status s = check_key(key); !s.ok()) {
    if (deferred_.ok()) deferred_ = s;
    return;
  }
  if (value.size() > kMaxValueSize) {
    if (deferred_.ok()) {
      deferred_ = InvalidArgument("value of " + std::to_string(value.size()) + " bytes exceeds " +
                                  std::to_string(kMaxValueSize));
    }
    return;
  }
  buffer_.set(key, value);
}

void EtcdTransaction::clear(std::string_view key) {
  if (check_key(key).ok()) buffer_.clear(key);
}

void EtcdTransaction::clear_range(std::string_view begin, std::string_view end) {
  buffer_.clear_range(begin, end);
}

Status EtcdTransaction::add_read_conflict_key(std::string_view key) {
  KVQ_ASSIGN_OR_RETURN(auto stored, read_stored(key));
  record_read(key, stored);
  return Status::OK();
}

Result<Watch> EtcdTransaction::watch(std::string_view key) {
  auto read = read_stored(key);
  if (!read.ok() && read.status().code() == Code::kAborted) {
    // This transaction's revision was compacted, so the value it saw cannot be compared any
    // more: report a change at once and let the caller re-read (never miss one).
    auto fired = std::make_shared<detail::WatchState>();
    fired->complete(Status::OK());
    return Watch(std::move(fired));
  }
  KVQ_ASSIGN_OR_RETURN(auto stored, std::move(read));
  std::optional<std::string> expected;
  if (stored) expected = std::move(stored->value);
  return hub_->watch(full(key), std::move(expected), revision_ + 1);
}

Result<uint64_t> EtcdTransaction::read_version() {
  if (revision_ == 0 && !guessed_.empty() && remembered_->latest_revision() > 0) {
    // Reads may be stale here, and every guess is checked at commit: a revision this handle has
    // seen serves as well as a current one, without a call.
    revision_ = remembered_->latest_revision();
  }
  if (revision_ == 0 && defer_) {
    deferred_version_ = true;
    return Unavailable("etcd: read deferred to the transaction's next round trip");
  }
  if (revision_ == 0) {
    etcdserverpb::RangeRequest request;
    request.set_key(full("\x01"));  // any key: only the header's revision is wanted
    request.set_count_only(true);
    etcdserverpb::RangeResponse response;
    KVQ_RETURN_IF_ERROR(range(request, &response));
  }
  return static_cast<uint64_t>(revision_);
}

void EtcdTransaction::touch(std::string_view key) {
  const std::string value = util::random_hex(8);
  set(key, value);
  tokens_.insert_or_assign(std::string(key), value);
}

void EtcdTransaction::compare_read(etcdserverpb::TxnRequest& txn, const std::string& key,
                                   int64_t mod_revision) const {
  auto* compare = txn.add_compare();
  compare->set_key(full(key));
  compare->set_result(etcdserverpb::Compare::EQUAL);
  if (mod_revision == 0) {
    // An absent key has version 0, whether it never existed or was deleted.
    compare->set_target(etcdserverpb::Compare::VERSION);
    compare->set_version(0);
  } else {
    compare->set_target(etcdserverpb::Compare::MOD);
    compare->set_mod_revision(mod_revision);
  }
}

// etcd refuses a Txn that writes one key twice, so a cleared range is split around every key
// the transaction also sets or clears on its own; overlapping cleared ranges are merged.
Member EtcdTransaction::member() const {
  Member m;
  etcdserverpb::TxnRequest& txn = m.txn;
  for (const auto& [key, mod] : reads_) {
    compare_read(txn, key, mod);
    m.compared.push_back(Span::key(full(key)));
  }
  for (const auto& [begin, end] : ranges_) {
    auto* compare = txn.add_compare();
    compare->set_key(full(begin));
    compare->set_range_end(full(end));
    compare->set_target(etcdserverpb::Compare::MOD);
    compare->set_result(etcdserverpb::Compare::LESS);
    compare->set_mod_revision(revision_ + 1);
    m.compared.push_back(Span{full(begin), full(end)});
  }

  auto cleared = buffer_.cleared;
  std::sort(cleared.begin(), cleared.end());
  std::vector<std::pair<std::string, std::string>> merged;
  for (auto& r : cleared) {
    if (!merged.empty() && r.first <= merged.back().second) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(std::move(r));
    }
  }
  auto delete_range = [&](const std::string& begin, const std::string& end) {
    if (begin >= end) return;
    auto* del = txn.add_success()->mutable_request_delete_range();
    del->set_key(full(begin));
    del->set_range_end(full(end));
    m.written.push_back(Span{full(begin), full(end)});
  };
  for (const auto& [begin, end] : merged) {
    std::string from = begin;
    for (auto it = buffer_.writes.lower_bound(begin); it != buffer_.writes.end() && it->first < end;
         ++it) {
      delete_range(from, it->first);
      from = it->first + '\0';
    }
    delete_range(from, end);
  }
  for (const auto& [key, value] : buffer_.writes) {
    if (value) {
      if (auto token = tokens_.find(key); token != tokens_.end() && token->second == *value) {
        m.tokens.emplace_back(full(key), *value);
        continue;
      }
    }
    auto* op = txn.add_success();
    if (value) {
      op->mutable_request_put()->set_key(full(key));
      op->mutable_request_put()->set_value(*value);
    } else {
      op->mutable_request_delete_range()->set_key(full(key));
    }
    m.written.push_back(Span::key(full(key)));
  }
  return m;
}

Status EtcdTransaction::commit() {
  if (committed_) return FailedPrecondition("commit called twice");
  KVQ_RETURN_IF_ERROR(deferred_);
  if (buffer_.empty()) {
    KVQ_RETURN_IF_ERROR(read_version().status());
    KVQ_RETURN_IF_ERROR(check_guesses());
    committed_ = true;
    committed_revision_ = revision_;
    return Status::OK();
  }
  Member m = member();
  committed_ = true;
  if (batcher_) return settle(batcher_->commit(std::move(m)));
  fold_tokens(m);
  etcdserverpb::TxnResponse response;
  Status status = client_->txn(m.txn, &response);
  if (!status.ok()) return settle(status);
  return settle(Committed{response.succeeded(), response.header().revision()});
}

void EtcdTransaction::commit_async(std::function<void(Status)> done) {
  auto finished = called_back(std::move(done));
  if (committed_) return finished(FailedPrecondition("commit called twice"));
  if (!deferred_.ok()) return finished(deferred_);
  if (buffer_.empty()) return commit_read_only_async(std::move(finished));
  committed_ = true;
  if (batcher_) {
    return batcher_->commit_async(
        member(), [this, finished](Result<Committed> sent) mutable { finished(settle(sent)); });
  }
  struct Alone {
    Member member;
    etcdserverpb::TxnResponse response;
  };
  auto alone = std::make_shared<Alone>(Alone{member(), {}});
  fold_tokens(alone->member);
  client_->txn_async(
      alone->member.txn, &alone->response, [this, alone, finished](Status status) mutable {
        if (!status.ok()) return finished(settle(status));
        finished(
            settle(Committed{alone->response.succeeded(), alone->response.header().revision()}));
      });
}

void EtcdTransaction::commit_read_only_async(std::function<void(Status)> done) {
  if (revision_ == 0 && !guessed_.empty() && remembered_->latest_revision() > 0)
    revision_ = remembered_->latest_revision();  // as read_version
  if (revision_ == 0) {
    // Its read version first, fetched as a deferred one is.
    deferred_version_ = true;
    return fetch_deferred([this, done = std::move(done)](Status fetched) mutable {
      if (!fetched.ok()) return done(fetched);
      commit_read_only_async(std::move(done));
    });
  }
  auto succeed = [this, done](Status checked) mutable {
    if (checked.ok()) {
      committed_ = true;
      committed_revision_ = revision_;
    }
    done(std::move(checked));
  };
  if (guessed_.empty()) return succeed(Status::OK());
  struct Check {
    etcdserverpb::TxnRequest request;
    etcdserverpb::TxnResponse response;
  };
  auto check = std::make_shared<Check>(Check{guess_checks(), {}});
  client_->txn_async(check->request, &check->response,
                     [this, check, succeed](Status status) mutable {
                       if (status.ok() && check->response.succeeded()) return succeed(status);
                       forget_guesses();
                       if (!status.ok()) return succeed(status);
                       succeed(Aborted("a key this transaction guessed holds something else"));
                     });
}

Status EtcdTransaction::settle(const Result<Committed>& sent) {
  if (!sent.ok() || !sent->succeeded) {
    forget_guesses();
    if (!sent.ok()) return sent.status();
    return Aborted("a key this transaction read was changed by a later commit");
  }
  const Committed& outcome = *sent;
  remembered_->saw_revision(outcome.revision);
  for (const auto& [key, value] : buffer_.writes) {
    if (tokens_.count(key)) continue;
    if (std::find(guessed_.begin(), guessed_.end(), key) != guessed_.end()) {
      // Guessed (remembered, or assumed absent): what it holds now is this commit's.
      std::optional<Remembered::Value> stored;
      if (value) stored = Remembered::Value{outcome.revision, *value};
      remembered_->remember(full(key), std::move(stored));
    } else {
      remembered_->committed(full(key), value, outcome.revision);
    }
  }
  committed_revision_ = outcome.revision;
  return Status::OK();
}

}  // namespace kvq::kv::etcd
