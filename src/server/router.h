// server/router.h — the route table: one handler per (method, path pattern), patterns with
// {placeholders} for single path segments. Not a switch: routes are data.
#pragma once

#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/http.h"

namespace kvq::server {

class Router {
 public:
  // `pattern` like "/v1/jobs/{type}/{id}/finish". Blocking handlers run on the server's worker
  // pool, never on an I/O thread.
  void add(std::string method, std::string pattern, Handler handler);

  struct Match {
    const Handler* handler = nullptr;
    std::string route;
  };
  // Fills request.params and request.route; no_route or method_not_allowed otherwise.
  std::variant<Match, ApiError> match(Request& request) const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> parts;
    Handler handler;
  };
  std::vector<Route> routes_;
};

}  // namespace kvq::server
