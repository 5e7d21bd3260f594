#!/usr/bin/env python3
"""Add jobs to a kvq server over its HTTP API.

Example:
    ./producer.py --type email --count 10
    ./producer.py --url https://kvq.example.com:7411 --ca-cert ca.pem --type email

A job belongs to a type. Before jobs of a type can be added, the type needs a
timeout: how long a worker may go without reporting progress before the job is
given to someone else. This script sets that timeout, then adds --count jobs.

Only the Python standard library is used.
"""

import argparse
import json
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request


def tls_context(url, ca_cert, client_cert, client_key):
    """For an https:// URL: check the server's certificate against ca_cert (else the
    system's trusted CAs) and that it names the URL's host, and present client_cert
    if given. None for http://."""
    if not url.startswith("https://"):
        return None
    context = ssl.create_default_context(cafile=ca_cert)
    if client_cert:
        context.load_cert_chain(client_cert, client_key)
    return context


def call(base_url, token, method, path, body=None, context=None):
    """Send one request; return (status, parsed JSON body or None)."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(base_url + path, data=data, method=method)
    req.add_header("Content-Type", "application/json")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(req, timeout=30, context=context) as resp:
            raw = resp.read()
            return resp.status, (json.loads(raw) if raw else None)
    except urllib.error.HTTPError as err:  # 4xx/5xx: the body says why
        raw = err.read()
        return err.code, (json.loads(raw) if raw else None)


def main():
    parser = argparse.ArgumentParser(description="Add N jobs of a type to a kvq server.")
    parser.add_argument("--url", default=os.environ.get("KVQ_URL", "http://127.0.0.1:7411"),
                        help="server URL (default: $KVQ_URL or %(default)s)")
    parser.add_argument("--token", default=os.environ.get("KVQ_TOKEN"),
                        help="bearer token, if the server has one (default: $KVQ_TOKEN)")
    parser.add_argument("--ca-cert", default=os.environ.get("KVQ_CA_CERT"),
                        help="https: trust the CAs in this PEM file for the server's certificate "
                             "(default: $KVQ_CA_CERT, else the system's trust store)")
    parser.add_argument("--client-cert", default=os.environ.get("KVQ_CLIENT_CERT"),
                        help="https: present this certificate (PEM), for a server started with "
                             "--tls-client-ca (default: $KVQ_CLIENT_CERT)")
    parser.add_argument("--client-key", default=os.environ.get("KVQ_CLIENT_KEY"),
                        help="the client certificate's private key (default: $KVQ_CLIENT_KEY)")
    parser.add_argument("--type", default="example", help="job type (default: %(default)s)")
    parser.add_argument("--count", type=int, default=10, help="jobs to add (default: %(default)s)")
    parser.add_argument("--timeout", type=float, default=30,
                        help="the type's timeout in seconds (default: %(default)s)")
    args = parser.parse_args()
    url = args.url.rstrip("/")
    jtype = urllib.parse.quote(args.type, safe="")
    try:
        context = tls_context(url, args.ca_cert, args.client_cert, args.client_key)
    except (OSError, ssl.SSLError) as err:
        sys.exit("cannot load the TLS certificates: %s" % err)

    # 1. Give the type a timeout (PUT is idempotent: fine to do every time).
    try:
        status, body = call(url, args.token, "PUT", "/v1/types/" + jtype,
                            {"timeout": args.timeout}, context)
    except OSError as err:  # unreachable, or TLS refused (a certificate, here or there)
        sys.exit("cannot reach %s: %s" % (url, getattr(err, "reason", err)))
    if status != 200:
        sys.exit("setting the timeout failed: %s %s" % (status, body))
    print("type %r: timeout %s s" % (args.type, body["timeout"]))

    # 2. Add the jobs. An id names a job; adding an id that already exists
    #    replaces that job, so we make ids unique with a timestamp.
    prefix = "job-%d" % int(time.time() * 1000)
    for n in range(args.count):
        job_id = "%s-%d" % (prefix, n)
        status, body = call(url, args.token, "POST", "/v1/jobs/" + jtype,
                            {"id": job_id, "data": {"n": n}}, context)
        if status != 200:
            sys.exit("adding %s failed: %s %s" % (job_id, status, body))
        print("added %s" % job_id)
    print("added %d jobs of type %r to %s" % (args.count, args.type, url))


if __name__ == "__main__":
    main()
