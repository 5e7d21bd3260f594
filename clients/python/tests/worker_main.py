# SPDX-License-Identifier: Apache-2.0
"""A worker process for the shutdown tests: python3 worker_main.py URL TYPE WORKER_ID GRACE MODE

MODE "sleep:S": the handler works S seconds (stopping early if cancelled) and returns;
"stubborn:S": it ignores cancellation for S seconds; "idle:S": the worker long-polls S
seconds per accept (its poll_timeout) and prints "polling" once its first accept is under way.
It prints "started ID" when a handler starts, and the runner logs to stderr."""

import logging
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

import kvq  # noqa: E402


def main():
    url, jtype, worker_id, grace, mode = sys.argv[1:6]
    how, _, seconds = mode.partition(":")
    seconds = float(seconds)
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stderr)
    worker = kvq.Worker(kvq.Client(url), worker_id=worker_id, grace=float(grace),
                        poll_timeout=seconds if how == "idle" else 1, health_timeout=1)
    if how == "idle":
        set_poll_conn = worker._set_poll_conn

        def polling(conn):
            set_poll_conn(conn)
            if conn is not None:
                print("polling", flush=True)
        worker._set_poll_conn = polling

    @worker.handler(jtype)
    def handle(job):
        print("started", job.id, flush=True)
        if how == "stubborn":
            time.sleep(seconds)
        else:
            job.cancelled.wait(seconds)
        return {"worked": seconds}

    worker.run()
    print("exited", flush=True)


if __name__ == "__main__":
    main()
