"""/metrics beyond jobs (issue 44 §4): the method of each request, the build, the standard
process_* series and the live workers by type."""

import os
import re
import time

from kvq_server import ServerTestCase, q, uniq
from test_errors import parse_prometheus


class MetricsSeries(ServerTestCase):
    def scrape(self):
        r = self.c.get("/metrics")
        self.assertEqual(r.status, 200, r)
        samples, types = parse_prometheus(r.body.decode())
        return samples, types

    @staticmethod
    def values(samples, name, **labels):
        return [v for n, l, v in samples
                if n == name and all(l.get(k) == x for k, x in labels.items())]

    def test_requests_are_counted_by_method(self):
        t = uniq("meth")
        self.c.set_timeout(t, 30)
        self.assertStatus(self.c.add(t, "a"), 200)
        self.assertStatus(self.c.job(t, "a"), 200)
        self.assertStatus(self.c.job(t, "a"), 200)
        self.assertStatus(self.c.delete("/v1/jobs/%s/a" % q(t)), 200)
        samples, _ = self.scrape()
        per_job = "/v1/jobs/{type}/{id}"
        self.assertGreaterEqual(sum(self.values(samples, "kvq_http_requests_total",
                                                route="/v1/jobs/{type}", method="POST",
                                                status="200")), 1)
        self.assertGreaterEqual(sum(self.values(samples, "kvq_http_requests_total", route=per_job,
                                                method="GET", status="200")), 2)
        self.assertGreaterEqual(sum(self.values(samples, "kvq_http_requests_total", route=per_job,
                                                method="DELETE", status="200")), 1)
        reqs = [l for n, l, _ in samples if n == "kvq_http_requests_total"]
        self.assertTrue(all(l.get("method") in
                            ("GET", "HEAD", "POST", "PUT", "DELETE", "PATCH", "OPTIONS", "other",
                             "none") for l in reqs), reqs)
        # A method no route serves is still counted, under "other".
        r = self.c.request("BREW", "/v1/types")
        self.assertGreaterEqual(r.status, 400)
        samples, _ = self.scrape()
        self.assertGreaterEqual(sum(self.values(samples, "kvq_http_requests_total",
                                                method="other")), 1)

    def test_build_info_names_the_version(self):
        samples, types = self.scrape()
        self.assertEqual(types.get("kvq_build_info"), "gauge")
        info = [(l, v) for n, l, v in samples if n == "kvq_build_info"]
        self.assertEqual(len(info), 1, info)
        self.assertEqual(info[0][1], 1.0)
        self.assertRegex(info[0][0]["version"], r"^\d+\.\d+\.\d+")

    @staticmethod
    def cpu_seconds(pid):
        with open("/proc/%d/stat" % pid) as f:
            fields = f.read().rpartition(")")[2].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime, stime

    def test_process_series_describe_this_process(self):
        pid = self.server.pid
        cpu_before = self.cpu_seconds(pid)
        samples, types = self.scrape()
        cpu_after = self.cpu_seconds(pid)
        one = lambda name: self.values(samples, name)
        for name, kind in (("process_cpu_seconds_total", "counter"),
                           ("process_resident_memory_bytes", "gauge"),
                           ("process_virtual_memory_bytes", "gauge"),
                           ("process_open_fds", "gauge"), ("process_max_fds", "gauge"),
                           ("process_start_time_seconds", "gauge")):
            self.assertEqual(types.get(name), kind, name)
            self.assertEqual(len(one(name)), 1, name)
        fds = len(os.listdir("/proc/%d/fd" % pid))
        self.assertLess(abs(one("process_open_fds")[0] - fds), 8, (one("process_open_fds"), fds))
        with open("/proc/%d/limits" % pid) as f:
            soft = next(re.split(r"\s{2,}", l.strip())[1] for l in f if l.startswith("Max open files"))
        self.assertEqual(one("process_max_fds")[0], float(soft))
        with open("/proc/%d/status" % pid) as f:
            rss = next(int(l.split()[1]) * 1024 for l in f if l.startswith("VmRSS:"))
        self.assertLess(abs(one("process_resident_memory_bytes")[0] - rss), rss / 2)
        started = one("process_start_time_seconds")[0]
        self.assertLess(started, time.time() + 2)
        self.assertGreater(started, os.stat("/proc/%d" % pid).st_mtime - 3600)
        cpu = one("process_cpu_seconds_total")[0]
        self.assertTrue(cpu_before <= cpu <= cpu_after, (cpu_before, cpu, cpu_after))

    def test_live_workers_are_counted_by_type(self):
        wt = uniq("wt")
        tokens = []
        for wid in ("w1", "w2"):
            r = self.c.post("/v1/workers/%s" % q(wt), {"id": wid, "health_timeout": 30})
            tokens.append(self.assertStatus(r, 200)["token"])
        samples, types = self.scrape()
        self.assertEqual(types.get("kvq_workers"), "gauge")
        self.assertEqual(self.values(samples, "kvq_workers", worker_type=wt), [2.0])
        self.assertStatus(self.c.delete("/v1/workers/%s/w1?token=%s" % (q(wt), tokens[0])), 200)
        samples, _ = self.scrape()
        self.assertEqual(self.values(samples, "kvq_workers", worker_type=wt), [1.0])
