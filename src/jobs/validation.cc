#include "jobs/validation.h"

#include <string>

#include <simdjson.h>

#include "kvq/jobs.h"
#include "util/text.h"
#include "util/trace_context.h"

namespace kvq::jobs {
namespace {

// Deeper data is refused (simdjson itself would allow 1024 levels).
constexpr int kMaxDepth = 64;

}  // namespace

Status validate_type(std::string_view type) {
  if (type.empty()) return InvalidArgument("job type is empty");
  if (type.size() > kMaxTypeBytes) {
    return InvalidArgument("job type is " + std::to_string(type.size()) + " bytes; the limit is " +
                           std::to_string(kMaxTypeBytes));
  }
  for (char c : type) {
    if (!util::is_name_char(c))
      return InvalidArgument("job type may only contain A-Z a-z 0-9 _ . : -");
  }
  return Status::OK();
}

Status validate_schedule_name(std::string_view name) {
  if (name.empty()) return InvalidArgument("schedule name is empty");
  if (name.size() > kMaxScheduleNameBytes) {
    return InvalidArgument("schedule name is " + std::to_string(name.size()) +
                           " bytes; the limit is " + std::to_string(kMaxScheduleNameBytes));
  }
  for (char c : name) {
    if (!util::is_name_char(c))
      return InvalidArgument("schedule name may only contain A-Z a-z 0-9 _ . : -");
  }
  return Status::OK();
}

Status validate_id(std::string_view id) {
  if (id.empty()) return InvalidArgument("job id is empty");
  if (id.size() > kMaxIdBytes) {
    return InvalidArgument("job id is " + std::to_string(id.size()) + " bytes; the limit is " +
                           std::to_string(kMaxIdBytes));
  }
  for (unsigned char c : id) {
    if (c < 0x20 || c == 0x7F) return InvalidArgument("job id contains a control character");
  }
  return Status::OK();
}

Status validate_group(std::string_view group) {
  if (group.size() > kMaxGroupBytes) {
    return InvalidArgument("group is " + std::to_string(group.size()) + " bytes; the limit is " +
                           std::to_string(kMaxGroupBytes));
  }
  for (unsigned char c : group) {
    if (c < 0x20 || c == 0x7F) return InvalidArgument("group contains a control character");
  }
  return Status::OK();
}

Status validate_worker_type(std::string_view worker_type) {
  if (worker_type.empty()) return Status::OK();
  Status as_type = validate_type(worker_type);
  if (!as_type.ok()) return InvalidArgument("worker_type: " + as_type.message());
  return Status::OK();
}

Status validate_worker(std::string_view worker) {
  if (worker.size() > kMaxIdBytes) {
    return InvalidArgument("worker name is " + std::to_string(worker.size()) +
                           " bytes; the limit is " + std::to_string(kMaxIdBytes));
  }
  for (unsigned char c : worker) {
    if (c < 0x20 || c == 0x7F) return InvalidArgument("worker name contains a control character");
  }
  return Status::OK();
}

namespace {

Result<std::string> normalize_json(std::string_view text, size_t max_bytes, std::string_view what,
                                   bool object_only) {
  const std::string name(what);
  if (text.size() > 4 * max_bytes + 1024) {
    return InvalidArgument(name + " is " + std::to_string(text.size()) + " bytes; the limit is " +
                           std::to_string(max_bytes));
  }
  if (!util::json_depth_within(text, kMaxDepth)) {
    return InvalidArgument(name + " nests deeper than " + std::to_string(kMaxDepth) + " levels");
  }
  // simdjson validates (UTF-8 included) without recursion and reuses its buffers, so checking
  // the text costs a fraction of building a document; minify then drops the whitespace.
  thread_local simdjson::dom::parser parser;
  simdjson::dom::element root;
  if (parser.parse(text.data(), text.size()).get(root) != simdjson::SUCCESS) {
    return InvalidArgument(name + " is not valid JSON");
  }
  if (object_only && root.type() != simdjson::dom::element_type::OBJECT)
    return InvalidArgument(name + " must be a JSON object");
  std::string compact(text.size(), '\0');
  size_t compact_size = 0;
  if (simdjson::minify(text.data(), text.size(), compact.data(), compact_size) !=
      simdjson::SUCCESS) {
    return InvalidArgument(name + " is not valid JSON");
  }
  compact.resize(compact_size);
  if (compact.size() > max_bytes) {
    return InvalidArgument(name + " is " + std::to_string(compact.size()) +
                           " bytes; the limit is " + std::to_string(max_bytes));
  }
  return compact;
}

}  // namespace

Result<std::string> normalize_data(std::string_view data, size_t max_bytes) {
  return normalize_json(data, max_bytes, "job data", /*object_only=*/true);
}

Result<std::string> normalize_data(std::string_view data, DataFormat format, size_t max_bytes) {
  if (format == DataFormat::kJson) return normalize_data(data, max_bytes);
  if (data.size() > max_bytes) {
    return InvalidArgument("job data is " + std::to_string(data.size()) + " bytes; the limit is " +
                           std::to_string(max_bytes));
  }
  return std::string(data);
}

Status validate_job_timeout(std::optional<Millis> timeout) {
  if (timeout && (timeout->count() < 1 || *timeout > kMaxJobTimeout)) {
    return InvalidArgument("a job's timeout must be 1.." + std::to_string(kMaxJobTimeout.count()) +
                           " ms");
  }
  return Status::OK();
}

Status validate_traceparent(std::string_view traceparent) {
  if (traceparent.empty() || util::is_valid_traceparent(traceparent)) return Status::OK();
  return InvalidArgument(
      "traceparent must be a W3C traceparent: 00-<32 lowercase hex digits, not all 0>-<16 "
      "lowercase hex digits, not all 0>-<2 lowercase hex digits> (version ff is invalid)");
}

Result<std::string> normalize_value(std::string_view value, size_t max_bytes,
                                    std::string_view what) {
  return normalize_json(value, max_bytes, what, /*object_only=*/false);
}

namespace {

// The longest prefix of `text` of at most `max` bytes that ends at a UTF-8 boundary.
std::string_view utf8_prefix(std::string_view text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  // Back off continuation bytes (10xxxxxx) so a character is never cut.
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// {"truncated": "<the longest prefix of `json` that keeps the whole within the limit>"}.
std::string truncated_details(std::string_view json) {
  const std::string_view open = R"({"truncated":")";
  const std::string_view close = R"("})";
  size_t budget = kMaxErrorDetailsBytes - open.size() - close.size();
  std::string escaped;
  size_t taken = 0;
  // Compact JSON holds no raw control characters; only '"' and '\\' need escaping here.
  while (taken < json.size()) {
    const char c = json[taken];
    const size_t cost = (c == '"' || c == '\\') ? 2 : 1;
    if (cost > budget) break;
    budget -= cost;
    ++taken;
  }
  const std::string_view prefix = utf8_prefix(json, taken);
  for (char c : prefix) {
    if (c == '"' || c == '\\') escaped.push_back('\\');
    escaped.push_back(c);
  }
  return std::string(open) + escaped + std::string(close);
}

