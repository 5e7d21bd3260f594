# SPDX-License-Identifier: Apache-2.0
"""kvq.Worker against a real kvq serve: one test per runner feature."""

import collections
import http.client
import http.server
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import unittest
import urllib.parse

from support import HERE, Server, ServerTest, kvq, uniq, wait_until

WORKER_MAIN = os.path.join(HERE, "worker_main.py")


def worker(client, **kw):
    kw.setdefault("poll_timeout", 1)
    kw.setdefault("health_timeout", 2)
    kw.setdefault("worker_id", uniq("w"))
    return kvq.Worker(client, **kw)


class Runner(ServerTest):

    def test_handler_result_becomes_the_jobs_result(self):
        t = self.new_type()
        w = worker(self.client, worker_type=uniq("wt"))

        @w.handler(t)
        def send(job):
            return {"to": job.data["to"], "type": job.type, "id": job.id}

        self.client.add(t, "j", {"to": "ada"})
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "j", timeout=10), {"to": "ada", "type": t, "id": "j"})
        job = self.client.get(t, "j")
        self.assertEqual((job["attempts"], job["errors"], job["lost_runs"]), (1, [], 0))

    def test_heartbeat_keeps_a_job_longer_than_its_timeout(self):
        t = self.new_type(timeout=0.6)
        w = worker(self.client)
        w.register(t, lambda job: time.sleep(2.5) or {"slept": 2.5})
        self.client.add(t, "long")
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "long", timeout=15), {"slept": 2.5})
        job = self.client.get(t, "long")
        # never lost, though the run took four times the type's timeout
        self.assertEqual((job["attempts"], job["lost_runs"], job["errors"]), (1, 0, []))

    def test_progress_is_reported(self):
        t = self.new_type()
        w = worker(self.client)
        seen = threading.Event()

        @w.handler(t)
        def steps(job):
            job.progress({"step": 1})
            seen.wait(10)
            return None

        self.client.add(t, "p")
        self.run_worker(w)
        wait_until(lambda: self.client.get(t, "p")["progress"] == {"step": 1}, 10,
                   message="the progress to show")
        seen.set()
        self.assertIsNone(self.client.result(t, "p", timeout=10))

    def fenced_by(self, change):
        t = self.new_type(timeout=1)
        w = worker(self.client)
        started, outcome = threading.Event(), {}

        @w.handler(t)
        def wait_for_cancel(job):
            started.set()
            outcome["cancelled"] = job.cancelled.wait(10)
            outcome["reason"] = job.cancel_reason
            try:
                job.progress("after")
            except kvq.Halted:
                outcome["halted"] = True
            return "ignored"

        self.client.add(t, "f")
        self.run_worker(w)
        self.assertTrue(started.wait(10))
        change(t, "f")
        wait_until(lambda: "halted" in outcome, 10, message="the handler to be cancelled")
        self.assertEqual((outcome["cancelled"], outcome["reason"]), (True, "halted"))
        return t

    def test_fencing_cancels_the_handler_when_its_job_is_removed(self):
        t = self.fenced_by(self.client.remove)
        with self.assertRaises(kvq.NotFound):
            self.client.get(t, "f")

    def test_fencing_cancels_the_handler_when_its_job_is_cancelled(self):
        t = self.fenced_by(self.client.cancel)
        time.sleep(0.3)  # what the handler returned is not sent
        job = self.client.get(t, "f")
        self.assertEqual((job["outcome"], job["result"]), ("cancelled", None))

    def test_an_exception_fails_the_job_under_the_retry_policy(self):
        t = self.new_type(max_attempts=3, backoff={"base": 1.2, "factor": 1, "jitter": 0})
        w = worker(self.client)
        calls = []

        @w.handler(t)
        def broken(job):
            calls.append(time.monotonic())
            raise ConnectionRefusedError("smtp down")

        self.client.add(t, "e", {"to": "ada"})
        self.run_worker(w)
        first = wait_until(lambda: (lambda j: j if j["errors"] else None)(self.client.get(t, "e")),
                           10, message="the first failure")
        # pending again, later: the type's backoff
        self.assertEqual((first["state"], first["attempts"]), ("pending", 1))
        self.assertGreater(first["scheduled_time"], first["errors"][0]["at"] + 1000)
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(t, "e", timeout=20)
        job = cm.exception.job
        self.assertEqual((job["state"], job["outcome"], job["attempts"], job["data"]),
                         ("finished", "dead", 3, {"to": "ada"}))
        self.assertEqual([(e["attempt"], e["kind"], e["message"], e["worker"]) for e in job["errors"]],
                         [(n, "ConnectionRefusedError", "smtp down", w.worker_id) for n in (1, 2, 3)])
        stack = job["errors"][0]["details"]["stack"]
        self.assertTrue(stack.startswith("Traceback"), stack)
        self.assertIn("in broken", stack)
        self.assertTrue(stack.rstrip().endswith("ConnectionRefusedError: smtp down"), stack)
        self.assertEqual(len(calls), 3)
        self.assertGreater(calls[1] - calls[0], 1.0)

    def test_no_retry_ends_the_job_dead_at_its_first_failure(self):
        t = self.new_type(max_attempts=5)
        w = worker(self.client)

        @w.handler(t)
        def refuse(job):
            raise kvq.NoRetry("no address", kind="BadInput", details={"field": "to"})

        self.client.add(t, "e", {})
        self.run_worker(w)
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(t, "e", timeout=10)
        job = cm.exception.job
        self.assertEqual(job["attempts"], 1)
        error = job["errors"][0]
        self.assertEqual((error["kind"], error["message"], error["details"]["details"]),
                         ("BadInput", "no address", {"field": "to"}))
        self.assertIn("Traceback", error["details"]["stack"])

    def test_retry_in_retries_after_that_long_instead_of_the_backoff(self):
        t = self.new_type(max_attempts=5, backoff={"base": 3600, "jitter": 0})
        w = worker(self.client)

        @w.handler(t)
        def limited(job):
            if not job.data.get("again"):
                self.client.update(t, job.id, job.lock, data={"again": True})
                raise kvq.RetryIn(0.2, "rate limited")
            return "ok"

        self.client.add(t, "e", {})
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "e", timeout=10), "ok")
        job = self.client.get(t, "e")
        self.assertEqual((job["attempts"], job["errors"][0]["message"]), (2, "rate limited"))

    def test_a_handler_can_ask_which_attempt_it_is(self):
        t = self.new_type(max_attempts=5)
        w = worker(self.client)
        seen = []

        @w.handler(t)
        def flaky(job):
            seen.append(job.attempt())
            if seen[-1] < 3:
                raise kvq.RetryIn(0, "not yet")
            return seen[-1]

        self.client.add(t, "e", {})
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "e", timeout=10), 3)
        self.assertEqual(seen, [1, 2, 3])

    def test_the_attempt_comes_with_the_accepted_job_without_a_request(self):
        # The accept's answer says which attempt the run is: attempt() asks nothing more (a
        # worker whose client reaches no server still answers).
        w = kvq.Worker(kvq.Client("http://127.0.0.1:9"), register=False, handle_signals=False)
        job = kvq.worker.Job(w, {"type": "t", "id": "j", "lock": "l", "data": {}, "attempt": 7},
                             1.0)
        self.assertEqual(job.attempt(), 7)

    def test_snooze_hands_the_job_back_without_an_attempt_or_an_error(self):
        t = self.new_type(max_attempts=1)
        w = worker(self.client)
        runs = []

        @w.handler(t)
        def not_now(job):
            runs.append(time.monotonic())
            if len(runs) == 1:
                raise kvq.Snooze(0.3)
            return "done"

        self.client.add(t, "e", {})
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "e", timeout=10), "done")
        job = self.client.get(t, "e")
        self.assertEqual((job["attempts"], job["errors"]), (1, []))
        self.assertGreaterEqual(runs[1] - runs[0], 0.3)

    def test_a_result_that_is_not_json_fails_the_job(self):
        t = self.new_type(max_attempts=1)
        w = worker(self.client)
        w.register(t, lambda job: {"when": object()})
        self.client.add(t, "x")
        self.run_worker(w)
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(t, "x", timeout=10)
        self.assertEqual(cm.exception.last_error["kind"], "TypeError")

    def test_concurrency_n_runs_n_at_once_and_never_more(self):
        t = self.new_type()
        n = 3
        w = worker(self.client, concurrency=n)
        mu, state = threading.Lock(), {"now": 0, "max": 0}

        @w.handler(t)
        def overlap(job):
            with mu:
                state["now"] += 1
                state["max"] = max(state["max"], state["now"])
            time.sleep(0.6)
            with mu:
                state["now"] -= 1
            return state["max"]

        self.client.add_many(t, [("c%d" % k, {}) for k in range(2 * n)])
        started = time.monotonic()
        self.run_worker(w)
        for k in range(2 * n):
            self.client.result(t, "c%d" % k, timeout=15)
        elapsed = time.monotonic() - started
        self.assertEqual(state["max"], n)
        self.assertLess(elapsed, 2 * n * 0.6)  # not one at a time

    def test_registers_and_comes_back_after_being_declared_dead(self):
        t = self.new_type(timeout=60)
        wt = uniq("wt")
        w = worker(self.client, worker_type=wt, health_timeout=1)
        started, outcome = threading.Event(), {}

        @w.handler(t)
        def long(job):
            started.set()
            outcome["cancelled"] = job.cancelled.wait(10)
            outcome["reason"] = job.cancel_reason

        self.client.add(t, "d")
        self.run_worker(w)
        self.assertTrue(started.wait(10))
        ws = self.client.list_workers(wt)["workers"]
        self.assertEqual([x["id"] for x in ws], [w.worker_id])
        # the server forgets the worker (as when it misses its health timeout): its job goes
        # back at once, the handler is cancelled and the worker registers again
        self.client.deregister_worker(wt, w.worker_id, w._token)
        wait_until(lambda: outcome.get("cancelled"), 10, message="the handler to be cancelled")
        self.assertEqual(outcome["reason"], "worker_lost")
        wait_until(lambda: [x["id"] for x in self.client.list_workers(wt)["workers"]]
                   == [w.worker_id], 10, message="the worker to register again")
        job = wait_until(lambda: (lambda j: j if j["attempts"] == 2 else None)(self.client.get(t, "d")),
                         10, message="the job to run again")
        self.assertEqual(job["errors"][0]["kind"], "worker_lost")

    def test_burst_runs_the_due_jobs_then_returns(self):
        t, other = self.new_type(), self.new_type()
        w = worker(self.client, concurrency=2, poll_timeout=30)
        ran = []
        w.register(t, lambda job: ran.append(job.id) or job.id)
        w.register(other, lambda job: ran.append(job.id))
        for i in range(5):
            self.client.add(t, "j%d" % i)
        self.client.add(other, "o")
        self.client.add(t, "later", scheduled_time=int(time.time() * 1000) + 3600000)
        started = time.monotonic()
        w.run(burst=True)
        self.assertLess(time.monotonic() - started, 10)
        self.assertEqual(sorted(ran), ["j0", "j1", "j2", "j3", "j4", "o"])
        self.assertEqual(self.client.counts(t),
                         {"pending": 1, "scheduled": 1, "running": 0, "finished": 5, "dead": 0,
                          "cancelled": 0})
        self.assertNotIn(w.worker_id, [x["id"] for x in self.client.list_workers("python")["workers"]])

    def test_burst_with_nothing_due_returns_at_once(self):
        t = self.new_type()
        w = worker(self.client, poll_timeout=30)
        w.register(t, lambda job: None)
        started = time.monotonic()
        w.run(burst=True)
        self.assertLess(time.monotonic() - started, 5)

    def test_a_missing_type_fails_run_at_once(self):
        w = worker(self.client)
        w.register(uniq("nosuch"), lambda job: None)
        with self.assertRaises(kvq.NotFound):
            w.run()


