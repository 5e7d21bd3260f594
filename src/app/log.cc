// app/log.cc — see log.h.
#include "app/log.h"

#include <spdlog/logger.h>
#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/ostream_sink.h>
#include <spdlog/sinks/stdout_sinks.h>

#include <cstdio>

#include "util/text.h"

namespace kvq::app::log {
namespace {

constexpr char kHex[] = "0123456789abcdef";

// JSON string contents: '"', '\\' and control characters escaped; well-formed UTF-8 kept as it
// is (RFC 8259 strings are UTF-8), and each byte that is not part of it written as U+FFFD, so
// every line is valid UTF-8 JSON.
void append_escaped(std::string& out, std::string_view text) {
  for (size_t i = 0; i < text.size();) {
    const char c = text[i];
    const auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x80) {
      const size_t n = util::utf8_sequence_length(text, i);
      if (n == 0) {
        out += "\\ufffd";
        ++i;
      } else {
        out.append(text.substr(i, n));
        i += n;
      }
      continue;
    }
    ++i;
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte == '\n') {
      out += "\\n";
    } else if (byte == '\t') {
      out += "\\t";
    } else if (byte < 0x20 || byte == 0x7f) {
      out += "\\u00";
      out += kHex[byte >> 4];
      out += kHex[byte & 0xf];
    } else {
      out += c;
    }
  }
}

bool needs_quotes(std::string_view text) {
  if (text.empty()) return true;
  for (const char c : text) {
    const auto byte = static_cast<unsigned char>(c);
    if (byte <= 0x20 || byte >= 0x7f || c == '"' || c == '=' || c == '\\') return true;
  }
  return false;
}

void append_number(std::string& out, int64_t n) {
  char buffer[24];
  const int length = std::snprintf(buffer, sizeof buffer, "%lld", static_cast<long long>(n));
  out.append(buffer, static_cast<size_t>(length));
}

void append_number(std::string& out, double d) {
  char buffer[40];
  const int length = std::snprintf(buffer, sizeof buffer, "%.3f", d);
  out.append(buffer, static_cast<size_t>(length));
}

void append_value(std::string& out, const Field& field, Format format) {
  if (const auto* text = std::get_if<std::string_view>(&field.value)) {
    if (format == Format::kJson || needs_quotes(*text)) {
      out += '"';
      append_escaped(out, *text);
      out += '"';
    } else {
      out += *text;
    }
  } else if (const auto* n = std::get_if<int64_t>(&field.value)) {
    append_number(out, *n);
  } else {
    append_number(out, std::get<double>(field.value));
  }
}

spdlog::level::level_enum to_spdlog(Level level) {
  switch (level) {
    case Level::kDebug: return spdlog::level::debug;
    case Level::kInfo: return spdlog::level::info;
    case Level::kWarn: return spdlog::level::warn;
    case Level::kError: break;
  }
  return spdlog::level::err;
}

}  // namespace

std::optional<Level> parse_level(std::string_view name) {
  if (name == "debug") return Level::kDebug;
  if (name == "info") return Level::kInfo;
  if (name == "warn") return Level::kWarn;
  if (name == "error") return Level::kError;
  return std::nullopt;
}

std::optional<Format> parse_format(std::string_view name) {
  if (name == "text") return Format::kText;
  if (name == "json") return Format::kJson;
  return std::nullopt;
}

std::string_view level_name(Level level) {
  switch (level) {
    case Level::kDebug: return "debug";
    case Level::kInfo: return "info";
    case Level::kWarn: return "warn";
    case Level::kError: break;
  }
  return "error";
}

struct Logger::Impl {
  std::shared_ptr<spdlog::logger> logger;
};

Logger::Logger(Format format, Level level, std::ostream* out)
    : format_(format), level_(level), impl_(std::make_unique<Impl>()) {
  spdlog::sink_ptr sink;
  if (out != nullptr) {
    sink = std::make_shared<spdlog::sinks::ostream_sink_mt>(*out, /*force_flush=*/true);
  } else {
    sink = std::make_shared<spdlog::sinks::stderr_sink_mt>();
  }
  // The time is spdlog's (UTC, milliseconds); the rest of the line, level included, is ours:
  // spdlog would name warn "warning".
  const char* pattern = format == Format::kJson ? "{\"time\":\"%Y-%m-%dT%H:%M:%S.%eZ\",%v}"
                                                : "%Y-%m-%dT%H:%M:%S.%eZ %v";
  sink->set_formatter(
      std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc));
  impl_->logger = std::make_shared<spdlog::logger>("kvq", std::move(sink));
  impl_->logger->set_level(to_spdlog(level));
  impl_->logger->flush_on(spdlog::level::debug);
}

Logger::~Logger() = default;

void Logger::log(Level level, std::string_view message, std::initializer_list<Field> fields) {
  if (!enabled(level)) return;
  write(level, message, fields.begin(), fields.size());
}

void Logger::request(const RequestLine& line) {
  const Level level = line.status >= 500 ? Level::kWarn : Level::kInfo;
  if (!enabled(level)) return;
  const double latency_ms = static_cast<double>(line.latency.count()) / 1e6;
  // The fields every line has, then those it has only when known (no empty route=, trace_id=).
  Field fields[] = {{"method", line.method},    {"path", line.path},     {"status", line.status},
                    {"latency_ms", latency_ms}, {"client", line.client}, {"route", line.route},
                    {"trace_id", line.trace_id}};
  size_t count = 5;
  if (!line.route.empty()) fields[count++] = Field("route", line.route);
  if (!line.trace_id.empty()) fields[count++] = Field("trace_id", line.trace_id);
  write(level, "request", fields, count);
}

void Logger::flush() { impl_->logger->flush(); }

void Logger::write(Level level, std::string_view message, const Field* fields, size_t count) {
  std::string line;
  line.reserve(64 + message.size() + count * 24);
  if (format_ == Format::kJson) {
    line += "\"level\":\"";
    line += level_name(level);
    line += "\",\"msg\":\"";
    append_escaped(line, message);
    line += '"';
    for (size_t i = 0; i < count; ++i) {
      line += ",\"";
      line += fields[i].key;
      line += "\":";
      append_value(line, fields[i], format_);
    }
  } else {
    line += level_name(level);
    line += ' ';
    // The message is prose: only what would break the line is escaped.
    for (const char c : message) {
      const auto byte = static_cast<unsigned char>(c);
      if (byte < 0x20) {
        line += "\\u00";
        line += kHex[byte >> 4];
        line += kHex[byte & 0xf];
      } else {
        line += c;
      }
    }
    for (size_t i = 0; i < count; ++i) {
      line += ' ';
      line += fields[i].key;
      line += '=';
      append_value(line, fields[i], format_);
    }
  }
  impl_->logger->log(to_spdlog(level), spdlog::string_view_t(line.data(), line.size()));
}

}  // namespace kvq::app::log
