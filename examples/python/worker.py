#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""A kvq worker with the kvq Python package (clients/python): kvq.Worker does the work
around the handler.

Example:
    ./worker.py --type example
    ./worker.py --type example --concurrency 4
    ./worker.py --url https://kvq.example.com:7411 --ca-cert ca.pem --type example

The runner registers the worker (so if it dies, the server gives its jobs back at once),
accepts up to --concurrency jobs at once and runs `handle` on each in a thread, heartbeats
them well inside the type's timeout, finishes a job with what `handle` returns, and fails it
with the exception `handle` raises (message, class and traceback; the server retries it
after the type's backoff, or ends it dead once its attempts are used up). The example
handler raises for a job whose data has "fail": "why" (try
`kvq add example bad '{"fail": "no such user"}'`).

Ctrl-C (SIGINT) or SIGTERM stops it: no more accepts, running jobs get --grace seconds to
finish, the rest are handed back (pending again at once, neither an attempt nor a lost run
counted), then it unregisters. A second signal exits at once.

Install the package (clients/python/README.md), or run this from a kvq checkout: it then
imports the package from ../../clients/python.
"""

import argparse
import logging
import os
import socket
import ssl
import sys

try:
    import kvq
except ImportError:  # run from a checkout, the package not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "clients", "python"))
    import kvq


def handle(job, work_seconds, steps=5):
    """The example's work on one job: returns its result, or raises to fail it. Replace it
    with yours."""
    if job.data.get("fail"):
        raise ValueError(job.data["fail"])
    for step in range(1, steps + 1):
        if job.cancelled.wait(work_seconds / steps):  # taken away, or shutting down
            return None  # what a cancelled handler returns is dropped
        job.progress({"step": step, "of": steps})
    return {"done": True}


def main():
    parser = argparse.ArgumentParser(description="Accept and process jobs from a kvq server.")
    parser.add_argument("--url", default=os.environ.get("KVQ_URL", kvq.DEFAULT_URL),
                        help="server URL (default: $KVQ_URL or %(default)s)")
    parser.add_argument("--token", default=os.environ.get("KVQ_TOKEN"),
                        help="bearer token, if the server has one (default: $KVQ_TOKEN)")
    parser.add_argument("--ca-cert", default=os.environ.get("KVQ_CA_CERT"),
                        help="https: trust the CAs in this PEM file (default: $KVQ_CA_CERT, "
                             "else the system's trust store)")
    parser.add_argument("--client-cert", default=os.environ.get("KVQ_CLIENT_CERT"),
                        help="https: present this certificate (PEM), for a server started with "
                             "--tls-client-ca (default: $KVQ_CLIENT_CERT)")
    parser.add_argument("--client-key", default=os.environ.get("KVQ_CLIENT_KEY"),
                        help="the client certificate's private key (default: $KVQ_CLIENT_KEY)")
    parser.add_argument("--type", default="example", help="job type (default: %(default)s)")
    parser.add_argument("--id", default="%s-%d" % (socket.gethostname(), os.getpid()),
                        help="worker id (default: HOST-PID)")
    parser.add_argument("--concurrency", type=int, default=1,
                        help="jobs worked on at once (default: %(default)s)")
    parser.add_argument("--health-timeout", type=float, default=10,
                        help="seconds without a heartbeat before the server declares this "
                             "worker dead (default: %(default)s)")
    parser.add_argument("--grace", type=float, default=30,
                        help="seconds running jobs get to finish on shutdown (default: %(default)s)")
    parser.add_argument("--work-seconds", type=float, default=1.0,
                        help="how long each job 'takes' (default: %(default)s)")
    args = parser.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(message)s", stream=sys.stdout)
    try:
        context = None
        if args.url.startswith("https://"):
            context = ssl.create_default_context(cafile=args.ca_cert)
            if args.client_cert:
                context.load_cert_chain(args.client_cert, args.client_key)
        client = kvq.Client(args.url, token=args.token, ssl_context=context)
    except (OSError, ssl.SSLError, ValueError) as err:
        sys.exit("cannot set up the client: %s" % err)

    # The worker type groups workers in the server's membership; we use the job type.
    worker = kvq.Worker(client, worker_id=args.id, worker_type=args.type,
                        concurrency=args.concurrency, health_timeout=args.health_timeout,
                        grace=args.grace, poll_timeout=5)
    worker.register(args.type, lambda job: handle(job, args.work_seconds))
    try:
        worker.run()  # until SIGINT or SIGTERM
    except kvq.KvqError as err:
        sys.exit("kvq: %s" % err)


if __name__ == "__main__":
    main()