class Defaults(unittest.TestCase):

    def test_the_worker_defaults_are_the_clients_one_set(self):
        # docs/clients.md: the same in the Go and TypeScript clients
        w = kvq.Worker(kvq.Client("http://127.0.0.1:1"))
        self.assertEqual((w.concurrency, w.poll_timeout, w.grace, w.health_timeout),
                         (1, 10, 10, 10))
        self.assertAlmostEqual(w.heartbeat_fraction, 1 / 3)


class Retries(unittest.TestCase):

    def test_network_errors_are_retried_until_the_server_is_back(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        first = Server(port=port).start()
        data_dir = first.data_dir
        client = kvq.Client(first.url, timeout=5)
        t = uniq("net")
        client.put_type(t, 30)
        client.add(t, "j", {"n": 1})
        first.stop(keep_data=True)
        w = worker(client)
        w.register(t, lambda job: {"n": job.data["n"]})
        th = threading.Thread(target=w.run, daemon=True)
        th.start()  # nothing listens: register and accept retry with backoff
        time.sleep(1.5)
        self.assertTrue(th.is_alive())
        second = Server(port=port, data_dir=data_dir).start()
        try:
            self.assertEqual(client.result(t, "j", timeout=20), {"n": 1})
        finally:
            w.stop(grace=0)
            th.join(20)
            second.stop()
        self.assertFalse(th.is_alive())


class Flaky503Proxy:
    """An HTTP proxy in front of the real server that answers 503 unavailable, as a busy
    store does, to the first `fails` requests whose path ends with one of `suffixes`."""

    def __init__(self, upstream, suffixes, fails):
        target = urllib.parse.urlsplit(upstream)
        self.refused = collections.Counter()
        self.accept_counts = []
        proxy = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def do(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                path = self.path.split("?")[0]
                if path.startswith("/v1/accept/"):
                    proxy.accept_counts.append(json.loads(body)["count"])
                suffix = next((x for x in suffixes if path.endswith(x)), None)
                if suffix and proxy.refused[suffix] < fails:
                    proxy.refused[suffix] += 1
                    return self.answer(503, b'{"error":"unavailable","message":"busy"}')
                conn = http.client.HTTPConnection(target.hostname, target.port, timeout=60)
                conn.request(self.command, self.path, body=body or None,
                             headers={k: v for k, v in self.headers.items()
                                      if k.lower() not in ("host", "connection")})
                r = conn.getresponse()
                self.answer(r.status, r.read())
                conn.close()

            def answer(self, status, payload):
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = "http://127.0.0.1:%d" % self.httpd.server_address[1]
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class Unavailable(ServerTest):

    def test_503s_are_retried_with_backoff(self):
        t = self.new_type(max_attempts=1)
        proxy = Flaky503Proxy(self.server.url, ("/v1/accept/" + t, "/finish", "/fail"), 2)
        self.addCleanup(proxy.close)
        w = worker(kvq.Client(proxy.url, timeout=10))
        w.register(t, lambda job: (job.data.get("raise") and 1 / 0) or "done")
        self.client.add(t, "ok")
        self.client.add(t, "bad", {"raise": True})
        self.run_worker(w)
        self.assertEqual(self.client.result(t, "ok", timeout=20), "done")
        with self.assertRaises(kvq.JobDead) as cm:
            self.client.result(t, "bad", timeout=20)
        self.assertEqual(cm.exception.last_error["kind"], "ZeroDivisionError")
        self.assertEqual(dict(proxy.refused),
                         {"/v1/accept/" + t: 2, "/finish": 2, "/fail": 2})
        for jid in ("ok", "bad"):  # each finish or fail landed once, on its first run
            self.assertEqual(self.client.get(t, jid)["attempts"], 1)


class Slots(ServerTest):

    def test_accept_asks_for_as_many_jobs_as_there_are_free_slots(self):
        t = self.new_type()
        proxy = Flaky503Proxy(self.server.url, (), 0)
        self.addCleanup(proxy.close)
        w = worker(kvq.Client(proxy.url, timeout=10), concurrency=3, poll_timeout=0.3)
        release = threading.Event()
        w.register(t, lambda job: release.wait(10) and job.id)
        self.run_worker(w)
        wait_until(lambda: len(proxy.accept_counts) >= 1, 10, message="a first accept")
        self.assertEqual(proxy.accept_counts[0], 3)
        self.client.add(t, "a")
        wait_until(lambda: self.client.get(t, "a")["state"] == "running", 10)
        n = len(proxy.accept_counts)
        wait_until(lambda: len(proxy.accept_counts) > n + 1, 10, message="more accepts")
        self.assertEqual(set(proxy.accept_counts[n + 1:]), {2})
        self.client.add_many(t, [("b", {}), ("c", {}), ("d", {})])
        wait_until(lambda: len(list(self.client.iter_jobs(t, "running"))) == 3, 10)
        time.sleep(0.5)  # all slots busy: no accept while none is free
        busy = len(proxy.accept_counts)
        time.sleep(1.0)
        self.assertEqual(len(proxy.accept_counts), busy)
        self.assertEqual(self.client.get(t, "d")["state"], "pending")
        release.set()
        self.assertEqual(self.client.result(t, "d", timeout=10), "d")

    def test_several_types_each_with_its_handler(self):
        t1, t2 = self.new_type(), self.new_type()
        w = worker(self.client, concurrency=2)
        w.register(t1, lambda job: "one")
        w.register(t2, lambda job: "two")
        with self.assertRaises(ValueError):
            w.register(t1, lambda job: "again")
        self.client.add(t1, "x")
        self.client.add(t2, "y")
        self.run_worker(w)
        self.assertEqual((self.client.result(t1, "x", timeout=10),
                          self.client.result(t2, "y", timeout=10)), ("one", "two"))


class StopWhileStarting(unittest.TestCase):

    def test_stop_while_the_server_is_unreachable_returns(self):
        s = socket.socket()
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
        s.close()
        w = worker(kvq.Client("http://127.0.0.1:%d" % port, timeout=2))
        w.register("t", lambda job: None)
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        time.sleep(0.5)  # retrying to read its type
        w.stop()
        th.join(10)
        self.assertFalse(th.is_alive())


class Shutdown(ServerTest):

    def start_worker(self, t, wid, grace, mode):
        p = subprocess.Popen([sys.executable, WORKER_MAIN, self.server.url, t, wid, str(grace),
                              mode], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        def cleanup():
            if p.poll() is None:
                p.kill()
            p.communicate()
        self.addCleanup(cleanup)
        line = p.stdout.readline()
        self.assertTrue(line.startswith("started "), line + p.stderr.read() if not line else line)
        return p

    def test_sigterm_hands_the_running_job_back_without_a_lost_run(self):
        t = self.new_type(timeout=60)
        self.client.add(t, "slow")
        p = self.start_worker(t, "w-term", 0.5, "stubborn:30")
        started = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertLess(time.monotonic() - started, 10)
        self.assertIn("handed back %s/slow" % t, err)
        self.assertIn("unregistered", err)
        job = self.client.get(t, "slow")
        self.assertEqual((job["state"], job["lost_runs"], job["attempts"], job["errors"]),
                         ("pending", 0, 0, []))
        self.assertNotIn("w-term", [x["id"] for x in self.client.list_workers("python")["workers"]])
        # and it is accepted again at once
        self.assertEqual([j["id"] for j in self.client.accept(t, timeout=1)], ["slow"])

    def test_sigterm_stops_an_idle_worker_at_once(self):
        t = self.new_type(timeout=60)
        p = subprocess.Popen([sys.executable, WORKER_MAIN, self.server.url, t, "w-idle", "5",
                              "idle:30"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.addCleanup(lambda: p.poll() is None and p.kill())
        line = p.stdout.readline()
        self.assertEqual(line, "polling\n", p.stderr.read() if not line else line)
        started = time.monotonic()
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertLess(time.monotonic() - started, 2.5, err)  # not the 30 s of its poll
        self.assertIn("unregistered", err)
        # the cut accept took no job: one added now is pending, for the next worker
        self.client.add(t, "after")
        self.assertEqual([j["id"] for j in self.client.accept(t, timeout=1)], ["after"])

    def test_stop_ends_an_idle_workers_long_poll_at_once(self):
        t = self.new_type()
        w = worker(self.client, poll_timeout=30)
        w.register(t, lambda job: None)
        polling = threading.Event()
        set_poll_conn = w._set_poll_conn
        w._set_poll_conn = lambda conn: (set_poll_conn(conn), conn and polling.set())
        th = threading.Thread(target=w.run, daemon=True)
        th.start()
        self.assertTrue(polling.wait(10), "the worker never polled")
        started = time.monotonic()
        w.stop()
        th.join(10)
        self.assertFalse(th.is_alive())
        self.assertLess(time.monotonic() - started, 2)

    def test_sigterm_lets_a_handler_finish_within_the_grace(self):
        t = self.new_type(timeout=60)
        self.client.add(t, "quick")
        p = self.start_worker(t, "w-grace", 20, "stubborn:1")
        p.send_signal(signal.SIGTERM)
        out, err = p.communicate(timeout=20)
        self.assertEqual(p.returncode, 0, err)
        self.assertIn("exited", out)
        job = self.client.get(t, "quick")
        self.assertEqual((job["outcome"], job["result"], job["lost_runs"]),
                         ("succeeded", {"worked": 1.0}, 0))

    def test_a_second_signal_exits_at_once(self):
        t = self.new_type(timeout=60)
        self.client.add(t, "stuck")
        p = self.start_worker(t, "w-twice", 60, "stubborn:60")
        p.send_signal(signal.SIGINT)
        # Wait until the worker has taken the first signal: CPython runs a Python signal
        # handler once however many times the signal arrived before the main thread got to
        # it, so a second signal sent too soon (a loaded machine, 0.3 s) was never a second.
        first = p.stderr.readline()
        while first and "stopping" not in first:
            first = p.stderr.readline()
        self.assertIn("a second one exits at once", first)
        started = time.monotonic()
        p.send_signal(signal.SIGINT)
        out, err = p.communicate(timeout=10)
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual(p.returncode, 128 + signal.SIGINT, err)
        self.assertNotIn("exited", out)
        self.assertIn("exiting now", err)

    def test_a_killed_worker_s_job_comes_back_after_its_health_timeout(self):
        t = self.new_type(timeout=60)  # far longer than the worker's health timeout (1 s)
        self.client.add(t, "orphan")
        p = self.start_worker(t, "w-kill", 1, "sleep:60")
        p.kill()
        p.wait()
        job = wait_until(lambda: (lambda j: j if j["state"] == "pending" else None)(
            self.client.get(t, "orphan")), 10, message="the job to come back")
        self.assertEqual((job["lost_runs"], job["errors"][0]["kind"]), (1, "worker_lost"))


if __name__ == "__main__":
    unittest.main()
