// kvq/server.h — `kvq serve`, the HTTP/JSON server (docs/http-api.md), as a function the kvq
// command line (or an application embedding it) calls.
#pragma once

namespace kvq::server {

// Parses the serve flags (see `kvq serve --help`), serves over the store they name (an LMDB data
// directory by default, or an etcd cluster) until SIGINT or SIGTERM, and returns the process exit
// code (0 after a clean stop, 1 when the server could not start, 2 for bad arguments).
int run_serve(int argc, char** argv);

}  // namespace kvq::server
