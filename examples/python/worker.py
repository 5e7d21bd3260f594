#!/usr/bin/env python3
"""A kvq worker over the HTTP API: accept jobs of a type, work on them, finish or fail them.

Example:
    ./worker.py --type example
    ./worker.py --url https://kvq.example.com:7411 --ca-cert ca.pem --type example

What it does:
  1. registers as a worker (so the server knows it is alive),
  2. heartbeats in a background thread, every health_timeout / 3 seconds,
  3. long-polls for a job and runs the handler on it: `handle` "works" (sleeps,
     reporting progress with /update, which also tells the server it is still
     alive) and returns the job's result, which /finish keeps beside the job's
     data (its input). A handler that raises fails the job instead (/fail with
     the exception's message, class and traceback): the server keeps the error
     and runs the job again after the type's backoff, or ends it dead once its
     attempts are used up. The example handler raises for a job whose data has
     "fail": "why" (try `kvq add example bad '{"fail": "no such user"}'`),
  4. on Ctrl-C (SIGINT) or SIGTERM, hands the job it is working on back
     (snooze: pending again at once, its attempt not counted, and not a lost
     run), then unregisters (the server would put any job it still held back
     to pending at once too, counting a failed attempt).

Only the Python standard library is used.
"""

import argparse
import json
import os
import ssl
import signal
import socket
import threading
import time
import traceback
import urllib.error
import urllib.parse
import urllib.request


class Api:
    """A minimal client for the kvq HTTP API."""

    def __init__(self, url, token, ca_cert=None, client_cert=None, client_key=None):
        self.url = url.rstrip("/")
        self.token = token
        # For https://: check the server's certificate against ca_cert (else the system's
        # trusted CAs) and that it names the URL's host; present client_cert if given.
        self.context = None
        if self.url.startswith("https://"):
            self.context = ssl.create_default_context(cafile=ca_cert)
            if client_cert:
                self.context.load_cert_chain(client_cert, client_key)

    def call(self, method, path, body=None, timeout=30):
        """Send one request; return (status, parsed JSON body or None)."""
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.url + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        if self.token:
            req.add_header("Authorization", "Bearer " + self.token)
        try:
            with urllib.request.urlopen(req, timeout=timeout, context=self.context) as resp:
                raw = resp.read()
                return resp.status, (json.loads(raw) if raw else None)
        except urllib.error.HTTPError as err:  # 4xx/5xx: the body says why
            raw = err.read()
            return err.code, (json.loads(raw) if raw else None)


def quote(segment):
    return urllib.parse.quote(segment, safe="")


def heartbeat_loop(api, wpath, state, every, stop):
    """Tell the server we are alive until `stop` is set. If the server declared us
    dead (409 halted), register again: our old jobs were already given away."""
    while not stop.wait(every):
        try:
            status, body = api.call("POST", wpath + "/heartbeat", {"token": state["token"]})
            if status == 409:
                print("heartbeat: declared dead, registering again")
                status, body = api.call("POST", state["register_path"], state["register_body"])
                if status == 200:
                    state["token"] = body["token"]
            elif status != 200:
                print("heartbeat failed: %s %s" % (status, body))
        except OSError as err:  # server unreachable: try again next time
            print("heartbeat failed: %s" % err)


def job_path(job):
    return "/v1/jobs/%s/%s" % (quote(job["type"]), quote(job["id"]))


def hand_back(api, job):
    """Puts a job we hold back to pending at once, as it came to us. A snooze
    does not count this attempt, and unlike dying or unregistering with it, it
    is not a lost run."""
    status, _ = api.call("POST", job_path(job) + "/snooze", {"lock": job["lock"], "delay": 0},
                         timeout=5)
    return status == 200


class Halted(Exception):
    """The server took the job away from us (409 halted): drop it."""


def handle(job, report_progress, work_seconds, steps=5):
    """The example's work on one job: returns its result, or raises to fail it.
    Replace it with yours."""
    if job["data"].get("fail"):
        raise ValueError(job["data"]["fail"])
    for step in range(1, steps + 1):
        time.sleep(work_seconds / steps)
        report_progress({"step": step, "of": steps})
    return {"done": True}


def error_of(exc):
    """The error a fail reports for an exception: its message, its class as the
    kind, and its traceback."""
    return {"message": str(exc) or type(exc).__name__, "kind": type(exc).__name__,
            "details": {"stack": traceback.format_exc()}}


