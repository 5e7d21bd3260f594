// bench/peers/postgres.cc — the PostgreSQL job table users build with SELECT ... FOR UPDATE SKIP
// LOCKED, through libpq with prepared statements: INSERT to add (with a NOTIFY, so idle workers
// wake at once instead of polling), an UPDATE of the first unlocked pending row to reserve, a
// DELETE to acknowledge. Every statement is its own transaction (autocommit).
#include <libpq-fe.h>
#include <poll.h>

#include <algorithm>
#include <string>

#include "queue.h"

namespace kvq::peers {
namespace {

constexpr const char* kSchema = R"sql(
CREATE TABLE IF NOT EXISTS bench_jobs (
  id          bigserial PRIMARY KEY,
  state       smallint NOT NULL DEFAULT 0,   -- 0 pending, 1 running
  payload     jsonb NOT NULL,
  created_at  timestamptz NOT NULL DEFAULT now(),
  reserved_at timestamptz
);
CREATE INDEX IF NOT EXISTS bench_jobs_pending ON bench_jobs (id) WHERE state = 0;
TRUNCATE bench_jobs;
)sql";

constexpr const char* kAdd =
    "WITH job AS (INSERT INTO bench_jobs (payload) VALUES ($1::jsonb) RETURNING id) "
    "SELECT pg_notify('bench_jobs', '') FROM job";
constexpr const char* kReserve =
    "UPDATE bench_jobs SET state = 1, reserved_at = now() WHERE id = ("
    "SELECT id FROM bench_jobs WHERE state = 0 ORDER BY id FOR UPDATE SKIP LOCKED LIMIT 1) "
    "RETURNING id, payload::text";
constexpr const char* kFinish = "DELETE FROM bench_jobs WHERE id = $1::bigint";

std::string conninfo(const std::string& address) {
  auto [host, port] = split_host_port(address);
  // Warnings only: the schema's IF NOT EXISTS notices would clutter the benchmark's output.
  return "host=" + host + " port=" + std::to_string(port) +
         " dbname=postgres user=postgres options='-c client_min_messages=warning'";
}

class Result {
 public:
  explicit Result(PGresult* r) : r_(r) {}
  ~Result() { PQclear(r_); }
  Result(const Result&) = delete;
  Result& operator=(const Result&) = delete;
  PGresult* get() const { return r_; }

 private:
  PGresult* r_;
};

class PgClient final : public QueueClient {
 public:
  // A worker connection; `admin` only connects (for the schema, which the statements need).
  PgClient(const std::string& address, bool admin) {
    conn_ = PQconnectdb(conninfo(address).c_str());
    if (PQstatus(conn_) != CONNECTION_OK) fail("connect to " + address);
    if (admin) return;
    exec("LISTEN bench_jobs");
    prepare_statement("add", kAdd, 1);
    prepare_statement("reserve", kReserve, 0);
    prepare_statement("finish", kFinish, 1);
  }
  ~PgClient() override { PQfinish(conn_); }

  PGconn* connection() const { return conn_; }

  void exec(const char* sql) {
    Result r(PQexec(conn_, sql));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK && PQresultStatus(r.get()) != PGRES_TUPLES_OK)
      fail(sql);
  }

  void add(int64_t, const std::string& payload) override {
    const char* params[] = {payload.c_str()};
    count_request();
    Result r(PQexecPrepared(conn_, "add", 1, params, nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) fail("add");
  }

  bool reserve(Reserved& out, std::chrono::milliseconds wait) override {
    const auto deadline = std::chrono::steady_clock::now() + wait;
    for (;;) {
      {
        count_request();
        Result r(PQexecPrepared(conn_, "reserve", 0, nullptr, nullptr, nullptr, 0));
        if (PQresultStatus(r.get()) != PGRES_TUPLES_OK) fail("reserve");
        if (PQntuples(r.get()) == 1) {
          out.handle = PQgetvalue(r.get(), 0, 0);
          out.payload = PQgetvalue(r.get(), 0, 1);
          return true;
        }
      }
      // A notification that came in while the query ran may announce a row it could not see yet.
      if (drain_notifications() > 0) continue;
      const auto now = std::chrono::steady_clock::now();
      if (now >= deadline) return false;
      const auto left =
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - now).count();
      pollfd p{PQsocket(conn_), POLLIN, 0};
      ::poll(&p, 1, static_cast<int>(std::min<long>(left + 1, 100)));
      if (PQconsumeInput(conn_) == 0) fail("wait for a notification");
      drain_notifications();
    }
  }

  void finish(const Reserved& job) override {
    const char* params[] = {job.handle.c_str()};
    count_request();
    Result r(PQexecPrepared(conn_, "finish", 1, params, nullptr, nullptr, 0));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail("finish");
    if (std::string(PQcmdTuples(r.get())) != "1")
      throw std::runtime_error("postgres: finish deleted no row");
  }

 private:
  int drain_notifications() {
    int n = 0;
    while (PGnotify* note = PQnotifies(conn_)) {
      PQfreemem(note);
      ++n;
    }
    return n;
  }
  void prepare_statement(const char* name, const char* sql, int params) {
    Result r(PQprepare(conn_, name, sql, params, nullptr));
    if (PQresultStatus(r.get()) != PGRES_COMMAND_OK) fail(std::string("prepare ") + name);
  }
  [[noreturn]] void fail(const std::string& what) {
    throw std::runtime_error("postgres: " + what + ": " + PQerrorMessage(conn_));
  }

  PGconn* conn_ = nullptr;
};

class Postgres final : public QueueSystem {
 public:
  explicit Postgres(std::string address) : address_(std::move(address)) {}
  void prepare() override {
    PgClient admin(address_, true);
    admin.exec(kSchema);
  }
  std::unique_ptr<QueueClient> connect() override {
    return std::make_unique<PgClient>(address_, false);
  }
  // Committed transactions of the database, from a fresh connection (a backend's counts reach
  // pg_stat_database when it commits, at most once a second, and when it exits). The reading
  // itself commits one transaction.
  int64_t commits() override {
    PgClient admin(address_, true);
    Result r(PQexec(admin.connection(),
                    "SELECT xact_commit FROM pg_stat_database WHERE datname = current_database()"));
    if (PQresultStatus(r.get()) != PGRES_TUPLES_OK || PQntuples(r.get()) != 1)
      throw std::runtime_error("postgres: read pg_stat_database");
    return std::stoll(PQgetvalue(r.get(), 0, 0));
  }

 private:
  std::string address_;
};

}  // namespace

std::unique_ptr<QueueSystem> open_postgres(const std::string& address) {
  return std::make_unique<Postgres>(address);
}

}  // namespace kvq::peers
