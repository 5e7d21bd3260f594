// kvq/serve.h — `kvq serve`, the application: it opens the store, the jobs and workers layers,
// and serves them through the HTTP/JSON front end (docs/http-api.md) and, when asked, the
// beanstalkd protocol's (docs/beanstalk.md), as a function the kvq command line (or an
// application embedding it) calls. The two front ends know nothing of each other; this is
// where they are put together.
#pragma once

namespace kvq::app {

// Parses the serve flags (see `kvq serve --help`), serves over the store they name (an LMDB data
// directory by default, an etcd cluster, or with --ephemeral a temporary directory removed on
// exit) until SIGINT or SIGTERM, and returns the process exit code (0 after a clean stop, 1 when
// the server could not start, 2 for bad arguments).
int run_serve(int argc, char** argv);

}  // namespace kvq::app
