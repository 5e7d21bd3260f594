#!/usr/bin/env python3
# SPDX-License-Identifier: Apache-2.0
"""Add jobs to a kvq server with the kvq Python package (clients/python).

Example:
    ./producer.py --type example --count 10
    ./producer.py --type example --count 1 --wait      # and await the job's result
    ./producer.py --url https://kvq.example.com:7411 --ca-cert ca.pem --type example

A job belongs to a type, and a type needs a timeout before jobs can be added: how long a
worker may go without reporting before the job is given to someone else. This script sets
it, then adds --count jobs (in one transaction), and with --wait awaits their results.

Install the package (clients/python/README.md), or run this from a kvq checkout: it then
imports the package from ../../clients/python.
"""

import argparse
import os
import ssl
import sys
import time

try:
    import kvq
except ImportError:  # run from a checkout, the package not installed
    sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                    "..", "..", "clients", "python"))
    import kvq


def tls_context(url, ca_cert, client_cert, client_key):
    """For https://: trust ca_cert (else the system's CAs), present client_cert if given."""
    if not url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=ca_cert)
    if client_cert:
        context.load_cert_chain(client_cert, client_key)
    return context


def main():
    parser = argparse.ArgumentParser(description="Add N jobs of a type to a kvq server.")
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
    parser.add_argument("--count", type=int, default=10, help="jobs to add (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=30,
                        help="the type's timeout in seconds (default: %(default)s)")
    parser.add_argument("--wait", action="store_true", help="await each job's result")
    args = parser.parse_args()
    try:
        context = tls_context(args.url, args.ca_cert, args.client_cert, args.client_key)
        client = kvq.Client(args.url, token=args.token, ssl_context=context)
    except (OSError, ssl.SSLError, ValueError) as err:
        sys.exit("cannot set up the client: %s" % err)

    try:
        # 1. Give the type a timeout (idempotent: fine to do every time).
        jtype = client.put_type(args.type, args.timeout)
        print("type %r: timeout %s s" % (args.type, jtype["timeout"]))

        # 2. Add the jobs. An id names a job; adding an id that exists replaces that job, so
        #    we make ids unique with a timestamp.
        prefix = "job-%d" % int(time.time() * 1000)
        ids = ["%s-%d" % (prefix, n) for n in range(args.count)]
        for start in range(0, len(ids), 1000):
            client.add_many(args.type, [(jid, {"n": n})
                                        for n, jid in enumerate(ids[start:start + 1000], start)])
        for jid in ids:
            print("added %s" % jid)
        print("added %d jobs of type %r to %s" % (args.count, args.type, args.url))

        # 3. Optionally, await the results.
        if args.wait:
            for jid in ids:
                try:
                    print("result of %s: %s" % (jid, client.result(args.type, jid, timeout=600)))
                except kvq.JobFailed as err:
                    print("%s: %s" % (jid, err))
    except kvq.KvqError as err:
        sys.exit("kvq: %s" % err)


if __name__ == "__main__":
    main()
