// workers/workers_impl.h — what a Workers is made of. The Core (store, keys, the registrations
// held) is shared by the Workers and every Registration it handed out, so a registration can
// still unregister after the Workers is gone. The Core owns no thread: the background loops
// belong to the Workers object and stop with it, so no loop can ever drop the last reference to
// something that owns it.
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <vector>

#include "util/mutex.h"
#include "workers/schema.h"

namespace kvq::workers {

class RegistrationImpl;

struct Core {
  Core(std::shared_ptr<kv::Store> s, WorkersOptions o)
      : store(std::move(s)),
        options(std::move(o)),
        keys(options.key_prefix),
        registry{keys, options.on_departure} {}

  std::shared_ptr<kv::Store> store;
  WorkersOptions options;
  Keys keys;
  Registry registry;
  std::atomic<uint64_t> heartbeats{0};
  util::Mutex mu;
  // The registrations this process holds, so registering one again returns it.
  std::map<std::pair<std::string, std::string>, std::weak_ptr<RegistrationImpl>> held
      KVQ_GUARDED_BY(mu);
};

class RegistrationImpl : public Registration {
 public:
  RegistrationImpl(std::shared_ptr<Core> core, std::string type, std::string id, std::string token,
                   Millis timeout)
      : core_(std::move(core)),
        type_(std::move(type)),
        id_(std::move(id)),
        token_(std::move(token)),
        timeout_(timeout) {}
  ~RegistrationImpl() override;

  const std::string& type() const override { return type_; }
  const std::string& id() const override { return id_; }
  Status unregister() override;
  bool lost() const override { return lost_.load(); }
  Status heartbeat() override;
  // One transaction heartbeating every registration in `batch` (all of one Core). A
  // registration found replaced or dead is marked lost without failing the others.
  static Status heartbeat_all(const std::vector<std::shared_ptr<RegistrationImpl>>& batch);

  bool active() const { return !lost_.load() && !unregistered_.load(); }
  Millis timeout() const { return timeout_; }

 private:
  std::shared_ptr<Core> core_;
  std::string type_, id_, token_;
  Millis timeout_;
  std::atomic<bool> lost_{false};
  std::atomic<bool> unregistered_{false};
};

}  // namespace kvq::workers
