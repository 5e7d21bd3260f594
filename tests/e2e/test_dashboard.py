"""The dashboard: GET /v1/stats's values, the page at / and /dashboard, and the page as headless
Chromium renders it against a server holding known types, jobs and workers.

Chromium (Debian package `chromium`, installed by scripts/install-deps.sh) loads the page with a
virtual time budget, so the page's own polling runs several times before the DOM is dumped; the
tests read that DOM. A missing Chromium fails the tests: the dashboard is not tested otherwise.
"""

import json
import os
import re
import signal
import subprocess
import tempfile
import time
import unittest
from html.parser import HTMLParser

from kvq_server import ServerTestCase, q, uniq

CHROMIUM = "/usr/bin/chromium"
VIRTUAL_TIME_MS = 8000  # the page polls every 2 s: about four polls


# ---- the rendered DOM, read with the standard library ---------------------------------------

class Node:
    def __init__(self, tag, attrs, parent):
        self.tag, self.attrs, self.parent, self.children = tag, dict(attrs), parent, []

    def text(self):
        return "".join(c if isinstance(c, str) else c.text() for c in self.children)

    def elements(self):
        return [c for c in self.children if isinstance(c, Node)]

    def iter(self):
        yield self
        for c in self.elements():
            yield from c.iter()

    def find_all(self, tag=None, **attrs):
        """Descendants by tag and attributes; data_field="x" means data-field="x"."""
        want = {k.replace("_", "-"): v for k, v in attrs.items()}
        return [n for n in self.iter() if n is not self and (tag is None or n.tag == tag)
                and all(n.attrs.get(k) == v for k, v in want.items())]

    def one(self, tag=None, **attrs):
        found = self.find_all(tag, **attrs)
        if len(found) != 1:
            raise AssertionError("expected one <%s %s>, found %d" % (tag or "*", attrs, len(found)))
        return found[0]

    def field(self, name):
        return self.one(data_field=name).text().strip()


class _DomBuilder(HTMLParser):
    VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = self.current = Node("#document", {}, None)

    def handle_starttag(self, tag, attrs):
        node = Node(tag, attrs, self.current)
        self.current.children.append(node)
        if tag not in self.VOID:
            self.current = node

    def handle_startendtag(self, tag, attrs):
        self.current.children.append(Node(tag, attrs, self.current))

    def handle_endtag(self, tag):
        node = self.current
        while node is not None and node.tag != tag:
            node = node.parent
        if node is not None and node.parent is not None:
            self.current = node.parent

    def handle_data(self, data):
        self.current.children.append(data)


def parse_dom(html):
    builder = _DomBuilder()
    builder.feed(html)
    builder.close()
    return builder.root


def render(url, budget_ms=VIRTUAL_TIME_MS, timeout=120):
    """The DOM of `url` after `budget_ms` of the page's (virtual) time, in headless Chromium with
    a fresh profile (so nothing is in localStorage)."""
    if not os.access(CHROMIUM, os.X_OK):
        raise AssertionError("Chromium is not installed at %s: scripts/install-deps.sh installs the "
                             "Debian package chromium" % CHROMIUM)
    with tempfile.TemporaryDirectory(prefix="kvq-chromium-") as profile:
        args = [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                "--no-first-run", "--no-default-browser-check", "--disable-extensions",
                "--user-data-dir=" + profile, "--virtual-time-budget=%d" % budget_ms, "--dump-dom", url]
        # Its own process group, so a hung browser goes with all its helper processes.
        proc = subprocess.Popen(args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, start_new_session=True)
        try:
            out, err = proc.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.communicate()
            raise AssertionError("Chromium did not finish rendering %s in %d s" % (url, timeout))
        if proc.returncode != 0 or not out.strip():
            raise AssertionError("Chromium failed on %s (exit %d):\n%s"
                                 % (url, proc.returncode, err.decode(errors="replace")[-3000:]))
        return parse_dom(out.decode())


# ---- a server holding known jobs and workers -------------------------------------------------

def ok(r):
    """The body of a 200 response; anything else fails the test."""
    if r.status != 200:
        raise AssertionError("unexpected response %r" % (r,))
    return r.json


def accept_one(c, jtype, worker=None):
    fields = {"worker": worker} if worker else {}
    job = ok(c.accept(jtype, **fields))["jobs"][0]
    return job["id"], job["lock"]


def finish(c, jtype, jid, lock):
    ok(c.post("/v1/jobs/%s/%s/finish" % (q(jtype), q(jid)), {"lock": lock}))


def register(c, wtype, wid, info=None):
    body = {"id": wid, "health_timeout": 120}
    if info is not None:
        body["info"] = info
    return ok(c.post("/v1/workers/%s" % q(wtype), body))["token"]


