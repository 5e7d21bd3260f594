// cli/invocation.cc — see invocation.h.
#include "invocation.h"

#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <iterator>

#include "output.h"

namespace kvq::cli {

using Json = nlohmann::json;

const char kCommonOptionsHelp[] =
    "\n"
    "common options:\n"
    "  --url URL            server base URL (default $KVQ_URL, else http://127.0.0.1:7411);\n"
    "                       https://HOST[:PORT] for TLS (port 443 when omitted)\n"
    "  --token T            bearer token (default $KVQ_TOKEN); beyond loopback only over\n"
    "                       https://: over http:// anyone on the path can read it\n"
    "  --ca-cert FILE       https: trust the CAs in this PEM file for the server's\n"
    "                       certificate (default $KVQ_CA_CERT, else the system's store)\n"
    "  --client-cert FILE   https: present this certificate, to a server that asks for one\n"
    "  --client-key FILE    and its key (default $KVQ_CLIENT_CERT, $KVQ_CLIENT_KEY)\n"
    "  --json               print the server's JSON response instead of text\n"
    "  --help, -h           print this help\n"
    "\n";

int Invocation::usage_error(const std::string& message) const {
  std::fprintf(stderr, "%s: %s\n\n%s%s%s", name.c_str(), message.c_str(), usage.c_str(),
               kCommonOptionsHelp, kExitCodesHelp);
  return kExitUsage;
}

int Invocation::fail(const Response& response) const {
  if (json && !response.network_error() && !response.body.is_null()) print_json(response.body);
  std::string message = response.describe();
  if (response.status == 401) {
    message += connection.token.empty()
                   ? " (this server needs a token: give it with --token T or $KVQ_TOKEN)"
                   : " (the server refused the token given by --token or $KVQ_TOKEN)";
  }
  std::fprintf(stderr, "%s: %s\n", name.c_str(), message.c_str());
  return exit_code_for(response.status, response.error);
}

void print_json(const Json& value) {
  const std::string text = value.dump(-1, ' ', false, Json::error_handler_t::replace);
  std::fwrite(text.data(), 1, text.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
}

Begun begin_command(int argc, char** argv, const char* name, const char* usage,
                    const std::vector<OptionSpec>& options, size_t min_positional,
                    size_t max_positional) {
  Invocation inv;
  inv.name = std::string("kvq ") + name;
  inv.usage = usage;
  auto parsed = parse_args(std::vector<std::string>(argv, argv + argc), options);
  if (!parsed.ok()) return {std::nullopt, inv.usage_error(parsed.status().message())};
  inv.args = std::move(*parsed);
  if (inv.args.flag("help")) {
    std::printf("%s%s%s", usage, kCommonOptionsHelp, kExitCodesHelp);
    return {std::nullopt, kExitOk};
  }
  const size_t n = inv.args.positional.size();
  if (n < min_positional || n > max_positional) {
    return {std::nullopt,
            inv.usage_error(n < min_positional ? "missing arguments" : "too many arguments")};
  }
  inv.json = inv.args.flag("json");
  inv.connection = connection_from(inv.args, std::getenv("KVQ_URL"), std::getenv("KVQ_TOKEN"));
  auto url = parse_url(inv.connection.url);
  if (!url.ok()) return {std::nullopt, inv.usage_error(url.status().message())};
  const TlsFlags tls =
      tls_flags_from(inv.args, std::getenv("KVQ_CA_CERT"), std::getenv("KVQ_CLIENT_CERT"),
                     std::getenv("KVQ_CLIENT_KEY"));
  if (url->tls) {
    auto made = make_tls_context(tls.options);
    if (!made.ok()) {
      // A file problem, not a bad command line: the message says which file, no usage needed.
      std::fprintf(stderr, "%s: %s\n", inv.name.c_str(), made.status().message().c_str());
      return {std::nullopt, kExitUsage};
    }
    inv.tls = std::move(*made);
  } else if (tls.explicit_flags) {
    return {std::nullopt,
            inv.usage_error("--ca-cert, --client-cert and --client-key need an https:// URL, not " +
                            inv.connection.url)};
  }
  inv.client = std::make_unique<Client>(std::move(*url), inv.connection.token, inv.tls);
  return {std::move(inv), kExitOk};
}

Result<Json> parse_data_arg(const std::string& text) {
  std::string source = text;
  if (text == "-") {
    source.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  }
  Json value = Json::parse(source, nullptr, /*allow_exceptions=*/false);
  if (value.is_discarded()) {
    return InvalidArgument("DATA_JSON is not valid JSON: " + truncate(source, 60));
  }
  return value;
}

Result<std::optional<int64_t>> int_option(const Invocation& inv, const std::string& name) {
  if (!inv.args.has(name)) return std::optional<int64_t>();
  auto v = parse_int(inv.args.value(name));
  if (!v)
    return InvalidArgument("--" + name + " needs an integer, not '" + inv.args.value(name) + "'");
  return v;
}

Result<double> seconds_option(const Invocation& inv, const std::string& name, double fallback) {
  if (!inv.args.has(name)) return fallback;
  auto v = parse_double(inv.args.value(name));
  if (!v || *v < 0) {
    return InvalidArgument("--" + name + " needs a number of seconds, not '" +
                           inv.args.value(name) + "'");
  }
  return *v;
}

std::chrono::milliseconds poll_timeout(double seconds) {
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000)) +
         std::chrono::milliseconds(15000);
}

std::string job_name(const std::string& type, const std::string& id) { return type + "/" + id; }

}  // namespace kvq::cli
