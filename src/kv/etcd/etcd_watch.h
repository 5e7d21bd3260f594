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

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "kv/etcd/etcd_client.h"
#include "kv/watch_state.h"

namespace kvq::kv::etcd {

class WatchHub : public std::enable_shared_from_this<WatchHub> {
 public:
  explicit WatchHub(std::shared_ptr<Client> client) : client_(std::move(client)) {}
  ~WatchHub();

  // `key` is the full etcd key (prefix included).
  Result<Watch> watch(const std::string& key, std::optional<std::string> expected, int64_t start_revision);
  // The client left `endpoint` (Client::set_fail_over_listener): a stream on it moves too.
  void left_endpoint(size_t endpoint);

 private:
  struct Entry {
    std::string key;
    std::optional<std::string> expected;
    int64_t next_revision;
    std::shared_ptr<detail::WatchState> state;
  };
  using Stream = grpc::ClientReaderWriter<etcdserverpb::WatchRequest, etcdserverpb::WatchResponse>;

  void run();
  bool connect();
  void send_create(int64_t id, const Entry& entry);
  void send_cancel(int64_t id);
  void remove(int64_t id);
  void handle(const etcdserverpb::WatchResponse& response);
  void recover_compacted(int64_t id);

  std::shared_ptr<Client> client_;
  std::mutex mu_;  // entries_, stream_ writes
  std::condition_variable cv_;
  std::map<int64_t, Entry> entries_;
  int64_t next_id_ = 1;
  std::unique_ptr<grpc::ClientContext> context_;
  std::unique_ptr<etcdserverpb::Watch::Stub> stub_;
  std::unique_ptr<Stream> stream_;
  size_t stream_endpoint_ = 0;
  bool started_ = false;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace kvq::kv::etcd