def process(api, job, work_seconds):
    """Runs the handler on one job, then finishes it with the handler's result,
    or fails it with the handler's exception. Returns what became of the job:
    "finished", "failed, retries at MS", "failed, dead", "halted" if the job
    was taken away from us (409 halted) and we dropped it, or what the server
    answered when it refused the call."""
    jpath = job_path(job)

    def report_progress(progress):
        # An update is also a heartbeat for the job: without one within the
        # type's timeout, the server gives the job to another worker.
        status, _ = api.call("POST", jpath + "/update", {"lock": job["lock"], "progress": progress})
        if status == 409:
            raise Halted()

    try:
        result = handle(job, report_progress, work_seconds)
    except Halted:
        return "halted"
    except Exception as exc:  # the handler failed: the server decides when it runs again
        status, body = api.call("POST", jpath + "/fail", {"lock": job["lock"], "error": error_of(exc)})
        if status != 200:
            return "halted" if status == 409 else "fail answered %s %s" % (status, body)
        return "failed, dead" if body["dead"] else "failed, retries at %s" % body["retry_at"]
    status, body = api.call("POST", jpath + "/finish", {"lock": job["lock"], "result": result})
    if status != 200:
        return "halted" if status == 409 else "finish answered %s %s" % (status, body)
    return "finished"


def main():
    parser = argparse.ArgumentParser(description="Accept and process jobs from a kvq server.")
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
    parser.add_argument("--id", default="%s-%d" % (socket.gethostname(), os.getpid()),
                        help="worker id (default: HOST-PID)")
    parser.add_argument("--health-timeout", type=float, default=10,
                        help="seconds without a heartbeat before the server declares this "
                             "worker dead (default: %(default)s)")
    parser.add_argument("--work-seconds", type=float, default=1.0,
                        help="how long each job 'takes' (default: %(default)s)")
    args = parser.parse_args()
    try:
        api = Api(args.url, args.token, args.ca_cert, args.client_cert, args.client_key)
    except (OSError, ssl.SSLError) as err:
        raise SystemExit("cannot load the TLS certificates: %s" % err)

    # SIGTERM behaves like Ctrl-C: both raise KeyboardInterrupt in this thread,
    # even while it waits in a long-poll, so the `finally` below always runs.
    def on_signal(signum, frame):
        raise KeyboardInterrupt
    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)

    # 1. Register. Workers are grouped by a "worker type"; we use the job type.
    register_path = "/v1/workers/" + quote(args.type)
    register_body = {"id": args.id, "info": {"pid": os.getpid()},
                     "health_timeout": args.health_timeout}
    try:
        status, body = api.call("POST", register_path, register_body)
    except OSError as err:  # unreachable, or TLS refused (a certificate, here or there)
        raise SystemExit("cannot reach %s: %s" % (api.url, getattr(err, "reason", err)))
    if status != 200:
        raise SystemExit("register failed: %s %s" % (status, body))
    state = {"token": body["token"], "register_path": register_path,
             "register_body": register_body}
    wpath = "%s/%s" % (register_path, quote(args.id))
    print("worker %s registered for type %r at %s" % (args.id, args.type, api.url))

    # 2. Heartbeat in the background.
    stop = threading.Event()
    threading.Thread(target=heartbeat_loop, daemon=True,
                     args=(api, wpath, state, args.health_timeout / 3, stop)).start()

    held = []  # jobs accepted and not yet finished or given up
    try:
        while True:
            # 3. Wait up to 30 s for a job. Passing our worker id ties the job to
            #    us: if we die or unregister, it goes back to pending at once.
            try:
                status, body = api.call("POST", "/v1/accept/" + quote(args.type),
                                        {"timeout": 30, "worker": args.id}, timeout=45)
            except OSError as err:  # server unreachable: back off, then retry
                print("accept failed: %s" % err)
                time.sleep(1)
                continue
            if status == 204:       # no job in 30 s: just ask again
                continue
            if status != 200:
                print("accept failed: %s %s" % (status, body))
                time.sleep(1)
                continue
            for job in body["jobs"]:
                held.append(job)
            while held:
                job = held[0]
                outcome = process(api, job, args.work_seconds)
                if outcome == "halted":
                    print("abandoned %s (halted: no longer ours)" % job["id"])
                elif outcome == "finished":
                    print("finished %s" % job["id"])
                elif outcome.startswith("failed, "):
                    print("failed %s: %s" % (job["id"], outcome[len("failed, "):]))
                else:
                    print("could not end %s: %s" % (job["id"], outcome))
                held.pop(0)
    except KeyboardInterrupt:
        print("stopping")
    finally:
        # 4. Hand back what we hold, then unregister.
        signal.signal(signal.SIGINT, signal.SIG_IGN)   # don't interrupt the goodbye
        signal.signal(signal.SIGTERM, signal.SIG_IGN)
        for job in held:
            try:
                if hand_back(api, job):
                    print("handed back %s" % job["id"])
            except OSError as err:
                print("handing back %s failed: %s" % (job["id"], err))
        stop.set()
        try:
            api.call("DELETE", "%s?token=%s" % (wpath, quote(state["token"])), timeout=5)
            print("worker %s unregistered" % args.id)
        except OSError as err:
            print("unregister failed: %s" % err)


if __name__ == "__main__":
    main()
