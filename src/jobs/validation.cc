#include "jobs/validation.h"

#include <string>

#include <simdjson.h>

#include "kvq/jobs.h"
#include "util/text.h"

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

Result<std::string> normalize_value(std::string_view value, size_t max_bytes,
                                    std::string_view what) {
  return normalize_json(value, max_bytes, what, /*object_only=*/false);
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
