"""GET /metrics on failures: the per-type job counters and histograms (Jobs::type_stats) move as
jobs succeed, fail, are retried, end dead and are cancelled through the HTTP API, and every
histogram is well formed (HELP and TYPE lines, buckets cumulative in ascending `le`, +Inf equal
to _count); kvq_jobs counts the scheduled, dead and cancelled jobs."""

import math
import re
import time
import unittest

from kvq_server import ServerTestCase, q, uniq

SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})? (\S+)$')
LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')

COUNTERS = ("succeeded", "failed", "lost", "retried", "dead", "cancelled")
HISTOGRAMS = ("kvq_job_queue_latency_seconds", "kvq_job_run_time_seconds")


def parse(text):
    """{name: {"help", "type"}} from the HELP and TYPE lines, and the samples as a list of
    (name, {label: value}, float)."""
    meta, samples = {}, []
    for line in text.splitlines():
        if line.startswith("# HELP "):
            name, _, help_text = line[len("# HELP "):].partition(" ")
            meta.setdefault(name, {})["help"] = help_text
        elif line.startswith("# TYPE "):
            name, _, kind = line[len("# TYPE "):].partition(" ")
            meta.setdefault(name, {})["type"] = kind
        elif line and not line.startswith("#"):
            m = SAMPLE.match(line)
            if not m:
                raise AssertionError("not a sample line: %r" % line)
            labels = dict(LABEL.findall(m.group(2) or ""))
            samples.append((m.group(1), labels, float(m.group(3))))
    return meta, samples


