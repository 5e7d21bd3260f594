// cli/args.cc — see args.h.
#include "args.h"

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace kvq::cli {

Result<ParsedArgs> parse_args(const std::vector<std::string>& args,
                              const std::vector<OptionSpec>& specs) {
  static const std::vector<OptionSpec> kCommon = {
      {"url", true},        {"token", true}, {"ca-cert", true}, {"client-cert", true},
      {"client-key", true}, {"json", false}, {"help", false}};
  auto find = [&](std::string_view name) -> const OptionSpec* {
    for (const auto* list : {&specs, &kCommon}) {
      for (const auto& spec : *list) {
        if (spec.name == name) return &spec;
      }
    }
    return nullptr;
  };
  ParsedArgs out;
  bool options_done = false;
  for (size_t i = 1; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (options_done || arg.size() < 2 || arg[0] != '-' || (arg[1] != '-' && arg != "-h")) {
      out.positional.push_back(arg);  // includes "-" and negative numbers
      continue;
    }
    if (arg == "--") {
      options_done = true;
      continue;
    }
    if (arg == "-h") {
      out.flags.insert("help");
      continue;
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (auto eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* spec = find(name);
    if (spec == nullptr) return InvalidArgument("unknown option '--" + name + "'");
    if (!spec->takes_value) {
      if (value) return InvalidArgument("option '--" + name + "' takes no value");
      out.flags.insert(name);
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) return InvalidArgument("option '--" + name + "' needs a value");
      value = args[++i];
    }
    out.values[name] = *value;
  }
  return out;
}

std::optional<int64_t> parse_int(std::string_view text) {
  if (text.empty() || text.size() > 24) return std::nullopt;
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  const long long v = std::strtoll(s.c_str(), &end, 10);
  if (errno != 0 || end != s.c_str() + s.size() || std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  return static_cast<int64_t>(v);
}

std::optional<double> parse_double(std::string_view text) {
  if (text.empty() || text.size() > 64) return std::nullopt;
  std::string s(text);
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (errno != 0 || end != s.c_str() + s.size() || !std::isfinite(v) ||
      std::isspace(static_cast<unsigned char>(s[0]))) {
    return std::nullopt;
  }
  return v;
}

Connection connection_from(const ParsedArgs& args, const char* env_url, const char* env_token) {
  Connection c;
  c.url =
      args.value("url", env_url != nullptr && *env_url != '\0' ? env_url : "http://127.0.0.1:7411");
  c.token = args.value("token", env_token != nullptr ? env_token : "");
  return c;
}

TlsFlags tls_flags_from(const ParsedArgs& args, const char* env_ca, const char* env_cert,
                        const char* env_key) {
  auto pick = [&](const char* flag, const char* env) {
    return args.value(flag, env != nullptr ? env : "");
  };
  TlsFlags t;
  t.options.ca_cert = pick("ca-cert", env_ca);
  t.options.client_cert = pick("client-cert", env_cert);
  t.options.client_key = pick("client-key", env_key);
  t.explicit_flags = args.has("ca-cert") || args.has("client-cert") || args.has("client-key");
  return t;
}

}  // namespace kvq::cli
