#include "app/serve_options.h"

#include "app/config_file.h"

#include <CLI/CLI.hpp>

#include <cstdlib>
#include <fstream>
#include <map>

namespace kvq::app {

const char kServeUsage[] =
    "usage: kvq serve [options]\n"
    "\n"
    "Serves the kvq HTTP/JSON API (docs/http-api.md) over an embedded LMDB data directory.\n"
    "\n"
    "options:\n"
    "  --listen HOST:PORT   address or host name to listen on (default 127.0.0.1:7411; port 0\n"
    "                       picks a free one; 0.0.0.0 listens on all interfaces, only if you\n"
    "                       ask for it)\n"
    "  --data DIR           data directory, created if missing (default ./kvq-data)\n"
    "  --store URL          etcd://HOST:PORT[,HOST:PORT...][/PREFIX]: keep everything in an etcd\n"
    "                       cluster instead of --data, so servers on many machines share it\n"
    "  --etcd-ca FILE       talk TLS to etcd, trusting this CA (PEM)\n"
    "  --etcd-cert FILE     with --etcd-key: a client certificate for etcd's --client-cert-auth\n"
    "  --etcd-key FILE\n"
    "  --etcd-group-commit on|off\n"
    "                       send commits made at the same time to etcd as one request (default\n"
    "                       on; docs/operations.md)\n"
    "  --etcd-serializable-first-reads on|off\n"
    "                       let adds, accepts that wait and workers' calls read without a\n"
    "                       quorum round; their commits still check every read (default on)\n"
    "  --etcd-async-transactions on|off\n"
    "                       run the routes' transactions without a thread waiting on etcd:\n"
    "                       their reads are fetched together and the work replayed (default on)\n"
    "  --etcd-user NAME     etcd authentication; the password from --etcd-password or\n"
    "  --etcd-password PW   $KVQ_ETCD_PASSWORD\n"
    "  --durability MODE    durable (default: acknowledged once on disk) or relaxed (on disk "
    "within\n"
    "                       about a second); sync and nosync are their former names\n"
    "  --token TOKEN        require 'Authorization: Bearer TOKEN' (default: $KVQ_TOKEN; none)\n"
    "  --max-body BYTES     largest request body accepted (default 1048576)\n"
    "  --max-body-memory BYTES\n"
    "                       request bodies held at once, all connections together; beyond it\n"
    "                       requests with a body get 503 (default 67108864)\n"
    "  --tls-cert FILE      with --tls-key: serve HTTPS with this certificate chain (PEM)\n"
    "  --tls-key FILE       the certificate's private key (PEM)\n"
    "  --tls-client-ca FILE also require a client certificate signed by this CA (PEM)\n"
    "  --log-level LEVEL    error, warn, info (default: a line per request and what the\n"
    "                       server does on its own) or debug (more detail)\n"
    "  --log-format FORMAT  text (default) or json (one JSON object per line) on stderr\n"
    "  --io-threads N       threads serving connections (default 2)\n"
    "  --worker-threads N   threads running store operations; 0 runs them on the I/O threads\n"
    "                       (default: 0 for an LMDB store with relaxed, else 32)\n"
    "  --beanstalk-listen HOST:PORT\n"
    "                       also serve beanstalkd's protocol there (docs/beanstalk.md; off by\n"
    "                       default; beanstalkd's own port is 11300). A loopback address only,\n"
    "                       unless --beanstalk-allow-remote: the protocol cannot carry --token\n"
    "  --beanstalk-allow-remote\n"
    "                       let --beanstalk-listen take any address: whoever reaches it can put,\n"
    "                       take and delete jobs, without a token\n"
    "  --beanstalk-max-job-size BYTES\n"
    "                       the largest job body a put may carry (default 65535, as beanstalkd's\n"
    "                       -z; at most 262144)\n"
    "  --ephemeral          a throwaway server for tests: a new temporary data directory\n"
    "                       (removed on exit), a free port on 127.0.0.1, relaxed durability\n"
    "                       unless --durability is given; not with --data, --store or --listen.\n"
    "                       The first line on stdout is 'kvq serve: listening on URL ...'\n"
    "  --config FILE        read 'name = value' lines with these option names first ('#'\n"
    "                       starts a comment at a line's start or after a blank; quote a value\n"
    "                       with \"...\" or '...' to keep blanks or a ' #' in it)\n"
    "  --help               this text\n"
    "\n"
    "Stops cleanly on SIGINT or SIGTERM: in-flight requests finish, waiting long-polls answer\n"
    "204, event streams close.\n";

namespace {

// Every option that takes a value, --config aside (it is read first, whatever its place).
constexpr const char* kOptionNames[] = {"listen",
                                        "data",
                                        "store",
                                        "etcd-ca",
                                        "etcd-cert",
                                        "etcd-key",
                                        "etcd-group-commit",
                                        "etcd-serializable-first-reads",
                                        "etcd-async-transactions",
                                        "etcd-user",
                                        "etcd-password",
                                        "durability",
                                        "token",
                                        "max-body",
                                        "max-body-memory",
                                        "tls-cert",
                                        "tls-key",
                                        "tls-client-ca",
                                        "log-level",
                                        "log-format",
                                        "io-threads",
                                        "worker-threads",
                                        "beanstalk-listen",
                                        "beanstalk-max-job-size"};

bool to_number(const std::string& text, unsigned long long max, unsigned long long& out) {
  if (text.empty() || text.find_first_not_of("0123456789") != std::string::npos) return false;
  out = std::strtoull(text.c_str(), nullptr, 10);
  return out <= max;
}

std::string apply(ServeOptions& o, const std::string& name, const std::string& value) {
  unsigned long long n = 0;
  if (name == "listen" || name == "data" || name == "store") o.place_given = true;
  if (name == "listen") {
    const auto colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0 || !to_number(value.substr(colon + 1), 65535, n)) {
      return "--listen wants HOST:PORT with a port in 0..65535, got '" + value + "'";
    }
    o.listen = value;
  } else if (name == "data") {
    if (value.empty()) return "--data wants a directory";
    o.data = value;
  } else if (name == "store") {
    if (value.rfind("etcd://", 0) != 0)
      return "--store wants etcd://HOST:PORT[,HOST:PORT...][/PREFIX]";
    o.store = value;
  } else if (name == "etcd-ca") {
    o.etcd_ca = value;
  } else if (name == "etcd-group-commit") {
    if (value != "on" && value != "off") return "--etcd-group-commit wants on or off";
    o.etcd_group_commit = value == "on";
  } else if (name == "etcd-serializable-first-reads") {
    if (value != "on" && value != "off") return "--etcd-serializable-first-reads wants on or off";
    o.etcd_serializable_first_reads = value == "on";
  } else if (name == "etcd-async-transactions") {
    if (value != "on" && value != "off") return "--etcd-async-transactions wants on or off";
    o.etcd_async_transactions = value == "on";
  } else if (name == "etcd-cert") {
    o.etcd_cert = value;
  } else if (name == "etcd-key") {
    o.etcd_key = value;
  } else if (name == "etcd-user") {
    o.etcd_user = value;
  } else if (name == "etcd-password") {
    o.etcd_password = value;
  } else if (name == "durability") {
    auto mode = parse_durability(value);
    if (!mode)
      return "--durability wants durable or relaxed (or sync, nosync), got '" + value + "'";
    o.durability = *mode;
    o.durability_given = true;
  } else if (name == "token") {
    o.token = value;
  } else if (name == "max-body") {
    if (!to_number(value, 64ull << 20, n) || n < 1024)
      return "--max-body wants 1024..67108864 bytes";
    o.max_body = n;
  } else if (name == "max-body-memory") {
    if (!to_number(value, 1ull << 40, n) || n < 1024)
      return "--max-body-memory wants 1024..1099511627776 bytes";
    o.max_body_memory = n;
  } else if (name == "tls-cert") {
    if (value.empty()) return "--tls-cert wants a file";
    o.tls_cert = value;
  } else if (name == "tls-key") {
    if (value.empty()) return "--tls-key wants a file";
    o.tls_key = value;
  } else if (name == "tls-client-ca") {
    if (value.empty()) return "--tls-client-ca wants a file";
    o.tls_client_ca = value;
  } else if (name == "log-level") {
    if (value != "error" && value != "warn" && value != "info" && value != "debug") {
      return "--log-level wants error, warn, info or debug";
    }
    o.log_level = value;
  } else if (name == "log-format") {
    if (value != "text" && value != "json") return "--log-format wants text or json";
    o.log_format = value;
  } else if (name == "io-threads") {
    if (!to_number(value, 256, n) || n == 0) return "--io-threads wants 1..256";
    o.io_threads = static_cast<unsigned>(n);
  } else if (name == "beanstalk-listen") {
    const auto colon = value.rfind(':');
    if (colon == std::string::npos || colon == 0 || !to_number(value.substr(colon + 1), 65535, n)) {
      return "--beanstalk-listen wants HOST:PORT with a port in 0..65535, got '" + value + "'";
    }
    o.beanstalk_listen = value;
  } else if (name == "beanstalk-allow-remote") {
    if (value != "true" && value != "false") return "beanstalk-allow-remote wants true or false";
    o.beanstalk_allow_remote = value == "true";
  } else if (name == "ephemeral") {
    if (value != "true" && value != "false") return "ephemeral wants true or false";
    o.ephemeral = value == "true";
  } else if (name == "beanstalk-max-job-size") {
    // At most the jobs layer's largest data (JobsOptions::max_data_bytes, 256 KiB).
    if (!to_number(value, 256 * 1024, n) || n == 0)
      return "--beanstalk-max-job-size wants 1..262144 bytes";
    o.beanstalk_max_job_size = n;
  } else if (name == "worker-threads") {
    if (!to_number(value, 256, n)) return "--worker-threads wants 0..256";
    o.worker_threads = static_cast<unsigned>(n);
  } else {
    return "unknown option '" + name + "'";
  }
  return "";
}

std::string read_config(ServeOptions& o, const std::string& path) {
  std::ifstream in(path);
  if (!in) return "cannot read config file '" + path + "'";
  std::string line;
  for (int number = 1; std::getline(in, line); ++number) {
    const std::string where = path + ":" + std::to_string(number) + ": ";
    auto parsed = parse_config_line(line);
    if (auto* error = std::get_if<std::string>(&parsed)) return where + *error;
    const auto& entry = std::get<0>(parsed);
    if (!entry) continue;
    if (auto e = apply(o, entry->first, entry->second); !e.empty()) return where + e;
  }
  return "";
}

}  // namespace

