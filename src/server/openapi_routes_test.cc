// docs/openapi.yaml against the server's real route table: every (method, pattern) that
// add_api_routes registers is an operation of the file's `paths`, every operation there is a
// registered route, and an operation is public (`security: []`) exactly when its route is
// Router::Access::kPublic. The file is read by a tiny reader of the `paths` block's shape
// (two-space path keys, four-space method keys, six-space `security: []`);
// tests/e2e/test_openapi.py checks that this shape gives what a YAML parser reads.
#include <gtest/gtest.h>

#include <cctype>
#include <fstream>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>

#include "kvq/jobs.h"
#include "kvq/lmdb_store.h"
#include "kvq/workers.h"
#include "server/api.h"
#include "server/metrics.h"
#include "server/router.h"
#include "tests/support/temp_dir.h"

namespace kvq::server {
namespace {

using Operation = std::pair<std::string, std::string>;  // (method upper-case, path pattern)

size_t indent_of(const std::string& line) {
  const size_t n = line.find_first_not_of(' ');
  return n == std::string::npos ? line.size() : n;
}

// A mapping key on `line` at exactly `indent` spaces ("key:" or "'key':" / "\"key\":", nothing
// after the colon), or "" if the line is not one.
std::string key_at(const std::string& line, size_t indent) {
  if (indent_of(line) != indent || line.size() < indent + 2 || line.back() != ':') return "";
  std::string key = line.substr(indent, line.size() - indent - 1);
  if (key.size() >= 2 && (key.front() == '"' || key.front() == '\'') && key.back() == key.front())
    key = key.substr(1, key.size() - 2);
  return key;
}

std::string upper(std::string s) {
  for (auto& c : s) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return s;
}

// The operations of the file's `paths:` block, each mapped to whether it is public.
std::map<Operation, bool> read_operations(const std::string& file) {
  static const std::set<std::string> kMethods = {"get",  "put",     "post", "delete",
                                                 "head", "options", "patch"};
  std::ifstream in(file);
  EXPECT_TRUE(in.good()) << "cannot read " << file;
  std::map<Operation, bool> ops;
  bool in_paths = false;
  std::string path;
  const Operation* current = nullptr;
  std::string line;
  while (std::getline(in, line)) {
    while (!line.empty() && (line.back() == ' ' || line.back() == '\r')) line.pop_back();
    if (line.empty() || line[indent_of(line)] == '#') continue;
    if (indent_of(line) == 0) {
      in_paths = line == "paths:";
      current = nullptr;
      continue;
    }
    if (!in_paths) continue;
    if (auto key = key_at(line, 2); !key.empty()) {
      path = key;
      current = nullptr;
    } else if (auto method = key_at(line, 4); !method.empty()) {
      current = nullptr;
      if (kMethods.count(method)) {
        auto [it, added] = ops.emplace(Operation{upper(method), path}, false);
        EXPECT_TRUE(added) << method << " " << path << " appears twice";
        current = &it->first;
      }
    } else if (current && indent_of(line) == 6 && line.substr(6) == "security: []") {
      ops[*current] = true;
    }
  }
  return ops;
}

class OpenApiRoutesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto store = open_lmdb_store({.path = dir_.path(), .durability = Durability::kNoSync});
    ASSERT_TRUE(store.ok()) << store.status().to_string();
    store_ = *store;
    auto jobs = jobs::Jobs::open(store_);
    ASSERT_TRUE(jobs.ok()) << jobs.status().to_string();
    jobs_ = std::move(*jobs);
    auto workers = workers::Workers::open(store_);
    ASSERT_TRUE(workers.ok()) << workers.status().to_string();
    workers_ = std::move(*workers);
    api_.reset(new Api{*jobs_, *workers_, *store_, metrics_});  // an aggregate: no make_unique
    add_api_routes(router_, *api_);
  }

  // What the server registers, each mapped to whether it is public.
  std::map<Operation, bool> registered() const {
    std::map<Operation, bool> out;
    for (const auto& r : router_.routes()) {
      const bool added =
          out.emplace(Operation{r.method, r.pattern}, r.access == Router::Access::kPublic).second;
      EXPECT_TRUE(added) << r.method << " " << r.pattern << " is registered twice";
    }
    return out;
  }

  testing::TempDir dir_;
  std::shared_ptr<kv::Store> store_;
  std::unique_ptr<jobs::Jobs> jobs_;
  std::unique_ptr<workers::Workers> workers_;
  Metrics metrics_;
  std::unique_ptr<Api> api_;
  Router router_;
};

TEST_F(OpenApiRoutesTest, EveryRegisteredRouteIsDescribed) {
  const auto described = read_operations(KVQ_OPENAPI_FILE);
  const auto routes = registered();
  ASSERT_GT(routes.size(), 20u) << "add_api_routes registered too few routes to be the API";
  for (const auto& [op, is_public] : routes) {
    EXPECT_TRUE(described.count(op))
        << op.first << " " << op.second << " is served but not in docs/openapi.yaml";
  }
}

TEST_F(OpenApiRoutesTest, EveryDescribedOperationIsServed) {
  const auto described = read_operations(KVQ_OPENAPI_FILE);
  ASSERT_GT(described.size(), 20u) << "read too few operations from " << KVQ_OPENAPI_FILE;
  const auto routes = registered();
  for (const auto& [op, is_public] : described) {
    EXPECT_TRUE(routes.count(op)) << op.first << " " << op.second
                                  << " is in docs/openapi.yaml but no route serves it";
  }
}

TEST_F(OpenApiRoutesTest, PublicOperationsAreExactlyThePublicRoutes) {
  const auto described = read_operations(KVQ_OPENAPI_FILE);
  for (const auto& [op, is_public] : registered()) {
    auto it = described.find(op);
    if (it == described.end()) continue;  // reported by EveryRegisteredRouteIsDescribed
    EXPECT_EQ(it->second, is_public)
        << op.first << " " << op.second << ": the route is "
        << (is_public ? "public" : "behind the token") << " but docs/openapi.yaml says "
        << (it->second ? "`security: []`" : "it needs the bearer token");
  }
}

// The reader itself: it must see through comments, quotes and non-method keys.
TEST(OpenApiReaderTest, ReadsOnlyOperationsOfThePathsBlock) {
  testing::TempDir dir;
  const std::string file = dir.sub("spec.yaml");
  std::ofstream(file) << "openapi: 3.1.0\n"
                         "paths:\n"
                         "  # a comment\n"
                         "  /a/{x}:\n"
                         "    parameters:\n"
                         "      - $ref: '#/p'\n"
                         "    get:\n"
                         "      security: []\n"
                         "      responses: {}\n"
                         "    post:\n"
                         "      responses:\n"
                         "        '200':\n"
                         "          security: []\n"
                         "  \"/b\":\n"
                         "    delete:\n"
                         "      operationId: x\n"
                         "components:\n"
                         "  /c:\n"
                         "    get:\n"
                         "      security: []\n";
  const auto ops = read_operations(file);
  const std::map<Operation, bool> want = {
      {{"GET", "/a/{x}"}, true}, {{"POST", "/a/{x}"}, false}, {{"DELETE", "/b"}, false}};
  EXPECT_EQ(ops, want);
}

}  // namespace
}  // namespace kvq::server
