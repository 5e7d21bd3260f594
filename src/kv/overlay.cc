#include "kv/overlay.h"

namespace kvq::kv {

void WriteBuffer::set(std::string_view key, std::string_view value) {
  writes.insert_or_assign(std::string(key), std::string(value));
}

void WriteBuffer::clear(std::string_view key) {
  writes.insert_or_assign(std::string(key), std::nullopt);
}

void WriteBuffer::clear_range(std::string_view begin, std::string_view end) {
  if (begin >= end) return;
  writes.erase(writes.lower_bound(begin), writes.lower_bound(end));
  cleared.emplace_back(begin, end);
}

bool WriteBuffer::in_cleared_range(std::string_view key) const {
  for (const auto& [begin, end] : cleared) {
    if (key >= begin && key < end) return true;
  }
  return false;
}

std::optional<std::optional<std::string>> WriteBuffer::lookup(std::string_view key) const {
  if (auto it = writes.find(key); it != writes.end()) return it->second;
  if (in_cleared_range(key)) return std::optional<std::string>();
  return std::nullopt;
}

Result<MergedRange> merge_range(RangeSource& stored, const WriteBuffer& buffer,
                                std::string_view begin, std::string_view end,
                                const RangeOptions& options,
                                const std::function<void()>& consumed) {
  MergedRange out{{}, std::string(begin), std::string(end)};
  const auto& writes = buffer.writes;
  auto w_lo = writes.lower_bound(begin), w_hi = writes.lower_bound(end);
  auto w_fwd = w_lo;
  auto w_rev = std::make_reverse_iterator(w_hi);
  auto w_rend = std::make_reverse_iterator(w_lo);
  auto w_valid = [&] { return options.reverse ? w_rev != w_rend : w_fwd != w_hi; };
  auto w_entry = [&]() -> const auto& { return options.reverse ? *w_rev : *w_fwd; };
  auto w_next = [&] { options.reverse ? void(++w_rev) : void(++w_fwd); };
  // `a` comes before `b` in the direction of the read.
  auto before = [&](std::string_view a, std::string_view b) {
    return options.reverse ? a > b : a < b;
  };

  auto& rows = out.rows;
  while (options.limit == 0 || rows.size() < options.limit) {
    const bool have_stored = stored.valid(), have_w = w_valid();
    if (!have_stored && !have_w) break;
    if (have_stored && (!have_w || !before(w_entry().first, stored.key()))) {
      consumed();
      if (have_w && w_entry().first == stored.key()) {
        if (w_entry().second) rows.push_back({w_entry().first, *w_entry().second});
        w_next();
      } else if (!buffer.in_cleared_range(stored.key())) {
        rows.push_back({std::string(stored.key()), std::string(stored.value())});
      }
      KVQ_RETURN_IF_ERROR(stored.next());
    } else {
      if (w_entry().second) rows.push_back({w_entry().first, *w_entry().second});
      w_next();
    }
  }
  if (options.limit != 0 && rows.size() == options.limit) {
    if (options.reverse) {
      out.covered_begin = rows.back().key;
    } else {
      out.covered_end = rows.back().key + '\0';
    }
  }
  return out;
}

}  // namespace kvq::kv