def populate(c):
    """Type `main` (timeout 30, finished jobs kept): one finished job, one running on a named
    worker, three pending, one of them with markup in its id; type `other` (timeout 2.5,
    finished jobs kept a day, jobs given up after 1 lost run): one given up (its worker, `left`
    of `gone`, unregistered holding it), two pending. Worker type `wt` with two live workers,
    `gone` with none left. Jobs are added one step at a time,
    so each accept can only take the job meant for it."""
    s = {"main": uniq("main"), "other": uniq("other"), "wt": uniq("wt"), "gone": uniq("gone"),
         "finished": "f-1", "running": "r-1", "pending": ["p-1", "p-2", "<b>bold</b>"],
         "other_pending": ["o-1", "o-2"], "gave_up": "g-1", "worker": "render-w1"}
    c.set_timeout(s["main"], 30)
    c.set_timeout(s["other"], 2.5)
    ok(c.put("/v1/types/%s" % q(s["other"]), {"finished_retention": 86400, "max_lost_runs": 1}))
    ok(c.add(s["main"], s["finished"], {"step": "done"}))
    finish(c, s["main"], *accept_one(c, s["main"]))
    ok(c.add(s["main"], s["running"], {"step": "run"}))
    accept_one(c, s["main"], worker=s["worker"])
    for i, jid in enumerate(s["pending"]):
        ok(c.add(s["main"], jid, {"n": i, "html": "<i>not markup</i>"}))
    ok(c.add(s["other"], s["gave_up"], {"why": "kills its worker"}))
    token = register(c, s["gone"], "left")
    accept_one(c, s["other"], worker="left")
    ok(c.delete("/v1/workers/%s/left?token=%s" % (q(s["gone"]), token)))  # its run is lost
    for jid in s["other_pending"]:
        ok(c.add(s["other"], jid))
    register(c, s["wt"], s["worker"], {"host": "h1", "pid": 42})
    register(c, s["wt"], "render-w2")
    return s


# ---- GET /v1/stats ---------------------------------------------------------------------------

class Stats(ServerTestCase):

    def stats(self):
        before = int(time.time() * 1000)
        stats = self.assertStatus(self.c.get("/v1/stats"), 200)
        self.assertLessEqual(before, stats["time"])
        self.assertLessEqual(stats["time"], int(time.time() * 1000))
        return stats

    def test_counts_every_state_per_type_with_this_servers_totals(self):
        s = populate(self.c)
        stats = self.stats()
        types = {t["type"]: t for t in stats["types"]}
        self.assertEqual(types[s["main"]], {"type": s["main"], "timeout": 30.0,
                                            "finished_retention": None, "max_lost_runs": None, "pending": 3, "running": 1,
                                            "finished": 1, "accepts": 2,
                                            "finishes": 1})
        self.assertEqual(types[s["other"]], {"type": s["other"], "timeout": 2.5,
                                             "finished_retention": 86400.0, "max_lost_runs": 1, "pending": 2, "running": 0,
                                             "finished": 1, "accepts": 1,
                                             "finishes": 0})
        names = [t["type"] for t in stats["types"]]
        self.assertEqual(names, sorted(names))
        self.assertEqual(stats["accepts"], sum(t["accepts"] for t in stats["types"]))
        self.assertEqual(stats["finishes"], sum(t["finishes"] for t in stats["types"]))
        workers = {w["type"]: w for w in stats["worker_types"]}
        self.assertEqual(workers[s["wt"]], {"type": s["wt"], "version": 2, "workers": 2})
        self.assertEqual(workers[s["gone"]], {"type": s["gone"], "version": 2, "workers": 0},
                         "a worker type stays listed after its last worker left")

    def test_follows_changes(self):
        t, c = uniq("follow"), self.c
        c.set_timeout(t, 10)
        self.assertStatus(c.add(t, "a"), 200)
        entry = lambda: next(x for x in self.stats()["types"] if x["type"] == t)
        self.assertEqual((entry()["pending"], entry()["running"], entry()["finished"]), (1, 0, 0))
        jid, lock = accept_one(c, t)
        self.assertEqual((entry()["pending"], entry()["running"], entry()["accepts"]), (0, 1, 1))
        finish(c, t, jid, lock)
        self.assertEqual((entry()["running"], entry()["finished"], entry()["finishes"]), (0, 1, 1))
        self.assertStatus(c.delete("/v1/types/%s" % t), 409, "type_has_jobs")
        self.assertStatus(c.delete("/v1/types/%s/jobs" % t), 200)
        self.assertStatus(c.delete("/v1/types/%s" % t), 200)
        self.assertNotIn(t, [x["type"] for x in self.stats()["types"]], "a type without a timeout is gone")

    def test_counts_finished_jobs_from_their_index_and_not_removed_ones(self):
        t, c = uniq("many"), self.c
        c.set_timeout(t, 60)
        n = 1050  # more than one page (1,000) of the index
        for start in range(0, n, 1000):
            batch = [{"id": "j%05d" % i, "data": {}} for i in range(start, min(n, start + 1000))]
            self.assertStatus(c.post("/v1/jobs/%s/batch" % t, {"jobs": batch}), 200)
        done = 0
        while done < n:
            for job in self.assertStatus(c.accept(t, count=100), 200)["jobs"]:
                finish(c, t, job["id"], job["lock"])
                done += 1
        for jid in ("a-first", "z-last"):  # pending ones on both sides of the finished ones
            self.assertStatus(c.add(t, jid), 200)
        entry = lambda: next(x for x in self.stats()["types"] if x["type"] == t)
        self.assertEqual((entry()["pending"], entry()["running"], entry()["finished"]), (2, 0, n))
        self.assertStatus(c.delete("/v1/jobs/%s/j00007" % t), 200)
        self.assertStatus(c.add(t, "j00008"), 200)  # finished -> pending again
        self.assertEqual((entry()["pending"], entry()["running"], entry()["finished"]), (3, 0, n - 2))


