// beanstalk/protocol.h — beanstalkd's wire protocol (doc: /usr/share/doc/beanstalkd/protocol.txt),
// as pure functions over bytes: no I/O, no store, no clock.
//
// What it promises:
// - Decoder turns the bytes a client sends into requests, one at a time, in order: a command
//   (with its body, for put) or the error reply the protocol gives for what it cannot take —
//   BAD_FORMAT (a line over kMaxLineBytes with its CRLF, whose remaining bytes up to the next
//   CRLF are then skipped, as beanstalkd does; a malformed line; a name breaking the rules),
//   UNKNOWN_COMMAND, EXPECTED_CRLF (the body is not followed by CRLF; the <bytes>+2 bytes are
//   consumed either way, as beanstalkd does) and JOB_TOO_BIG (the body, and its CRLF, are then
//   skipped without being kept).
// - Memory: a Decoder keeps at most what it was fed and has not handed out; the caller bounds
//   that by feeding only when next() asks for more. A body is kept only up to max_job_size.
// - Encoders build replies exactly as protocol.txt spells them.
//
// Thread-safety: a Decoder is used by one thread at a time; the functions are pure.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace kvq::beanstalk {

// A command line's limit, its "\r\n" included (protocol.txt, BAD_FORMAT).
inline constexpr size_t kMaxLineBytes = 224;
// A tube name's limit.
inline constexpr size_t kMaxNameBytes = 200;
// beanstalkd's default -z: the largest body a put may carry.
inline constexpr size_t kDefaultMaxJobSize = 65535;

enum class Verb {
  kPut,
  kUse,
  kReserve,
  kReserveWithTimeout,
  kReserveJob,
  kDelete,
  kRelease,
  kBury,
  kTouch,
  kWatch,
  kIgnore,
  kPeek,
  kPeekReady,
  kPeekDelayed,
  kPeekBuried,
  kKick,
  kKickJob,
  kStatsJob,
  kStatsTube,
  kStats,
  kListTubes,
  kListTubeUsed,
  kListTubesWatched,
  kPauseTube,
  kQuit,
};
// The command's name as the protocol spells it ("reserve-with-timeout").
std::string_view verb_name(Verb verb);

// One parsed command line. Only the fields its verb takes are set.
struct Command {
  Verb verb = Verb::kQuit;
  std::string tube;       // use, watch, ignore, stats-tube, pause-tube
  uint64_t id = 0;        // reserve-job, delete, release, bury, touch, peek, kick-job, stats-job
  uint32_t priority = 0;  // put, release, bury
  uint32_t delay = 0;     // put, release, pause-tube: seconds
  uint32_t ttr = 0;       // put: seconds, as sent (0 included)
  uint32_t timeout = 0;   // reserve-with-timeout: seconds
  uint32_t bound = 0;     // kick
  uint32_t bytes = 0;     // put: the body's size
};

// The error replies a line can earn by itself.
enum class LineError { kBadFormat, kUnknownCommand };

// Parses one command line, without its "\r\n".
std::variant<Command, LineError> parse_command(std::string_view line);

// A name as protocol.txt defines it: 1..kMaxNameBytes of A-Z a-z 0-9 - + / ; . $ _ ( ),
// not starting with '-'.
bool is_valid_name(std::string_view name);

// What a Decoder hands out: a command (a put's body in `body`), or an error reply to send
// (the bytes it names are consumed: the request is over).
struct Request {
  std::optional<Command> command;
  std::string body;
  std::string_view error;  // "BAD_FORMAT", ... when command is nullopt
};

class Decoder {
 public:
  explicit Decoder(size_t max_job_size = kDefaultMaxJobSize) : max_job_size_(max_job_size) {}

  void feed(std::string_view bytes) { buffer_.append(bytes); }
  // The next request, or nullopt when more bytes are needed for it.
  std::optional<Request> next();
  // Bytes fed and not yet handed out or skipped.
  size_t buffered() const { return buffer_.size() - start_; }

 private:
  // Drops the consumed prefix once it is large, so the buffer does not grow with the stream.
  void compact();

  size_t max_job_size_;
  std::string buffer_;
  size_t start_ = 0;            // bytes of buffer_ already consumed
  bool skipping_line_ = false;  // discarding the rest of an overlong line
  uint64_t skip_bytes_ = 0;     // discarding a too-big body and its CRLF
  std::optional<Command> put_;  // a put whose body is awaited
};

// ---- Replies ----
// "<word>\r\n", e.g. line("DELETED").
std::string line(std::string_view word);
// "<word> <number>\r\n", e.g. line("INSERTED", 7).
std::string line(std::string_view word, uint64_t number);
// "<word> <id> <bytes>\r\n<body>\r\n": RESERVED and FOUND.
std::string job_reply(std::string_view word, uint64_t id, std::string_view body);
// "OK <bytes>\r\n<yaml>\r\n": stats, list-tubes.
std::string ok_reply(std::string_view yaml);

// YAML as beanstalkd writes it: "---\n" then "key: value\n" lines, or "- item\n" lines.
class YamlMap {
 public:
  YamlMap() : text_("---\n") {}
  YamlMap& add(std::string_view key, uint64_t value);
  YamlMap& add(std::string_view key, std::string_view value);  // written as given
  YamlMap& add_quoted(std::string_view key, std::string_view value);
  const std::string& text() const { return text_; }

 private:
  std::string text_;
};
std::string yaml_list(const std::vector<std::string>& items);

}  // namespace kvq::beanstalk