bool valid_utf8(std::string_view text) { return simdjson::validate_utf8(text.data(), text.size()); }

}  // namespace

Result<ErrorReport> validate_error(std::string_view kind, std::string_view message,
                                   const std::optional<std::string>& details,
                                   size_t max_details_bytes) {
  if (message.empty()) return InvalidArgument("a failure needs a message");
  if (!valid_utf8(message)) return InvalidArgument("the failure's message is not UTF-8");
  if (kind.empty() || kind.size() > kMaxErrorKindBytes) {
    return InvalidArgument("the failure's kind is " + std::to_string(kind.size()) +
                           " bytes; it must be 1 to " + std::to_string(kMaxErrorKindBytes));
  }
  if (!valid_utf8(kind)) return InvalidArgument("the failure's kind is not UTF-8");
  for (unsigned char c : kind) {
    if (c < 0x20 || c == 0x7F)
      return InvalidArgument("the failure's kind contains a control character");
  }
  ErrorReport report{std::string(kind), std::string(message), ""};
  if (message.size() > kMaxErrorMessageBytes) {
    const std::string_view ellipsis = "\u2026";
    report.message = std::string(utf8_prefix(message, kMaxErrorMessageBytes - ellipsis.size()));
    report.message += ellipsis;
  }
  if (details) {
    KVQ_ASSIGN_OR_RETURN(report.details,
                         normalize_value(*details, max_details_bytes, "the failure's details"));
    if (report.details.size() > kMaxErrorDetailsBytes)
      report.details = truncated_details(report.details);
  }
  return report;
}

Status validate_accept(std::string_view type, const AcceptOptions& options) {
  KVQ_RETURN_IF_ERROR(validate_type(type));
  KVQ_RETURN_IF_ERROR(validate_worker(options.worker));
  KVQ_RETURN_IF_ERROR(validate_worker_type(options.worker_type));
  if (!options.worker_type.empty() && options.worker.empty()) {
    return InvalidArgument("accept names a worker_type but no worker");
  }
  if (options.timeout.count() < 0) return InvalidArgument("accept timeout must not be negative");
  return Status::OK();
}

}  // namespace kvq::jobs
