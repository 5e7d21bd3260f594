// kv/etcd/etcd_watch.h — every kv::Watch of one etcd store, multiplexed over one etcd watch
// stream (not one stream per waiter).
//
// A watch starts at its transaction's read revision + 1 and fires on the first event that
// leaves the key with a value other than the one the transaction read. If etcd compacted the
// history it needs, the key is re-read now instead (fire if it differs, else watch on from the
// current revision), so compaction never hides a change. If the stream breaks (a member died,
// the connection dropped, or the calls left its member for not answering), it is re-opened — on
// the next endpoint — and every watch re-created from the revision after the last event it saw.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "kv/etcd/etcd_client.h"
#include "kv/watch_state.h"
#include "util/mutex.h"

namespace kvq::kv::etcd {

class WatchHub : public std::enable_shared_from_this<WatchHub> {
 public:
  explicit WatchHub(std::shared_ptr<Client> client) : client_(std::move(client)) {}
  ~WatchHub();

  // `key` is the full etcd key (prefix included).
  Result<Watch> watch(const std::string& key, std::optional<std::string> expected,
                      int64_t start_revision) KVQ_EXCLUDES(mu_);
  // The client left `endpoint` (Client::set_fail_over_listener): a stream on it moves too.
  void left_endpoint(size_t endpoint) KVQ_EXCLUDES(mu_);

 private:
  struct Entry {
    std::string key;
    std::optional<std::string> expected;
    int64_t next_revision;
    std::shared_ptr<detail::WatchState> state;
  };
  using Stream = grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>;

  void run() KVQ_EXCLUDES(mu_);
  bool connect() KVQ_EXCLUDES(mu_);
  void send_create(int64_t id, const Entry& entry) KVQ_REQUIRES(mu_);
  void send_cancel(int64_t id) KVQ_REQUIRES(mu_);
  void remove(int64_t id) KVQ_EXCLUDES(mu_);
  void handle(const etcdserverpb::WatchResponse& response) KVQ_EXCLUDES(mu_);
  void recover_compacted(int64_t id) KVQ_EXCLUDES(mu_);

  std::shared_ptr<Client> client_;
  util::Mutex mu_;
  util::CondVar cv_;
  std::map<int64_t, Entry> entries_ KVQ_GUARDED_BY(mu_);
  int64_t next_id_ KVQ_GUARDED_BY(mu_) = 1;
  std::unique_ptr<grpc::ClientContext> context_ KVQ_GUARDED_BY(mu_);
  std::unique_ptr<etcdserverpb::Watch::Stub> stub_ KVQ_GUARDED_BY(mu_);
  // Set and reset (under mu_) only by run()'s thread, which reads from it without mu_ while
  // others write to it with mu_ held (gRPC allows one reader and one writer at a time).
  std::unique_ptr<Stream> stream_ KVQ_GUARDED_BY(mu_);
  size_t stream_endpoint_ KVQ_GUARDED_BY(mu_) = 0;
  bool started_ KVQ_GUARDED_BY(mu_) = false;
  bool stopping_ KVQ_GUARDED_BY(mu_) = false;
  std::thread thread_ KVQ_GUARDED_BY(mu_);
};

}  // namespace kvq::kv::etcd