# ---- the page --------------------------------------------------------------------------------

class Page(ServerTestCase):

    def test_root_and_dashboard_serve_one_self_contained_html_page(self):
        bodies = []
        for path in ("/", "/dashboard", "/dashboard/"):
            with self.subTest(path=path):
                r = self.c.get(path, token=None)
                self.assertEqual(r.status, 200, r)
                self.assertEqual(r.headers["content-type"], "text/html; charset=utf-8")
                bodies.append(r.body.decode())
        self.assertEqual(len(set(bodies)), 1)
        page = bodies[0]
        self.assertTrue(page.lower().startswith("<!doctype html>"), page[:100])
        self.assertIn("<title>kvq dashboard</title>", page)
        self.assertIsNone(re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page),
                          "the page must not load anything from elsewhere")
        self.assertNotIn("<script src", page)

    def test_other_methods_and_paths_are_refused(self):
        self.assertStatus(self.c.post("/", {}), 405, "method_not_allowed")
        self.assertStatus(self.c.get("/dashboard/nope"), 404, "no_route")


class Rendered(ServerTestCase):
    """The page as Chromium renders it; the server holds populate()'s jobs and workers."""

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.s = populate(cls.c)

    def page(self, path="/", **view):
        fragment = "&".join("%s=%s" % (k, q(v)) for k, v in view.items())
        return render(self.server.url + path + ("#" + fragment if fragment else ""))

    def test_every_type_shows_its_timeout_and_counts_by_state(self):
        dom = self.page()
        self.assertEqual(dom.one(id="status").attrs.get("data-state"), "ok")
        body = dom.one("tbody", id="types-body")
        self.assertEqual([r.attrs["data-type"] for r in body.find_all("tr")], sorted([self.s["main"], self.s["other"]]))
        main = body.one("tr", data_type=self.s["main"])
        fields = ("type", "timeout", "gives-up", "retention", "pending", "running", "finished")
        self.assertEqual([main.field(f) for f in fields], [self.s["main"], "30 s", "never", "kept", "3", "1", "1"])
        other = body.one("tr", data_type=self.s["other"])
        self.assertEqual([other.field(f) for f in fields],
                         [self.s["other"], "2.5 s", "after 1", "1 d", "2", "0", "1"])

    def test_it_refreshes_by_itself_and_charts_throughput(self):
        dom = self.page("/dashboard")
        status = dom.one(id="status")
        self.assertEqual(status.attrs.get("data-state"), "ok")
        self.assertGreaterEqual(int(status.attrs["data-polls"]), 3, "the page polls every 2 s")
        chart = dom.one("svg", id="chart")
        samples = int(chart.attrs["data-samples"])
        self.assertGreaterEqual(samples, 2, "a rate point per poll after the first")
        for series in ("accepts", "finishes"):
            points = chart.one("polyline", data_series=series).attrs["points"].split()
            self.assertEqual(len(points), samples, series)
        self.assertEqual(dom.one(id="total-accepts").text(), "3")
        self.assertEqual(dom.one(id="total-finishes").text(), "1")
        self.assertRegex(dom.one(id="rate-accepts").text(), r"^\d+\.\d$")

    def test_a_chosen_type_lists_its_jobs_filtered_by_state(self):
        s = self.s
        expected = {"": sorted([s["finished"], s["running"]] + s["pending"]), "pending": sorted(s["pending"]),
                    "running": [s["running"]], "finished": [s["finished"]]}
        for state, ids in expected.items():
            with self.subTest(state=state or "all"):
                dom = self.page(type=s["main"], state=state) if state else self.page(type=s["main"])
                self.assertEqual(dom.one(id="jobs-title").text(), "Jobs of " + s["main"])
                rows = dom.one("tbody", id="jobs-body").find_all("tr")
                self.assertEqual([r.attrs["data-job"] for r in rows], ids, "id order")
                if state:
                    self.assertEqual({r.field("state") for r in rows}, {state})
        running = self.page(type=s["main"], state="running").one("tr", data_job=s["running"])
        self.assertEqual((running.field("worker"), running.field("attempts")), (s["worker"], "1"))

    def test_a_chosen_job_shows_its_details_as_text(self):
        s, jid = self.s, "<b>bold</b>"
        dom = self.page(type=s["main"], job=jid)
        box = dom.one(id="job")
        self.assertEqual(box.field("id"), jid)
        self.assertEqual(box.one(data_field="id").elements(), [], "an id is text, never markup")
        self.assertEqual(box.find_all("b"), [])
        self.assertEqual([box.field(f) for f in ("type", "state", "attempts", "worker")],
                         [s["main"], "pending", "0", "-"])
        self.assertEqual(json.loads(box.one("pre", id="job-data").text()), {"n": 2, "html": "<i>not markup</i>"})
        self.assertEqual(box.find_all("i"), [])
        self.assertIn("selected", dom.one("tr", data_job=jid).attrs["class"])

    def test_a_job_given_up_says_so_in_the_list_and_its_details(self):
        s = self.s
        dom = self.page(type=s["other"], state="finished")
        rows = dom.one("tbody", id="jobs-body").find_all("tr")
        self.assertEqual([r.attrs["data-job"] for r in rows], [s["gave_up"]])
        self.assertEqual(rows[0].field("state"), "finished (gave up)")
        box = self.page(type=s["other"], job=s["gave_up"]).one(id="job")
        self.assertEqual([box.field(f) for f in ("state", "attempts", "lost_runs", "worker")],
                         ["finished (gave up)", "1", "1", "-"])
        self.assertEqual(json.loads(box.one("pre", id="job-data").text()), {"why": "kills its worker"})
        pending = self.page(type=s["other"], state="pending").one("tr", data_job=s["other_pending"][0])
        self.assertEqual(pending.field("state"), "pending")

    def test_a_job_that_does_not_exist_says_so(self):
        dom = self.page(type=self.s["main"], job="no-such-job")
        self.assertIn("does not exist", dom.one(id="job-missing").text())

    def test_live_workers_are_listed_by_worker_type(self):
        s = self.s
        dom = self.page()
        wt = dom.one(data_wtype=s["wt"])
        self.assertIn("2 live", wt.one("h3").text())
        rows = wt.one("tbody").find_all("tr")
        self.assertEqual([r.attrs["data-worker"] for r in rows], [s["worker"], "render-w2"])
        first = wt.one("tr", data_worker=s["worker"])
        self.assertEqual(json.loads(first.field("info")), {"host": "h1", "pid": 42})
        self.assertEqual(first.field("health_timeout"), "120 s")
        gone = dom.one(data_wtype=s["gone"])
        self.assertIn("0 live", gone.one("h3").text())
        self.assertEqual(gone.find_all("tr"), [])


