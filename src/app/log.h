// app/log.h — kvq serve's operator log (spdlog underneath).
//
// What it promises:
// - One line per event, written whole (lines from many threads never interleave), to stderr
//   unless a stream is given (tests).
// - Every line starts with the time in UTC to the millisecond and the level:
//   text: `2026-12-01T19:53:02.123Z info request method=GET path=/v1/types status=200 ...`
//         fields follow the message as key=value; a value with a space, a quote, a '=' or a
//         control character is quoted "like JSON".
//   json: `{"time":"2026-12-01T19:53:02.123Z","level":"info","msg":"request","method":"GET",...}`
//         one object per line, keys in this order: time, level, msg, then the event's fields;
//         valid UTF-8 JSON: strings keep their UTF-8 characters as they are and escape '"',
//         '\\' and control characters (\n, \t, else \u00XX); a byte that is not part of
//         well-formed UTF-8 is written \ufffd. Numbers are numbers.
// - Levels are debug < info < warn < error; an event below the logger's level costs one
//   comparison: nothing is formatted or copied (check enabled() before building costly fields).
// - A request line (`request`) has the fields method, path, status, latency_ms (3 decimals),
//   client, route when one matched, and trace_id when the request carried a valid W3C
//   `traceparent` header; at info, or warn for a 5xx answer.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <variant>

namespace kvq::app::log {

enum class Level { kDebug = 0, kInfo = 1, kWarn = 2, kError = 3 };
enum class Format { kText, kJson };

// "debug", "info", "warn", "error" / "text", "json"; nullopt for anything else.
std::optional<Level> parse_level(std::string_view name);
std::optional<Format> parse_format(std::string_view name);
std::string_view level_name(Level level);

struct Field {
  std::string_view key;  // letters, digits, '_': written as given
  std::variant<std::string_view, int64_t, double> value;
  Field(std::string_view k, std::string_view v) : key(k), value(v) {}
  Field(std::string_view k, const std::string& v) : key(k), value(std::string_view(v)) {}
  Field(std::string_view k, const char* v) : key(k), value(std::string_view(v)) {}
  Field(std::string_view k, int64_t v) : key(k), value(v) {}
  Field(std::string_view k, int v) : key(k), value(int64_t{v}) {}
  Field(std::string_view k, unsigned v) : key(k), value(int64_t{v}) {}
  Field(std::string_view k, uint64_t v) : key(k), value(static_cast<int64_t>(v)) {}
  Field(std::string_view k, double v) : key(k), value(v) {}
};

struct RequestLine {
  std::string_view method, path, route, client;
  std::string_view trace_id;  // "" for none
  unsigned status = 0;
  std::chrono::nanoseconds latency{0};
};

class Logger {
 public:
  // Logs to `out` if given (it must outlive the Logger), else to stderr.
  Logger(Format format, Level level, std::ostream* out = nullptr);
  ~Logger();
  Logger(const Logger&) = delete;
  Logger& operator=(const Logger&) = delete;

  bool enabled(Level level) const { return level >= level_; }
  Level level() const { return level_; }

  void log(Level level, std::string_view message, std::initializer_list<Field> fields = {});
  void debug(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::kDebug, m, f); }
  void info(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::kInfo, m, f); }
  void warn(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::kWarn, m, f); }
  void error(std::string_view m, std::initializer_list<Field> f = {}) { log(Level::kError, m, f); }
  void request(const RequestLine& line);
  // Writes what is buffered (the stream sink; stderr is unbuffered).
  void flush();

 private:
  void write(Level level, std::string_view message, const Field* fields, size_t count);
  struct Impl;
  Format format_;
  Level level_;
  std::unique_ptr<Impl> impl_;
};

}  // namespace kvq::app::log
