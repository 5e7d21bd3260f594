#include "beanstalk/protocol.h"

#include <limits>
#include <utility>

namespace kvq::beanstalk {
namespace {

constexpr std::string_view kCrlf = "\r\n";

// How each command's arguments are read: a tube name, numbers, or both.
enum class Arg { kTube, kId, kPriority, kDelay, kTtr, kTimeout, kBound, kBytes };

struct Syntax {
  std::string_view name;
  Verb verb;
  std::vector<Arg> args;
};

const std::vector<Syntax>& syntaxes() {
  static const std::vector<Syntax> table = {
      {"put", Verb::kPut, {Arg::kPriority, Arg::kDelay, Arg::kTtr, Arg::kBytes}},
      {"use", Verb::kUse, {Arg::kTube}},
      {"reserve", Verb::kReserve, {}},
      {"reserve-with-timeout", Verb::kReserveWithTimeout, {Arg::kTimeout}},
      {"reserve-job", Verb::kReserveJob, {Arg::kId}},
      {"delete", Verb::kDelete, {Arg::kId}},
      {"release", Verb::kRelease, {Arg::kId, Arg::kPriority, Arg::kDelay}},
      {"bury", Verb::kBury, {Arg::kId, Arg::kPriority}},
      {"touch", Verb::kTouch, {Arg::kId}},
      {"watch", Verb::kWatch, {Arg::kTube}},
      {"ignore", Verb::kIgnore, {Arg::kTube}},
      {"peek", Verb::kPeek, {Arg::kId}},
      {"peek-ready", Verb::kPeekReady, {}},
      {"peek-delayed", Verb::kPeekDelayed, {}},
      {"peek-buried", Verb::kPeekBuried, {}},
      {"kick", Verb::kKick, {Arg::kBound}},
      {"kick-job", Verb::kKickJob, {Arg::kId}},
      {"stats-job", Verb::kStatsJob, {Arg::kId}},
      {"stats-tube", Verb::kStatsTube, {Arg::kTube}},
      {"stats", Verb::kStats, {}},
      {"list-tubes", Verb::kListTubes, {}},
      {"list-tube-used", Verb::kListTubeUsed, {}},
      {"list-tubes-watched", Verb::kListTubesWatched, {}},
      {"pause-tube", Verb::kPauseTube, {Arg::kTube, Arg::kDelay}},
      {"quit", Verb::kQuit, {}},
  };
  return table;
}

// Decimal digits only (no sign, no spaces), at most `max`.
std::optional<uint64_t> parse_number(std::string_view text, uint64_t max) {
  if (text.empty()) return std::nullopt;
  uint64_t value = 0;
  for (char c : text) {
    if (c < '0' || c > '9') return std::nullopt;
    const uint64_t digit = static_cast<uint64_t>(c - '0');
    if (value > (max - digit) / 10) return std::nullopt;
    value = value * 10 + digit;
  }
  return value;
}

bool set_arg(Command& command, Arg arg, std::string_view text) {
  constexpr uint64_t kU32 = std::numeric_limits<uint32_t>::max();
  if (arg == Arg::kTube) {
    if (!is_valid_name(text)) return false;
    command.tube = std::string(text);
    return true;
  }
  auto value = parse_number(text, arg == Arg::kId ? std::numeric_limits<uint64_t>::max() : kU32);
  if (!value) return false;
  const auto small = static_cast<uint32_t>(*value);
  switch (arg) {
    case Arg::kId: command.id = *value; break;
    case Arg::kPriority: command.priority = small; break;
    case Arg::kDelay: command.delay = small; break;
    case Arg::kTtr: command.ttr = small; break;
    case Arg::kTimeout: command.timeout = small; break;
    case Arg::kBound: command.bound = small; break;
    case Arg::kBytes: command.bytes = small; break;
    case Arg::kTube: break;
  }
  return true;
}

}  // namespace

std::string_view verb_name(Verb verb) {
  for (const auto& syntax : syntaxes()) {
    if (syntax.verb == verb) return syntax.name;
  }
  return "?";
}

bool is_valid_name(std::string_view name) {
  if (name.empty() || name.size() > kMaxNameBytes || name.front() == '-') return false;
  for (char c : name) {
    const bool alnum = (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9');
    if (!alnum && std::string_view("-+/;.$_()").find(c) == std::string_view::npos) return false;
  }
  return true;
}

std::variant<Command, LineError> parse_command(std::string_view line) {
  // Words are separated by exactly one space, as beanstalkd reads them: "use  a" is malformed.
  std::vector<std::string_view> words;
  size_t from = 0;
  for (;;) {
    const size_t space = line.find(' ', from);
    words.push_back(line.substr(from, space - from));
    if (space == std::string_view::npos) break;
    from = space + 1;
  }
  for (const auto& syntax : syntaxes()) {
    if (syntax.name != words[0]) continue;
    if (words.size() != syntax.args.size() + 1) return LineError::kBadFormat;
    Command command;
    command.verb = syntax.verb;
    for (size_t i = 0; i < syntax.args.size(); ++i) {
      if (!set_arg(command, syntax.args[i], words[i + 1])) return LineError::kBadFormat;
    }
    return command;
  }
  return LineError::kUnknownCommand;
}

std::optional<Request> Decoder::next() {
  for (;;) {
    std::string_view pending(buffer_.data() + start_, buffer_.size() - start_);
    if (skip_bytes_ > 0) {
      const size_t n = static_cast<size_t>(std::min<uint64_t>(skip_bytes_, pending.size()));
      start_ += n;
      skip_bytes_ -= n;
      compact();
      if (skip_bytes_ > 0) return std::nullopt;
      continue;
    }
    if (skipping_line_) {
      const size_t end = pending.find(kCrlf);
      if (end == std::string_view::npos) {
        // Keep a last '\r': its '\n' may come in the next bytes.
        start_ += pending.size() - (pending.ends_with('\r') ? 1 : 0);
        compact();
        return std::nullopt;
      }
      start_ += end + kCrlf.size();
      skipping_line_ = false;
      continue;
    }
    if (put_) {
      const size_t need = size_t{put_->bytes} + kCrlf.size();
      if (pending.size() < need) return std::nullopt;
      Request request;
      if (pending.substr(put_->bytes, kCrlf.size()) == kCrlf) {
        request.command = std::move(*put_);
        request.body.assign(pending.data(), request.command->bytes);
      } else {
        request.error = "EXPECTED_CRLF";
      }
      put_.reset();
      start_ += need;
      compact();
      return request;
    }
    const size_t end = pending.substr(0, kMaxLineBytes).find(kCrlf);
    if (end == std::string_view::npos) {
      if (pending.size() < kMaxLineBytes) return std::nullopt;
      skipping_line_ = true;
      return Request{.error = "BAD_FORMAT"};
    }
    auto parsed = parse_command(pending.substr(0, end));
    start_ += end + kCrlf.size();
    compact();
    if (auto* error = std::get_if<LineError>(&parsed)) {
      return Request{.error = *error == LineError::kBadFormat ? "BAD_FORMAT" : "UNKNOWN_COMMAND"};
    }
    Command command = std::get<Command>(std::move(parsed));
    if (command.verb != Verb::kPut) return Request{.command = std::move(command)};
    if (command.bytes > max_job_size_) {
      skip_bytes_ = uint64_t{command.bytes} + kCrlf.size();
      return Request{.error = "JOB_TOO_BIG"};
    }
    put_ = std::move(command);
  }
}

void Decoder::compact() {
  if (start_ == buffer_.size()) {
    buffer_.clear();
    start_ = 0;
  } else if (start_ >= 4096 && start_ * 2 >= buffer_.size()) {
    buffer_.erase(0, start_);
    start_ = 0;
  }
}

std::string line(std::string_view word) {
  std::string out(word);
  out += kCrlf;
  return out;
}

std::string line(std::string_view word, uint64_t number) {
  std::string out(word);
  out += ' ';
  out += std::to_string(number);
  out += kCrlf;
  return out;
}

std::string job_reply(std::string_view word, uint64_t id, std::string_view body) {
  std::string out(word);
  out += ' ';
  out += std::to_string(id);
  out += ' ';
  out += std::to_string(body.size());
  out += kCrlf;
  out += body;
  out += kCrlf;
  return out;
}

std::string ok_reply(std::string_view yaml) {
  std::string out = "OK " + std::to_string(yaml.size());
  out += kCrlf;
  out += yaml;
  out += kCrlf;
  return out;
}

YamlMap& YamlMap::add(std::string_view key, uint64_t value) {
  return add(key, std::string_view(std::to_string(value)));
}

YamlMap& YamlMap::add(std::string_view key, std::string_view value) {
  text_.append(key).append(": ").append(value).append("\n");
  return *this;
}

YamlMap& YamlMap::add_quoted(std::string_view key, std::string_view value) {
  text_.append(key).append(": \"");
  for (char c : value) {
    if (c == '"' || c == '\\') text_ += '\\';
    text_ += c;
  }
  text_.append("\"\n");
  return *this;
}

std::string yaml_list(const std::vector<std::string>& items) {
  std::string out = "---\n";
  for (const auto& item : items) out.append("- ").append(item).append("\n");
  return out;
}

}  // namespace kvq::beanstalk