# ---- with a token ----------------------------------------------------------------------------
# The page is public (it holds no data); every data route still needs the token.

class WithToken(ServerTestCase):
    server_kwargs = {"token": "dash-s3cret"}

    @classmethod
    def setUpClass(cls):
        super().setUpClass()
        cls.t = uniq("secret")
        cls.c.set_timeout(cls.t, 30)
        ok(cls.c.add(cls.t, "hidden"))

    def test_stats_needs_the_token(self):
        self.assertStatus(self.server.client(token=None).get("/v1/stats"), 401, "unauthorized")
        self.assertStatus(self.server.client(token="wrong").get("/v1/stats"), 401, "unauthorized")
        self.assertStatus(self.c.get("/v1/stats"), 200)

    def test_the_page_needs_no_token(self):
        r = self.server.client(token=None).get("/")
        self.assertEqual((r.status, r.headers.get("content-type")), (200, "text/html; charset=utf-8"), r)

    def test_without_the_token_the_page_asks_for_it_and_shows_no_data(self):
        dom = render(self.server.url + "/")
        self.assertEqual(dom.one(id="status").attrs.get("data-state"), "unauthorized")
        self.assertEqual(dom.one("tbody", id="types-body").elements(), [])

    def test_a_token_given_in_the_url_is_sent(self):
        dom = render(self.server.url + "/#token=dash-s3cret&type=" + q(self.t))
        self.assertEqual(dom.one(id="status").attrs.get("data-state"), "ok")
        self.assertEqual(dom.one("tr", data_type=self.t).field("pending"), "1")
        self.assertEqual([r.attrs["data-job"] for r in dom.one("tbody", id="jobs-body").find_all("tr")], ["hidden"])


if __name__ == "__main__":
    unittest.main()
