// app/serve_options.h — kvq serve's settings: defaults, flags, and a config file of
// `name = value` lines using the flags' names (without the dashes; '#' starts a comment).
// Flags given on the command line win over the file.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "kvq/lmdb_store.h"

namespace kvq::app {

struct ServeOptions {
  std::string listen = "127.0.0.1:7411";
  std::string data = "./kvq-data";
  std::string store;  // "" = the LMDB directory `data`; "etcd://host:port,...[/prefix]" = etcd
  std::string etcd_ca, etcd_cert, etcd_key;   // TLS to etcd
  bool etcd_group_commit = true;              // EtcdOptions::group_commit
  bool etcd_serializable_first_reads = true;  // EtcdOptions::serializable_first_reads
  bool etcd_async_transactions = true;        // EtcdOptions::async_transactions
  std::string etcd_user, etcd_password;  // etcd authentication (password also $KVQ_ETCD_PASSWORD)
  Durability durability = Durability::kSync;
  bool durability_given = false;  // --durability was given (--ephemeral's default is relaxed)
  std::string token;              // also from $KVQ_TOKEN
  size_t max_body = 1024 * 1024;
  size_t max_body_memory = 64 * 1024 * 1024;     // request bodies held at once, all connections
  std::string tls_cert, tls_key, tls_client_ca;  // PEM files; serve HTTPS when tls_cert is set
  std::string log_level = "info";                // error, warn, info, debug
  std::string log_format = "text";               // text, json
  unsigned io_threads = 2;
  // Unset: 0 (store operations run on the I/O threads) for an LMDB store with nosync, whose
  // calls never wait on the disk; 32 otherwise.
  std::optional<unsigned> worker_threads;
  // beanstalkd's protocol (docs/beanstalk.md): "" = not served. Loopback only unless
  // beanstalk_allow_remote, since the protocol has no way to send the token.
  std::string beanstalk_listen;
  bool beanstalk_allow_remote = false;
  size_t beanstalk_max_job_size = 65535;  // beanstalkd's -z
  // A throwaway server (tests, client libraries' test helpers): LMDB in a new temporary
  // directory removed on exit, listening on a free loopback port (listen = 127.0.0.1:0), relaxed
  // durability unless --durability says otherwise. Refused with --data, --store or --listen.
  bool ephemeral = false;
  bool place_given = false;  // --data, --store or --listen was given (--ephemeral refuses them)
  bool help = false;
};

extern const char kServeUsage[];

// True for an address only this machine reaches: 127.0.0.0/8, ::1 (bracketed or not), or
// "localhost".
bool is_loopback_host(std::string_view host);

// The options, or a message saying what is wrong with the arguments.
std::variant<ServeOptions, std::string> parse_serve_options(int argc, char** argv);

}  // namespace kvq::app
