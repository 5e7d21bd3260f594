#include "kv/etcd/etcd_watch.h"

namespace kvq::kv::etcd {
namespace {

using namespace std::chrono_literals;
constexpr auto kReconnectPause = 100ms;

}  // namespace

WatchHub::~WatchHub() {
  std::vector<std::shared_ptr<detail::WatchState>> ending;
  {
    util::MutexLock lock(mu_);
    stopping_ = true;
    if (context_) context_->TryCancel();
    for (auto& [id, e] : entries_) ending.push_back(std::move(e.state));
    entries_.clear();
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  for (auto& s : ending) s->complete(Unavailable("the store was closed"));
}

Result<Watch> WatchHub::watch(const std::string& key, std::optional<std::string> expected,
                              int64_t start_revision) {
  auto state = std::make_shared<detail::WatchState>();
  int64_t id;
  {
    util::MutexLock lock(mu_);
    if (stopping_) return Unavailable("the store is closing");
    id = next_id_++;
    auto& entry = entries_[id] = Entry{key, std::move(expected), start_revision, state};
    if (stream_) send_create(id, entry);
    if (!started_) {
      started_ = true;
      thread_ = std::thread([this] { run(); });
    }
  }
  std::weak_ptr<WatchHub> weak = weak_from_this();
  state->unregister = [weak, id] {
    if (auto self = weak.lock()) self->remove(id);
  };
  return Watch(std::move(state));
}

void WatchHub::send_create(int64_t id, const Entry& entry) {
  etcdserverpb::WatchRequest request;
  auto* create = request.mutable_create_request();
  create->set_key(entry.key);
  create->set_start_revision(entry.next_revision);
  create->set_watch_id(id);
  stream_->Write(request);
}

void WatchHub::send_cancel(int64_t id) {
  if (!stream_) return;
  etcdserverpb::WatchRequest request;
  request.mutable_cancel_request()->set_watch_id(id);
  stream_->Write(request);
}

void WatchHub::remove(int64_t id) {
  util::MutexLock lock(mu_);
  if (entries_.erase(id)) send_cancel(id);
}

bool WatchHub::connect() {
  util::MutexLock lock(mu_);
  if (stopping_) return false;
  context_ = std::make_unique<grpc::ClientContext>();
  // Without it a member cut off from its leader would keep the stream open and silent.
  context_->AddMetadata("hasleader", "true");
  if (!client_->authorize(*context_).ok()) return true;  // no stream: run() pauses and retries
  stream_endpoint_ = client_->current();
  stub_ = etcdserverpb::Watch::NewStub(client_->channel(stream_endpoint_));
  stream_ = stub_->Watch(context_.get());
  for (const auto& [id, entry] : entries_) send_create(id, entry);
  return true;
}

void WatchHub::run() {
  while (connect()) {
    etcdserverpb::WatchResponse response;
    Stream* stream;
    {
      util::MutexLock lock(mu_);
      stream = stream_.get();  // only this thread replaces it
    }
    while (stream && stream->Read(&response)) handle(response);
    size_t endpoint;
    {
      util::MutexLock lock(mu_);
      endpoint = stream_endpoint_;
      if (stream_) {
        stream_->WritesDone();
        stream_->Finish().ok();  // the call has ended (Read returned false); collect it
        stream_.reset();
      }
      if (stopping_) return;
    }
    client_->fail_over(endpoint);
    util::MutexLock lock(mu_);
    const auto resume = std::chrono::steady_clock::now() + kReconnectPause;
    while (!stopping_) {
      if (!cv_.wait_until(mu_, resume)) break;
    }
  }
}

void WatchHub::left_endpoint(size_t endpoint) {
  util::MutexLock lock(mu_);
  // The calls found the member this stream is on unresponsive: a paused member keeps the
  // stream open and silent, so move it too (run() re-creates every watch on the next one).
  if (stream_ && context_ && stream_endpoint_ == endpoint) context_->TryCancel();
}

void WatchHub::handle(const etcdserverpb::WatchResponse& response) {
  const int64_t id = response.watch_id();
  if (response.canceled() && response.compact_revision() > 0) return recover_compacted(id);
  std::shared_ptr<detail::WatchState> fired;
  {
    util::MutexLock lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    for (const auto& event : response.events()) {
      it->second.next_revision = event.kv().mod_revision() + 1;
      std::optional<std::string> value;
      if (event.type() == mvccpb::Event::PUT) value = event.kv().value();
      if (value != it->second.expected) {
        fired = std::move(it->second.state);
        entries_.erase(it);
        send_cancel(id);
        break;
      }
    }
  }
  if (fired) fired->complete(Status::OK());
}

void WatchHub::recover_compacted(int64_t id) {
  std::string key;
  {
    util::MutexLock lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    key = it->second.key;
  }
  etcdserverpb::RangeRequest request;
  request.set_key(key);
  etcdserverpb::RangeResponse response;
  Status s = client_->range(request, &response);
  std::shared_ptr<detail::WatchState> fired;
  {
    util::MutexLock lock(mu_);
    auto it = entries_.find(id);
    if (it == entries_.end()) return;
    std::optional<std::string> value;
    if (s.ok() && response.kvs_size() > 0) value = response.kvs(0).value();
    if (!s.ok() || value != it->second.expected) {
      // Unreadable now: fire, so the caller re-reads (a spurious wake-up, never a lost one).
      fired = std::move(it->second.state);
      entries_.erase(it);
    } else {
      it->second.next_revision = response.header().revision() + 1;
      if (stream_) send_create(id, it->second);
    }
  }
  if (fired) fired->complete(Status::OK());
}

}  // namespace kvq::kv::etcd
