// server/router.h — the route table: one handler per (method, path pattern), patterns with
// {placeholders} for single path segments. Not a switch: routes are data.
#pragma once

#include <map>
#include <string>
#include <variant>
#include <vector>

#include "server/api_error.h"
#include "server/http.h"

namespace kvq::server {

class Router {
 public:
  // Who may call a route when the server has a token: kToken routes need it; anyone may call
  // kPublic ones (the health check, the dashboard's page, which holds no data).
  enum class Access { kToken, kPublic };
  // Where a handler runs. kOnPool: on the server's worker pool, as it may block on the store.
  // kInline: where the request was read (an I/O thread), sparing two thread hand-offs, when
  // the store is nonblocking() (kv.h); the handler then makes only asynchronous store calls and
  // hands anything else to Exchange::offload, as their callbacks must. On other stores it runs
  // on the pool too.
  enum class Runs { kOnPool, kInline };

  // `pattern` like "/v1/jobs/{type}/{id}/finish"; "/" is the root. Blocking handlers run on the
  // server's worker pool, never on an I/O thread.
  void add(std::string method, std::string pattern, Handler handler, Access access = Access::kToken,
           Runs runs = Runs::kOnPool);

  struct Match {
    const Handler* handler = nullptr;
    std::string route;
    Access access = Access::kToken;
    Runs runs = Runs::kOnPool;
  };
  // Fills request.params and request.route; no_route or method_not_allowed otherwise.
  std::variant<Match, ApiError> match(Request& request) const;

  // The table, in the order routes were added: what docs/openapi.yaml must describe
  // (openapi_routes_test checks it).
  struct RouteInfo {
    std::string method;
    std::string pattern;
    Access access;
  };
  std::vector<RouteInfo> routes() const;

 private:
  struct Route {
    std::string method;
    std::string pattern;
    std::vector<std::string> parts;
    Handler handler;
    Access access;
    Runs runs;
  };
  // Whether `route`'s pattern matches the request's path, filling `params` if it does.
  static bool path_matches(const Route& route, const Request& request,
                           std::map<std::string, std::string>& params);
  std::vector<Route> routes_;
};

}  // namespace kvq::server
