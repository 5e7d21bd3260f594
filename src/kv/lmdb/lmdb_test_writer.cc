// A helper process for the LMDB tests: it opens a data directory and writes to it, printing
// each acknowledged step, so a test can kill it mid-write or run it beside itself.
//
//   lmdb_test_writer DIR count        increments "n" and "n_copy" together forever, printing
//                                     each acknowledged value
//   lmdb_test_writer DIR incr K ID    K idempotent increments of "n", then prints "done"
//   lmdb_test_writer DIR set KEY VAL  one write, then prints "done"
//   lmdb_test_writer DIR watch KEY    arms a watch on KEY (no safety-net poll for 60 s), prints
//                                     "armed", then "fired" when another process changes it
//   lmdb_test_writer DIR hold MODE    opens DIR with durability MODE and prints "open", then
//                                     keeps it open until killed; or prints the error, exits 1
//   lmdb_test_writer DIR unsynced K   opens DIR relaxed with no background sync for an hour,
//                                     writes keys u0..u<K-1> (one commit each), prints "done",
//                                     then waits to be killed: its commits are in the page cache
//                                     only, after the state its open recorded
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "kvq/kv.h"
#include "kvq/lmdb_store.h"

using namespace kvq;

namespace {

Status increment(kv::Store& store, const std::string& op) {
  return kv::run(store, [&](kv::Transaction& txn) -> Status {
    if (!op.empty()) {
      KVQ_ASSIGN_OR_RETURN(auto done, txn.get("ops/" + op));
      if (done) return Status::OK();
      txn.set("ops/" + op, "");
    }
    KVQ_ASSIGN_OR_RETURN(auto n, txn.get("n"));
    const std::string next = std::to_string(std::stoll(n.value_or("0")) + 1);
    txn.set("n", next);
    txn.set("n_copy", next);
    return Status::OK();
  });
}

int fail(const Status& s) {
  std::fprintf(stderr, "lmdb_test_writer: %s\n", s.to_string().c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) return 2;
  if (std::string(argv[2]) == "hold" && argc == 4) {
    auto mode = parse_durability(argv[3]);
    if (!mode) return 2;
    auto held = open_lmdb_store({.path = argv[1], .durability = *mode});
    std::printf("%s\n", held.ok() ? "open" : held.status().to_string().c_str());
    std::fflush(stdout);
    if (!held.ok()) return 1;
    for (;;) pause();
  }
  if (std::string(argv[2]) == "unsynced" && argc == 4) {
    auto store = open_lmdb_store({.path = argv[1],
                                  .durability = Durability::kRelaxed,
                                  .relaxed_sync_interval = std::chrono::hours(1)});
    if (!store.ok()) return fail(store.status());
    for (int i = 0; i < std::atoi(argv[3]); ++i) {
      Status s = kv::run(**store, [&](kv::Transaction& txn) {
        txn.set("u" + std::to_string(i), "unsynced");
        return Status::OK();
      });
      if (!s.ok()) return fail(s);
    }
    std::printf("done\n");
    std::fflush(stdout);
    for (;;) pause();
  }
  const std::string mode = argv[2];
  const auto safety_net = std::chrono::seconds(mode == "watch" ? 60 : 1);
  auto store = open_lmdb_store({.path = argv[1], .watch_poll_interval = safety_net});
  if (!store.ok()) return fail(store.status());
  if (mode == "count") {
    for (long long acked = 0;;) {
      if (Status s = increment(**store, ""); !s.ok()) return fail(s);
      std::printf("%lld\n", ++acked);
      std::fflush(stdout);
    }
  }
  if (mode == "incr" && argc == 5) {
    const int k = std::atoi(argv[3]);
    for (int i = 0; i < k; ++i) {
      if (Status s = increment(**store, std::string(argv[4]) + "-" + std::to_string(i)); !s.ok())
        return fail(s);
    }
  } else if (mode == "watch" && argc == 4) {
    auto txn = (*store)->begin();
    if (!txn.ok()) return fail(txn.status());
    auto watch = (*txn)->watch(argv[3]);
    if (!watch.ok()) return fail(watch.status());
    txn->reset();  // the watch stays armed; the read snapshot need not
    std::printf("armed\n");
    std::fflush(stdout);
    if (Status s = watch->wait_until(kv::Clock::now() + std::chrono::seconds(30)); !s.ok())
      return fail(s);
    std::printf("fired\n");
    return 0;
  } else if (mode == "set" && argc == 5) {
    Status s = kv::run(**store, [&](kv::Transaction& txn) {
      txn.set(argv[3], argv[4]);
      return Status::OK();
    });
    if (!s.ok()) return fail(s);
  } else {
    return 2;
  }
  std::printf("done\n");
  return 0;
}
