#include "server/router.h"

#include <variant>

namespace kvq::server {
namespace {

// The root "/" has no segments, as requests for it have (http_server.cc's split_target).
std::vector<std::string> split(const std::string& pattern) {
  std::vector<std::string> parts;
  if (pattern == "/") return parts;
  size_t start = 1;
  while (start <= pattern.size()) {
    size_t end = pattern.find('/', start);
    if (end == std::string::npos) end = pattern.size();
    parts.push_back(pattern.substr(start, end - start));
    start = end + 1;
  }
  return parts;
}

bool is_placeholder(const std::string& part) {
  return part.size() > 2 && part.front() == '{' && part.back() == '}';
}

}  // namespace

std::string percent_decode(std::string_view text, bool plus_is_space) {
  std::string out;
  out.reserve(text.size());
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c == '%' && i + 2 < text.size()) {
      auto hex = [](char h) -> int {
        if (h >= '0' && h <= '9') return h - '0';
        if (h >= 'a' && h <= 'f') return h - 'a' + 10;
        if (h >= 'A' && h <= 'F') return h - 'A' + 10;
        return -1;
      };
      const int hi = hex(text[i + 1]), lo = hex(text[i + 2]);
      if (hi >= 0 && lo >= 0) {
        out += static_cast<char>(hi * 16 + lo);
        i += 2;
        continue;
      }
    }
    out += (plus_is_space && c == '+') ? ' ' : c;
  }
  return out;
}

void split_target(std::string_view target, Request& request) {
  const auto q = target.find('?');
  std::string_view path = target.substr(0, q);
  size_t start = 1;
  while (start <= path.size()) {
    size_t end = path.find('/', start);
    if (end == std::string_view::npos) end = path.size();
    request.segments.push_back(percent_decode(path.substr(start, end - start), false));
    start = end + 1;
  }
  if (!request.segments.empty() && request.segments.back().empty()) request.segments.pop_back();
  if (q == std::string_view::npos) return;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    auto amp = query.find('&');
    auto pair = query.substr(0, amp);
    auto eq = pair.find('=');
    request.query[percent_decode(pair.substr(0, eq), true)] =
        eq == std::string_view::npos ? "" : percent_decode(pair.substr(eq + 1), true);
    if (amp == std::string_view::npos) break;
    query = query.substr(amp + 1);
  }
}

void Router::add(std::string method, std::string pattern, Handler handler, Access access,
                 Runs runs) {
  auto parts = split(pattern);
  routes_.push_back(
      {std::move(method), std::move(pattern), std::move(parts), std::move(handler), access, runs});
}

bool Router::path_matches(const Route& route, const Request& request,
                          std::map<std::string, std::string>& params) {
  if (route.parts.size() != request.segments.size()) return false;
  for (size_t i = 0; i < route.parts.size(); ++i) {
    if (is_placeholder(route.parts[i])) {
      if (request.segments[i].empty()) return false;
      params[route.parts[i].substr(1, route.parts[i].size() - 2)] = request.segments[i];
    } else if (route.parts[i] != request.segments[i]) {
      return false;
    }
  }
  return true;
}

std::vector<Router::RouteInfo> Router::routes() const {
  std::vector<RouteInfo> out;
  out.reserve(routes_.size());
  for (const auto& route : routes_) out.push_back({route.method, route.pattern, route.access});
  return out;
}

std::variant<Router::Match, ApiError> Router::match(Request& request) const {
  bool path_matched = false;
  for (const auto& route : routes_) {
    std::map<std::string, std::string> params;
    if (!path_matches(route, request, params)) continue;
    path_matched = true;
    if (route.method != request.method) continue;
    request.params = std::move(params);
    request.route = route.pattern;
    return Match{&route.handler, route.pattern, route.access, route.runs};
  }
  if (path_matched)
    return ApiError{405, "method_not_allowed", request.method + " is not allowed on this path"};
  return ApiError{404, "no_route", "no route for this path"};
}

}  // namespace kvq::server