class MetricsOnFailures(ServerTestCase):

    def metrics(self):
        r = self.c.get("/metrics")
        self.assertEqual(r.status, 200, r)
        self.assertTrue(r.headers["content-type"].startswith("text/plain"), r.headers)
        return parse(r.body.decode())

    def value(self, samples, name, **labels):
        found = [v for n, l, v in samples if n == name and l == labels]
        self.assertLessEqual(len(found), 1, (name, labels))
        return found[0] if found else None

    def histogram(self, meta, samples, name, jtype):
        """The histogram of `jtype` after checking it is well formed: [(le, cumulative)], sum, count."""
        self.assertEqual(meta.get(name, {}).get("type"), "histogram", name)
        self.assertTrue(meta[name].get("help"), name)
        buckets = [(l["le"], v) for n, l, v in samples
                   if n == name + "_bucket" and l.get("type") == jtype]
        self.assertGreater(len(buckets), 1, name)
        self.assertEqual(buckets[-1][0], "+Inf", "the last bucket is +Inf")
        bounds = [float(le) for le, _ in buckets]
        self.assertEqual(bounds, sorted(bounds), "buckets in ascending le")
        self.assertEqual(len(set(bounds)), len(bounds), "no le twice")
        counts = [v for _, v in buckets]
        for before, after in zip(counts, counts[1:]):
            self.assertLessEqual(before, after, "cumulative buckets never decrease: %r" % buckets)
        total = self.value(samples, name + "_count", type=jtype)
        total_sum = self.value(samples, name + "_sum", type=jtype)
        self.assertEqual(counts[-1], total, "+Inf equals _count")
        self.assertGreaterEqual(total_sum, 0)
        return [(float(le), v) for le, v in buckets], total_sum, total

    def test_counters_histograms_and_counts_follow_failures(self):
        t, c = uniq("mfail"), self.c
        c.set_timeout(t, 30)
        meta, samples = self.metrics()
        for counter in COUNTERS:
            name = "kvq_jobs_%s_total" % counter
            self.assertEqual(meta.get(name, {}).get("type"), "counter", name)
            self.assertTrue(meta[name].get("help"), name)
            self.assertIsNone(self.value(samples, name, type=t), "a new type has not counted yet")

        # ok: due 5 s ago, so its accept waited at least 5 s; held 0.3 s, then finished.
        past = int(time.time() * 1000) - 5000
        self.assertStatus(c.add(t, "ok", scheduled_time=past), 200)
        job = self.assertStatus(c.accept(t), 200)["jobs"][0]
        self.assertEqual(job["id"], "ok")
        time.sleep(0.3)
        self.assertStatus(c.post("/v1/jobs/%s/ok/finish" % q(t), {"lock": job["lock"], "result": {"n": 1}}), 200)

        # retry: fails, to be retried in a minute (pending, scheduled).
        self.assertStatus(c.add(t, "retry"), 200)
        job = self.assertStatus(c.accept(t), 200)["jobs"][0]
        answer = self.assertStatus(c.post("/v1/jobs/%s/retry/fail" % q(t), {
            "lock": job["lock"], "error": {"message": "try later"}, "retry_in": 60}), 200)
        self.assertEqual((answer["dead"], answer["attempt"]), (False, 1), answer)

        # dead: fails and is not to be retried.
        self.assertStatus(c.add(t, "dead"), 200)
        job = self.assertStatus(c.accept(t), 200)["jobs"][0]
        answer = self.assertStatus(c.post("/v1/jobs/%s/dead/fail" % q(t), {
            "lock": job["lock"], "error": {"message": "bad input", "kind": "invalid"}, "retry": False}), 200)
        self.assertEqual((answer["dead"], answer["retry_at"]), (True, None), answer)

        # cancelled while pending (no run), and while running (a run that ends).
        self.assertStatus(c.add(t, "cancel-pending"), 200)
        self.assertStatus(c.post("/v1/jobs/%s/cancel-pending/cancel" % q(t)), 200)
        self.assertStatus(c.add(t, "cancel-running"), 200)
        job = self.assertStatus(c.accept(t), 200)["jobs"][0]
        self.assertEqual(job["id"], "cancel-running")
        self.assertStatus(c.post("/v1/jobs/%s/cancel-running/cancel" % q(t)), 200)

        meta, samples = self.metrics()
        got = {counter: self.value(samples, "kvq_jobs_%s_total" % counter, type=t) for counter in COUNTERS}
        self.assertEqual(got, {"succeeded": 1, "failed": 2, "lost": 0, "retried": 1, "dead": 1, "cancelled": 2})

        buckets, total_sum, total = self.histogram(meta, samples, "kvq_job_queue_latency_seconds", t)
        self.assertEqual(total, 4, "one per accept")
        self.assertGreaterEqual(total_sum, 5.0, "ok waited 5 s past its scheduled time")
        below = [v for le, v in buckets if le < 5.0]
        self.assertTrue(below and below[-1] <= total - 1, "ok's wait is not in a bucket under 5 s: %r" % buckets)

        buckets, total_sum, total = self.histogram(meta, samples, "kvq_job_run_time_seconds", t)
        self.assertEqual(total, 4, "one per run ended: finish, two fails, a cancel")
        self.assertGreaterEqual(total_sum, 0.3, "ok ran 0.3 s")
        below = [v for le, v in buckets if le < 0.3]
        self.assertTrue(below and below[-1] <= total - 1, "ok's run is not in a bucket under 0.3 s: %r" % buckets)

        self.assertEqual(meta.get("kvq_jobs", {}).get("type"), "gauge")
        states = {s: self.value(samples, "kvq_jobs", type=t, state=s)
                  for s in ("pending", "scheduled", "running", "finished", "dead", "cancelled")}
        self.assertEqual(states, {"pending": 1, "scheduled": 1, "running": 0, "finished": 4, "dead": 1,
                                  "cancelled": 2})
        for name in HISTOGRAMS:
            for suffix in ("_sum", "_count"):
                self.assertFalse(math.isnan(self.value(samples, name + suffix, type=t)))

    def test_every_histogram_of_every_type_is_well_formed(self):
        t, c = uniq("mform"), self.c
        c.set_timeout(t, 30)
        for i in range(3):
            self.assertStatus(c.add(t, "j%d" % i), 200)
            job = self.assertStatus(c.accept(t), 200)["jobs"][0]
            self.assertStatus(c.post("/v1/jobs/%s/%s/finish" % (q(t), q(job["id"])), {"lock": job["lock"]}), 200)
        meta, samples = self.metrics()
        types = {l["type"] for n, l, _ in samples if n == HISTOGRAMS[0] + "_count"}
        self.assertIn(t, types)
        for name in HISTOGRAMS:
            for jtype in types:
                with self.subTest(name=name, type=jtype):
                    _, _, total = self.histogram(meta, samples, name, jtype)
                    if jtype == t:
                        self.assertEqual(total, 3)


if __name__ == "__main__":
    unittest.main()