bool is_loopback_host(std::string_view host) {
  if (host.size() > 1 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  if (host == "localhost" || host == "::1") return true;
  // 127.0.0.0/8 in dotted decimal: four numbers 0..255, the first 127.
  if (!host.starts_with("127.")) return false;
  int parts = 0;
  for (size_t from = 0; from <= host.size(); ++parts) {
    const size_t dot = std::min(host.find('.', from), host.size());
    unsigned long long n = 0;
    if (!to_number(std::string(host.substr(from, dot - from)), 255, n)) return false;
    from = dot + 1;
  }
  return parts == 4;
}

std::variant<ServeOptions, std::string> parse_serve_options(int argc, char** argv) {
  ServeOptions o;
  if (const char* t = std::getenv("KVQ_TOKEN")) o.token = t;
  if (const char* p = std::getenv("KVQ_ETCD_PASSWORD")) o.etcd_password = p;
  // CLI11 reads the command line; apply() judges each value, with the messages the config file
  // shares. Values are kept as given, in order, so the last of a repeated flag wins.
  CLI::App app("kvq serve");
  app.set_help_flag();
  app.allow_extras();
  app.positionals_at_end(false);
  bool help = false;
  app.add_flag("-h,--help", help);
  std::vector<std::string> configs;
  app.add_option("--config", configs)->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  std::vector<std::pair<std::string, std::string>> flags;
  app.add_flag_callback("--beanstalk-allow-remote",
                        [&flags] { flags.emplace_back("beanstalk-allow-remote", "true"); });
  app.add_flag_callback("--ephemeral", [&flags] { flags.emplace_back("ephemeral", "true"); });
  for (const char* name : kOptionNames) {
    app.add_option_function<std::vector<std::string>>(
           std::string("--") + name,
           [&flags, name](const std::vector<std::string>& values) {
             for (const auto& value : values) flags.emplace_back(name, value);
           })
        ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
        ->trigger_on_parse();
  }
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // CLI11 names the option first: "--data: 1 required TEXT missing".
    const std::string what = e.what();
    const auto colon = what.find(':');
    if (colon != std::string::npos && what.rfind("--", 0) == 0)
      return "option " + what.substr(0, colon) + " needs a value";
    return what;
  }
  if (help) {
    o.help = true;
    return o;
  }
  for (const auto& arg : app.remaining()) {
    if (arg.rfind("--", 0) != 0 || arg == "--") return "unexpected argument '" + arg + "'";
    return "unknown option '" + arg.substr(2, arg.find('=') - 2) + "'";
  }
  for (const auto& path : configs) {
    if (auto e = read_config(o, path); !e.empty()) return e;
  }
  for (const auto& [name, value] : flags) {
    if (auto e = apply(o, name, value); !e.empty()) return e;
  }
  if (o.tls_cert.empty() != o.tls_key.empty()) return "--tls-cert and --tls-key go together";
  if (o.ephemeral) {
    if (o.place_given)
      return "--ephemeral makes its own data directory and listens on a free loopback port: "
             "leave out --data, --store and --listen";
    o.listen = "127.0.0.1:0";
    if (!o.durability_given) o.durability = Durability::kNoSync;
  }
  if (!o.beanstalk_listen.empty() && !o.beanstalk_allow_remote &&
      !is_loopback_host(o.beanstalk_listen.substr(0, o.beanstalk_listen.rfind(':')))) {
    return "--beanstalk-listen " + o.beanstalk_listen +
           " is not a loopback address: the beanstalkd protocol cannot carry --token, so anyone "
           "who reaches it could put, take and delete jobs. Listen on 127.0.0.1, ::1 or "
           "localhost, or add --beanstalk-allow-remote to accept that";
  }
  if (!o.tls_client_ca.empty() && o.tls_cert.empty())
    return "--tls-client-ca needs --tls-cert and --tls-key";
  return o;
}

}  // namespace kvq::app
