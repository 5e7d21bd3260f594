// cli/args.cc — see args.h.
#include "args.h"

#include <CLI/CLI.hpp>

#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdlib>

namespace kvq::cli {

namespace {

// CLI11's wording of a parse error, in ours.
std::string our_message(const CLI::ParseError& e) {
  const std::string what = e.what();
  auto dashed = [](std::string name) { return name.rfind("--", 0) == 0 ? name : "--" + name; };
  if (auto at = what.find(" was given a disallowed flag override"); at != std::string::npos)
    return "option '" + dashed(what.substr(0, at)) + "' takes no value";
  if (auto colon = what.find(':'); colon != std::string::npos && what.rfind("--", 0) == 0 &&
                                   what.find(" missing", colon) != std::string::npos)
    return "option '" + what.substr(0, colon) + "' needs a value";
  return what;
}

}  // namespace

Result<ParsedArgs> parse_args(const std::vector<std::string>& args,
                              const std::vector<OptionSpec>& specs) {
  static const std::vector<OptionSpec> kCommon = {{"url", true},        {"token", true},
                                                  {"ca-cert", true},    {"client-cert", true},
                                                  {"client-key", true}, {"json", false}};
  CLI::App app;
  app.set_help_flag();
  app.allow_extras();  // unknown options are reported below, in our words
  app.positionals_at_end(false);
  ParsedArgs out;
  app.add_option("positional", out.positional);
  bool help = false;
  app.add_flag("-h,--help", help)->disable_flag_override();
  std::map<std::string, std::string> values;
  std::map<std::string, bool> flags;
  std::vector<std::pair<const OptionSpec*, CLI::Option*>> given;
  for (const auto* list : {&specs, &kCommon}) {
    for (const auto& spec : *list) {
      if (app.get_option_no_throw("--" + spec.name) != nullptr) continue;  // a command's own
      CLI::Option* option =
          spec.takes_value
              ? app.add_option("--" + spec.name, values[spec.name])
                    ->multi_option_policy(CLI::MultiOptionPolicy::TakeLast)
              : app.add_flag("--" + spec.name, flags[spec.name])->disable_flag_override();
      given.emplace_back(&spec, option);
    }
  }
  // CLI11 wants argv order from the end, as its parse(vector) takes it.
  std::vector<std::string> reversed(args.rbegin(), args.rend());
  if (!reversed.empty()) reversed.pop_back();  // args[0], the command name
  try {
    app.parse(reversed);
  } catch (const CLI::ParseError& e) {
    return InvalidArgument(our_message(e));
  }
  for (const auto& extra : app.remaining()) {
    if (extra == "--") continue;  // CLI11 keeps the end of the options there
    return InvalidArgument("unknown option '" + extra.substr(0, extra.find('=')) + "'");
  }
  if (help) out.flags.insert("help");
  for (const auto& [spec, option] : given) {
    if (option->count() == 0) continue;
    if (spec->takes_value) {
      out.values[spec->name] = values[spec->name];
      out.all_values[spec->name] = option->results();
    } else {
      out.flags.insert(spec->name);
    }
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

std::optional<int64_t> parse_duration_ms(std::string_view text) {
  static constexpr std::pair<std::string_view, double> kUnits[] = {
      {"ms", 1}, {"s", 1e3}, {"m", 60e3}, {"h", 3600e3}, {"d", 86400e3}};
  constexpr double kMaxMillis = 3650 * 86400e3;
  double unit = 1e3;
  std::string_view number = text;
  // "ms" before "m" and "s": the first unit the text ends with is the one it names.
  for (const auto& [suffix, millis] : kUnits) {
    if (text.size() > suffix.size() && text.substr(text.size() - suffix.size()) == suffix) {
      number = text.substr(0, text.size() - suffix.size());
      unit = millis;
      break;
    }
  }
  auto v = parse_double(number);
  if (!v || !(*v > 0) || *v * unit > kMaxMillis) return std::nullopt;
  return static_cast<int64_t>(std::ceil(*v * unit));
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
