// cli/commands_batches.cc — kvq batch (put, seal, get): batches whose callback job is added
// once every member has ended (kvq/workflows.h).
#include <cstdio>
#include <iostream>
#include <string_view>

#include "commands.h"
#include "invocation.h"
#include "output.h"
#include "requests.h"

namespace kvq::cli {
namespace {

using Json = nlohmann::json;

constexpr char kBatchUsage[] =
    "usage: kvq batch put B --callback-type TYPE --callback-id ID [--data JSON]\n"
    "                       [--on complete|success]\n"
    "       kvq batch seal B\n"
    "       kvq batch get B\n"
    "\n"
    "A batch groups jobs (kvq add --batch B) and adds one callback job once it is sealed and\n"
    "every member has ended: exactly once, however many servers, with its data's field\n"
    "\"batch\" holding the members' counts by outcome and the dead ones' ids.\n"
    "  put B ...   creates batch B, or changes the callback of an unsealed one. --data: the\n"
    "              callback's data (a JSON object, default {}; - reads standard input). --on:\n"
    "              complete (the default: whatever the outcomes) or success (only if every\n"
    "              member succeeded; else the batch settles without a callback)\n"
    "  seal B      no more jobs may join B; if all its members have ended (or it has none) the\n"
    "              callback is added now\n"
    "  get B       prints the batch: its state (open, sealed, fired, skipped) and counts\n";

// A batch (GET /v1/batches/{id}) as key: value lines.
std::string format_batch(const Json& b) {
  const Json callback = value_of(b, "callback", Json::object());
  const Json counts = value_of(b, "counts", Json::object());
  return format_key_values({
      {"id", cell(b, "id")},
      {"state", cell(b, "state")},
      {"on", cell(b, "on")},
      {"callback", cell(callback, "type") + "/" + cell(callback, "id")},
      {"callback_data", compact(value_of(callback, "data", Json::object()))},
      {"members", cell(counts, "members")},
      {"unfinished", cell(counts, "unfinished")},
      {"succeeded", cell(counts, "succeeded")},
      {"dead", cell(counts, "dead")},
      {"cancelled", cell(counts, "cancelled")},
      {"settled_at", time_cell(value_of(b, "settled_at", Json()))},
  });
}

int print_batch(const Invocation& inv, const Response& r) {
  if (inv.json) {
    print_json(r.body);
  } else {
    std::fputs(format_batch(r.body).c_str(), stdout);
  }
  return kExitOk;
}

int run_batch_put(int argc, char** argv) {
  auto begun = begin_command(
      argc, argv, "batch put", kBatchUsage,
      {{"callback-type", true}, {"callback-id", true}, {"data", true}, {"on", true}}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  auto body = batch_body(inv.args, std::cin);
  if (!body.ok()) return inv.usage_error(body.status().message());
  Response r = inv.client->put(path("/v1/batches", {inv.args.positional[0]}), *body);
  if (!r.ok()) return inv.fail(r);
  return print_batch(inv, r);
}

int run_batch_seal(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "batch seal", kBatchUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r =
      inv.client->post(path("/v1/batches", {inv.args.positional[0], "seal"}), Json::object());
  if (!r.ok()) return inv.fail(r);
  return print_batch(inv, r);
}

int run_batch_get(int argc, char** argv) {
  auto begun = begin_command(argc, argv, "batch get", kBatchUsage, {}, 1, 1);
  if (!begun.invocation) return begun.exit_code;
  const Invocation& inv = *begun.invocation;
  Response r = inv.client->get(path("/v1/batches", {inv.args.positional[0]}));
  if (!r.ok()) return inv.fail(r);
  return print_batch(inv, r);
}

}  // namespace

int run_batch(int argc, char** argv) {
  if (argc >= 2) {
    const std::string_view sub = argv[1];
    if (sub == "put") return run_batch_put(argc - 1, argv + 1);
    if (sub == "seal") return run_batch_seal(argc - 1, argv + 1);
    if (sub == "get") return run_batch_get(argc - 1, argv + 1);
  }
  // Anything else: --help prints the usage, the rest is a usage error naming what was given.
  auto begun = begin_command(argc, argv, "batch", kBatchUsage, {}, 0, 0);
  if (!begun.invocation) return begun.exit_code;
  return begun.invocation->usage_error("give a subcommand: put, seal or get");
}

}  // namespace kvq::cli
