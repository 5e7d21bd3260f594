// server/process_metrics.h — the series of /metrics that describe the process and its build
// rather than jobs: Prometheus's standard process_* (as its client libraries export them, read
// from /proc on Linux) and kvq_build_info; and the live workers by type, read from the store.
#pragma once

#include <ostream>

#include "kvq/workers.h"

namespace kvq::server {

// process_cpu_seconds_total, process_resident_memory_bytes, process_virtual_memory_bytes,
// process_open_fds, process_max_fds and process_start_time_seconds of this process. A value
// that cannot be read (no /proc) is left out, never shown as 0.
void write_process_metrics(std::ostream& out);

// kvq_build_info{version="..."} 1.
void write_build_info(std::ostream& out);

// kvq_workers{worker_type="..."}: the live workers of each type, as every server sees them.
void write_live_workers(std::ostream& out, workers::Workers& workers);

}  // namespace kvq::server
