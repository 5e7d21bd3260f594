#include "kvq/lmdb_store.h"
#include "kv/lmdb/durability.h"
#include "kv/lmdb/lmdb_env.h"
#include "kv/lmdb/lmdb_transaction.h"

namespace kvq {
namespace {

class LmdbStore : public kv::Store {
 public:
  explicit LmdbStore(std::shared_ptr<kv::lmdb::Env> env) : env_(std::move(env)) {}

  Result<std::unique_ptr<kv::Transaction>> begin() override {
    return std::unique_ptr<kv::Transaction>(std::make_unique<kv::lmdb::LmdbTransaction>(env_));
  }

  std::string describe() const override {
    return "lmdb:" + env_->path() + " (" + durability_name(env_->options().durability) + ")";
  }

  // Reads come from the map, and commit_async leaves any fsync to the durability tracker.
  bool nonblocking() const override { return true; }

  Status check_health() override {
    KVQ_RETURN_IF_ERROR(env_->write_health());
    return kv::Store::check_health();
  }

 private:
  std::shared_ptr<kv::lmdb::Env> env_;
};

}  // namespace

Result<std::shared_ptr<kv::Store>> open_lmdb_store(const LmdbOptions& options) {
  if (options.initial_map_size < (uint64_t{1} << 20)) {
    return InvalidArgument("initial_map_size must be at least 1 MiB");
  }
  if (options.max_group_size == 0) return InvalidArgument("max_group_size must be at least 1");
  KVQ_ASSIGN_OR_RETURN(auto env, kv::lmdb::Env::open(options));
  return std::shared_ptr<kv::Store>(std::make_shared<LmdbStore>(std::move(env)));
}

}  // namespace kvq
