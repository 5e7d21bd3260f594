"""The dashboard: GET /v1/stats's values, the page at / and /dashboard, and the page as headless
Chromium renders it against a server holding known types, jobs and workers.

Chromium (Debian package `chromium`, installed by scripts/install-deps.sh) loads the page with a
virtual time budget, so the page's own polling runs several times before the DOM is dumped; the
tests read that DOM. The actions (rerun, rerun all dead, cancel, delete) are tested by driving a
headless Chromium through the DevTools protocol over --remote-debugging-pipe (JSON messages on
file descriptors 3 and 4, so only the standard library is needed): the test types the token
into the page and clicks its buttons with real mouse events, then checks the jobs through the
API. A missing Chromium fails the tests: the dashboard is not tested otherwise.
"""

import json
import os
import re
import select
import signal
import subprocess
import tempfile
import threading
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


class Browser:
    """A headless Chromium driven through the DevTools protocol over a pipe: one page, whose
    script the test can evaluate, and which it clicks and types into with input events, as a
    user would."""

    def __init__(self, timeout=30):
        if not os.access(CHROMIUM, os.X_OK):
            raise AssertionError("Chromium is not installed at %s" % CHROMIUM)
        self.timeout = timeout
        self.profile = tempfile.TemporaryDirectory(prefix="kvq-chromium-")
        to_browser_r, self.to_browser = os.pipe()
        self.from_browser, from_browser_w = os.pipe()

        def on_fds_3_and_4():  # --remote-debugging-pipe reads 3 and writes 4
            os.dup2(to_browser_r, 3)
            os.dup2(from_browser_w, 4)

        self.proc = subprocess.Popen(
            [CHROMIUM, "--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
             "--no-first-run", "--no-default-browser-check", "--disable-extensions",
             "--user-data-dir=" + self.profile.name, "--window-size=1400,1000",
             "--remote-debugging-pipe", "about:blank"],
            stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            preexec_fn=on_fds_3_and_4, pass_fds=(3, 4), start_new_session=True)
        os.close(to_browser_r)
        os.close(from_browser_w)
        self.buffer, self.last_id, self.session = b"", 0, None
        target = self.send("Target.createTarget", {"url": "about:blank"})["targetId"]
        self.session = self.send("Target.attachToTarget", {"targetId": target, "flatten": True})["sessionId"]

    def send(self, method, params=None):
        self.last_id += 1
        message = {"id": self.last_id, "method": method, "params": params or {}}
        if self.session and not method.startswith(("Target.", "Browser.")):
            message["sessionId"] = self.session
        os.write(self.to_browser, json.dumps(message).encode() + b"\0")
        deadline = time.monotonic() + self.timeout
        while True:
            while b"\0" in self.buffer:
                raw, self.buffer = self.buffer.split(b"\0", 1)
                answer = json.loads(raw)
                if answer.get("id") == self.last_id:
                    if "error" in answer:
                        raise AssertionError("%s: %s" % (method, answer["error"]))
                    return answer["result"]
            left = deadline - time.monotonic()
            if left <= 0:
                raise AssertionError("Chromium did not answer %s in %d s" % (method, self.timeout))
            if select.select([self.from_browser], [], [], left)[0]:
                chunk = os.read(self.from_browser, 1 << 16)
                if not chunk:
                    raise AssertionError("Chromium closed its pipe:\n" + self.proc.stderr.read().decode()[-3000:])
                self.buffer += chunk

    def js(self, expression):
        """The value of a JavaScript expression in the page (promises awaited)."""
        answer = self.send("Runtime.evaluate", {"expression": expression, "returnByValue": True,
                                                "awaitPromise": True})
        if "exceptionDetails" in answer:
            raise AssertionError("%s: %s" % (expression, answer["exceptionDetails"]))
        return answer["result"].get("value")

    def open(self, url):
        self.send("Page.navigate", {"url": url})
        # `loop` is the dashboard's own: about:blank, or the page before, has none.
        self.wait_for("document.readyState === 'complete' && typeof loop === 'object'", "the page to load")

    def wait_for(self, expression, what, timeout=15):
        deadline = time.monotonic() + timeout
        while True:
            if self.js(expression):
                return
            if time.monotonic() > deadline:
                raise AssertionError("timed out waiting for %s (%s)" % (what, expression))
            time.sleep(0.05)

    def click(self, selector):
        """A left click in the middle of the element `selector` names, as mouse events. Between two
        polls of the page (it draws its lists anew on each), so the button pressed is the one
        released."""
        self.wait_for("!loop.busy", "the page between two polls")
        box = self.js("""(() => { const e = document.querySelector(%s); if (!e) return null;
                                  e.scrollIntoView({block: 'center'}); const r = e.getBoundingClientRect();
                                  const x = r.x + r.width / 2, y = r.y + r.height / 2;
                                  return [x, y, e.contains(document.elementFromPoint(x, y))]; })()"""
                      % json.dumps(selector))
        if box is None:
            raise AssertionError("nothing to click at %s" % selector)
        if not box[2]:
            raise AssertionError("%s is covered by another element: a user could not click it" % selector)
        for kind in ("mousePressed", "mouseReleased"):
            self.send("Input.dispatchMouseEvent", {"type": kind, "x": box[0], "y": box[1], "button": "left",
                                                   "clickCount": 1})

    def type_into(self, selector, text):
        self.click(selector)
        self.send("Input.insertText", {"text": text})

    def close(self):
        try:
            self.send("Browser.close")
            self.proc.wait(10)
        except (AssertionError, OSError, subprocess.TimeoutExpired):
            pass
        if self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGKILL)
            self.proc.wait()
        os.close(self.to_browser)
        os.close(self.from_browser)
        self.proc.stderr.close()
        self.profile.cleanup()


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
    s["running_lock"] = accept_one(c, s["main"], worker=s["worker"])[1]
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
        # Each entry is the type as GET /v1/types/{type} shows it, with its counts.
        settings = {t: self.assertStatus(self.c.get("/v1/types/%s" % q(t)), 200) for t in (s["main"], s["other"])}
        self.assertEqual(types[s["main"]], dict(settings[s["main"]], pending=3, scheduled=0, running=1,
                                                finished=1, dead=0, cancelled=0, waiting=0,
                                                accepts=2, finishes=1))
        self.assertEqual(settings[s["main"]]["timeout"], 30.0)
        self.assertEqual(types[s["other"]], dict(settings[s["other"]], pending=2, scheduled=0, running=0,
                                                 finished=1, dead=1, cancelled=0, waiting=0,
                                                 accepts=1, finishes=0),
                         "the job given up is dead")
        self.assertEqual((settings[s["other"]]["timeout"], settings[s["other"]]["finished_retention"],
                          settings[s["other"]]["max_lost_runs"]), (2.5, 86400.0, 1))
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

    def test_counts_scheduled_dead_and_cancelled(self):
        t, c = uniq("outcomes"), self.c
        c.set_timeout(t, 30)
        entry = lambda: next(x for x in self.stats()["types"] if x["type"] == t)
        later = int(time.time() * 1000) + 3_600_000
        self.assertStatus(c.add(t, "later", scheduled_time=later), 200)
        self.assertStatus(c.add(t, "now"), 200)
        counted = lambda: tuple(entry()[k] for k in ("pending", "scheduled", "running", "finished", "dead", "cancelled"))
        self.assertEqual(counted(), (2, 1, 0, 0, 0, 0))
        jid, lock = accept_one(c, t)
        self.assertEqual(jid, "now")
        ok(c.post("/v1/jobs/%s/now/fail" % q(t), {"lock": lock, "error": {"message": "no"}, "retry": False}))
        self.assertEqual(counted(), (1, 1, 0, 1, 1, 0))
        ok(c.post("/v1/jobs/%s/later/cancel" % q(t)))
        self.assertEqual(counted(), (0, 0, 0, 2, 1, 1))
        ok(c.post("/v1/jobs/%s/now/rerun" % q(t)))
        self.assertEqual(counted(), (1, 0, 0, 1, 0, 1))

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
        # Its worker reports, as a live one would: rendering every page takes longer than the
        # running job's 30 s timeout on a loaded machine, and the monitor would take it back.
        cls.reporting = threading.Event()
        cls.reporter = threading.Thread(target=cls.report, daemon=True)
        cls.reporter.start()

    @classmethod
    def report(cls):
        path = "/v1/jobs/%s/%s/update" % (q(cls.s["main"]), q(cls.s["running"]))
        while not cls.reporting.wait(5):
            cls.server.client().post(path, {"lock": cls.s["running_lock"]})

    @classmethod
    def tearDownClass(cls):
        cls.reporting.set()
        cls.reporter.join(30)
        super().tearDownClass()

    def page(self, path="/", **view):
        fragment = "&".join("%s=%s" % (k, q(v)) for k, v in view.items())
        return render(self.server.url + path + ("#" + fragment if fragment else ""))

    def test_every_type_shows_its_timeout_and_counts_by_state(self):
        dom = self.page()
        self.assertEqual(dom.one(id="status").attrs.get("data-state"), "ok")
        body = dom.one("tbody", id="types-body")
        self.assertEqual([r.attrs["data-type"] for r in body.find_all("tr")], sorted([self.s["main"], self.s["other"]]))
        main = body.one("tr", data_type=self.s["main"])
        fields = ("type", "timeout", "gives-up", "retention", "pending", "scheduled", "running", "finished", "dead",
                  "cancelled")
        self.assertEqual([main.field(f) for f in fields],
                         [self.s["main"], "30 s", "after 25 attempts", "kept", "3", "0", "1", "1", "0", "0"])
        other = body.one("tr", data_type=self.s["other"])
        self.assertEqual([other.field(f) for f in fields],
                         [self.s["other"], "2.5 s", "after 25 attempts or 1 lost run in a row", "1 d", "2", "0", "0", "1", "1", "0"])

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
                    # A finished job also says how it ended: "finished (succeeded)".
                    self.assertEqual({r.field("state").split(" ")[0] for r in rows}, {state})
        finished = self.page(type=s["main"], state="finished").one("tr", data_job=s["finished"])
        self.assertEqual(finished.field("state"), "finished (succeeded)")
        running = self.page(type=s["main"], state="running").one("tr", data_job=s["running"])
        self.assertEqual((running.field("worker"), running.field("attempts")), (s["worker"], "1"))

    def test_a_chosen_job_shows_its_details_as_text(self):
        s, jid = self.s, "<b>bold</b>"
        dom = self.page(type=s["main"], job=jid)
        box = dom.one(id="job")
        self.assertEqual(box.field("id"), jid)
        self.assertEqual(box.one(data_field="id").elements(), [], "an id is text, never markup")
        self.assertEqual(box.find_all("b"), [])
        fields = box.one("dl", id="job-fields")
        self.assertEqual([fields.field(f) for f in ("type", "state", "attempts", "worker")],
                         [s["main"], "pending", "0", "-"])
        self.assertEqual(json.loads(box.one("pre", id="job-data").text()), {"n": 2, "html": "<i>not markup</i>"})
        self.assertEqual(box.find_all("i"), [])
        self.assertIn("selected", dom.one("tr", data_job=jid).attrs["class"])

    def test_a_job_given_up_says_so_in_the_list_and_its_details(self):
        s = self.s
        dom = self.page(type=s["other"], state="finished")
        rows = dom.one("tbody", id="jobs-body").find_all("tr")
        self.assertEqual([r.attrs["data-job"] for r in rows], [s["gave_up"]])
        self.assertEqual(rows[0].field("state"), "finished (dead, gave up)")
        self.assertEqual(rows[0].one("span", data_outcome="dead").attrs["class"], "state state-dead gave-up")
        self.assertEqual(rows[0].field("error"), "worker_lost: " + self.job(s["other"], s["gave_up"])["errors"][-1]["message"])
        box = self.page(type=s["other"], job=s["gave_up"]).one(id="job")
        fields = box.one("dl", id="job-fields")
        self.assertEqual([fields.field(f) for f in ("state", "attempts", "lost_runs", "worker")],
                         ["finished (dead, gave up)", "1", "1", "-"])
        error = box.one("table", id="job-errors").one("tr", data_attempt="1")
        self.assertEqual((error.field("kind"), error.field("worker")), ("worker_lost", "left"))
        self.assertEqual(json.loads(box.one("pre", id="job-data").text()), {"why": "kills its worker"})
        pending = self.page(type=s["other"], state="pending").one("tr", data_job=s["other_pending"][0])
        self.assertEqual(pending.field("state"), "pending")

    def job(self, jtype, jid):
        return ok(self.c.job(jtype, jid))

    def test_the_outcome_tabs_list_the_finished_jobs_that_ended_that_way(self):
        s = self.s
        for state, jtype, ids in (("succeeded", s["main"], [s["finished"]]), ("dead", s["main"], []),
                                  ("dead", s["other"], [s["gave_up"]]), ("cancelled", s["main"], []),
                                  ("scheduled", s["main"], [])):
            with self.subTest(state=state, type=jtype):
                dom = self.page(type=jtype, state=state)
                self.assertEqual(dom.one("a", data_filter=state).attrs.get("class"), "on")
                if ids:
                    rows = dom.one("tbody", id="jobs-body").find_all("tr")
                    self.assertEqual([r.attrs["data-job"] for r in rows], ids)
                else:
                    self.assertEqual(dom.find_all(id="jobs-body"), [])
                    self.assertIn("No jobs here.", dom.one(id="jobs-empty").text())
        succeeded = self.page(type=s["main"], state="succeeded").one("tr", data_job=s["finished"])
        self.assertEqual(succeeded.field("state"), "finished (succeeded)")
        self.assertEqual(succeeded.one("span", data_outcome="succeeded").attrs["class"], "state state-succeeded")

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


# ---- workflows -------------------------------------------------------------------------------

class Workflows(ServerTestCase):
    """Waiting jobs have their own tab and column; a job's page lists its dependencies, each
    with how it resolved and a link to it, and names its batch."""

    def page(self, **view):
        fragment = "&".join("%s=%s" % (k, q(v)) for k, v in view.items())
        return render(self.server.url + "/" + ("#" + fragment if fragment else ""))

    def test_waiting_jobs_their_tab_column_and_a_jobs_dependencies(self):
        c = self.c
        fetch, report = uniq("fetch"), uniq("report")
        c.set_timeout(fetch, 30)
        c.set_timeout(report, 30)
        ok(c.add(fetch, "eu"))
        ok(c.add(fetch, "us"))
        ok(c.put("/v1/batches/weekly", {"callback": {"type": report, "id": "done"}}))
        ok(c.add(report, "weekly", {}, depends_on=[{"type": fetch, "id": "eu"},
                                                   {"type": fetch, "id": "us"}],
                 on_dependency_failure="run", batch="weekly"))
        ok(c.add(report, "daily", {}))
        [job] = ok(c.accept(fetch))["jobs"]
        ok(c.post("/v1/jobs/%s/%s/finish" % (q(fetch), q(job["id"])), {"lock": job["lock"]}))
        done, left = job["id"], ("us" if job["id"] == "eu" else "eu")

        dom = self.page()
        row = dom.one("tbody", id="types-body").one("tr", data_type=report)
        self.assertEqual((row.field("pending"), row.field("waiting")), ("1", "1"))

        tab = self.page(type=report, state="waiting")
        self.assertEqual(tab.one("a", data_filter="waiting").attrs.get("class"), "on")
        rows = tab.one("tbody", id="jobs-body").find_all("tr")
        self.assertEqual([r.attrs["data-job"] for r in rows], ["weekly"])
        self.assertEqual(rows[0].field("state"), "waiting")

        box = self.page(type=report, job="weekly").one(id="job")
        fields = box.one("dl", id="job-fields")
        self.assertEqual((fields.field("state"), fields.field("waiting_on"), fields.field("batch")),
                         ("waiting", "1 of 2", "weekly"))
        deps = box.one("table", id="job-dependencies")
        got = deps.one("tr", data_dependency=fetch + "/" + done)
        self.assertEqual((got.field("resolved"), got.field("state")), ("succeeded", "finished (succeeded)"))
        self.assertIn("job=" + done, got.one("a").attrs["href"])
        wait = deps.one("tr", data_dependency=fetch + "/" + left)
        self.assertEqual((wait.field("resolved"), wait.field("state")), ("-", "pending"))
        self.assertIn("(on failure: run)", box.text())
        plain = self.page(type=report, job="daily").one(id="job")
        self.assertEqual(plain.find_all(id="job-dependencies"), [])
        self.assertEqual(plain.one("dl", id="job-fields").field("waiting_on"), "-")


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



# ---- actions, clicked in a browser -----------------------------------------------------------

RED, GREEN, GREY = "rgb(197, 48, 48)", "rgb(47, 133, 90)", "rgb(113, 128, 150)"  # --bad, --finished, --cancelled


def make_dead(c, jtype, jid, message):
    """A job that failed once with `message` and is not to be retried: dead, attempts 1."""
    ok(c.add(jtype, jid, {"input": jid}))
    job = ok(c.accept(jtype, worker="w-" + jid))["jobs"][0]
    if job["id"] != jid:
        raise AssertionError("accepted %r, not %r" % (job["id"], jid))
    answer = ok(c.post("/v1/jobs/%s/%s/fail" % (q(jtype), q(jid)),
                       {"lock": job["lock"], "error": {"message": message, "kind": "crash"}, "retry": False}))
    if not answer["dead"]:
        raise AssertionError("fail with retry false left %s alive: %r" % (jid, answer))


class Actions(ServerTestCase):
    """The page's buttons, clicked with real mouse events in headless Chromium on a server with a
    token, which the test types into the page; every outcome is checked through the API."""

    server_kwargs = {"token": "act-s3cret"}

    def setUp(self):
        super().setUp()
        self.t = uniq("act")
        self.c.set_timeout(self.t, 30)
        self.browser = Browser()
        self.addCleanup(self.browser.close)

    def open(self, **view):
        b = self.browser
        b.open(self.server.url + "/#" + "&".join("%s=%s" % (k, q(v)) for k, v in view.items()))
        b.wait_for("document.getElementById('status').dataset.state === 'unauthorized'", "the page to ask for a token")
        b.type_into("#token", "act-s3cret")
        b.click("#token-form button[type=submit]")
        b.wait_for("document.getElementById('status').dataset.state === 'ok'", "the page to read with the token")

    def row_selector(self, jid):
        return "#jobs-body tr[data-job=%s]" % json.dumps(jid)

    def wait_for_rows(self, ids):
        self.browser.wait_for(
            "JSON.stringify([...document.querySelectorAll('#jobs-body tr')].map(r => r.dataset.job)) === %s"
            % json.dumps(json.dumps(ids, separators=(",", ":"))), "the list to show %r" % ids)

    def job(self, jid):
        return ok(self.c.job(self.t, jid))

    def assertRerun(self, jid, errors):
        job = self.job(jid)
        self.assertEqual((job["state"], job["outcome"], job["attempts"], job["result"]), ("pending", None, 0, None), job)
        self.assertEqual([e["message"] for e in job["errors"]], errors, "a rerun keeps the errors")

    def test_a_dead_job_is_red_with_its_error_and_rerun_retries_it(self):
        b, t = self.browser, self.t
        make_dead(self.c, t, "d-1", "disk <b>on fire</b>")
        make_dead(self.c, t, "d-2", "out of paper")
        self.open(type=t, state="dead")
        self.wait_for_rows(["d-1", "d-2"])
        row = self.row_selector("d-1")
        self.assertEqual(b.js("document.querySelector('%s [data-field=state]').textContent" % row), "finished (dead)")
        self.assertEqual(b.js("getComputedStyle(document.querySelector('%s [data-outcome=dead]')).color" % row), RED)
        self.assertEqual(b.js("document.querySelector('%s [data-field=error]').textContent" % row),
                         "crash: disk <b>on fire</b>")
        self.assertEqual(b.js("document.querySelectorAll('%s b').length" % row), 0, "an error message is text")
        self.assertEqual(b.js("getComputedStyle(document.querySelector('%s [data-field=error]')).color" % row), RED)

        b.click(row + " button[data-action=rerun]")
        b.wait_for("document.getElementById('action-status').dataset.state !== 'busy' && "
                   "document.getElementById('action-status').textContent.length > 0", "the rerun's answer")
        self.assertEqual(b.js("document.getElementById('action-status').dataset.state"), "ok",
                         b.js("document.getElementById('action-status').textContent"))
        self.assertRerun("d-1", ["disk <b>on fire</b>"])
        self.wait_for_rows(["d-2"])  # gone from the dead tab
        self.assertEqual(self.job("d-2")["outcome"], "dead", "only the job clicked was rerun")

    def test_rerun_all_dead_asks_once_more_then_reruns_every_dead_job_of_the_type(self):
        b, t = self.browser, self.t
        for i in range(3):
            make_dead(self.c, t, "d-%d" % i, "failure %d" % i)
        ok(self.c.add(t, "s-1"))
        job = ok(self.c.accept(t))["jobs"][0]
        ok(self.c.post("/v1/jobs/%s/s-1/finish" % q(t), {"lock": job["lock"], "result": {"sent": True}}))
        self.open(type=t, state="dead")
        self.wait_for_rows(["d-0", "d-1", "d-2"])
        button = "button[data-action=rerun-all-dead]"
        b.click(button)
        b.wait_for("document.querySelector('%s').dataset.armed === 'yes'" % button, "the button to ask for confirmation")
        self.assertEqual(b.js("document.querySelector('%s').textContent" % button), "Confirm rerun all dead")
        polls = int(b.js("document.getElementById('status').dataset.polls"))
        b.wait_for("+document.getElementById('status').dataset.polls > %d" % polls, "another poll")
        # The poll drew the button anew: it still waits for the second click.
        self.assertEqual(b.js("document.querySelector('%s').dataset.armed" % button), "yes")
        for i in range(3):
            self.assertEqual(self.job("d-%d" % i)["outcome"], "dead", "one click does nothing yet")
        b.click(button)
        b.wait_for("document.getElementById('action-status').textContent.endsWith('3 rerun')", "the answer: 3 rerun")
        for i in range(3):
            self.assertRerun("d-%d" % i, ["failure %d" % i])
        succeeded = self.job("s-1")
        self.assertEqual((succeeded["state"], succeeded["outcome"], succeeded["result"]),
                         ("finished", "succeeded", {"sent": True}), "a succeeded job is not rerun")
        self.wait_for_rows([])

    def test_delete_asks_once_more_then_the_job_is_gone(self):
        b, t = self.browser, self.t
        make_dead(self.c, t, "keep", "stays")
        make_dead(self.c, t, "drop", "goes")
        self.open(type=t, job="drop")
        b.wait_for("document.querySelector('#job-actions button[data-action=delete]') !== null", "the job's buttons")
        self.assertEqual(b.js("document.querySelector('#job-errors [data-field=message]').textContent"), "goes")
        self.assertEqual(b.js("document.querySelector('#job-errors [data-field=worker]').textContent"), "w-drop")
        self.assertEqual(b.js("document.querySelector('#job-errors [data-field=kind]').textContent"), "crash")
        b.click("#job-actions button[data-action=delete]")
        b.wait_for("document.querySelector('#job-actions button[data-action=delete]').dataset.armed === 'yes'",
                   "the button to ask for confirmation")
        self.assertStatus(self.c.job(t, "drop"), 200)
        b.click("#job-actions button[data-action=delete]")
        b.wait_for("document.getElementById('job-missing') !== null", "the page to say the job is gone")
        self.assertStatus(self.c.job(t, "drop"), 404, "not_found")
        self.assertEqual(self.job("keep")["outcome"], "dead", "only the job clicked was deleted")

    def test_cancel_ends_a_pending_job_cancelled_shown_grey_and_a_succeeded_one_green(self):
        b, t = self.browser, self.t
        ok(self.c.add(t, "done"))
        job = ok(self.c.accept(t))["jobs"][0]
        ok(self.c.post("/v1/jobs/%s/done/finish" % q(t), {"lock": job["lock"], "result": [1, 2]}))
        ok(self.c.add(t, "wait"))
        self.open(type=t, state="pending")
        self.wait_for_rows(["wait"])
        self.assertEqual(b.js("document.querySelectorAll('%s button[data-action=rerun]').length"
                              % self.row_selector("wait")), 0, "a pending job cannot be rerun")
        b.click(self.row_selector("wait") + " button[data-action=cancel]")
        self.wait_for_rows([])
        job = self.job("wait")
        self.assertEqual((job["state"], job["outcome"]), ("finished", "cancelled"), job)
        b.click("a[data-filter=cancelled]")
        self.wait_for_rows(["wait"])
        self.assertEqual(b.js("getComputedStyle(document.querySelector('[data-outcome=cancelled]')).color"), GREY)
        b.click("a[data-filter=succeeded]")
        self.wait_for_rows(["done"])
        self.assertEqual(b.js("getComputedStyle(document.querySelector('[data-outcome=succeeded]')).color"), GREEN)
        b.click(self.row_selector("done") + " [data-field=id] a")  # opens the job: its result
        b.wait_for("document.getElementById('job-result') !== null", "the job's details")
        self.assertEqual(json.loads(b.js("document.getElementById('job-result').textContent")), [1, 2])

    def test_pause_and_resume_a_type_from_its_row(self):
        b, t = self.browser, self.t
        ok(self.c.put("/v1/types/%s" % q(t), {"max_running": 4, "rate": {"limit": 10, "period_ms": 1000}}))
        self.open()
        row = "#types-body tr[data-type=%s]" % json.dumps(t)
        paused = "document.querySelector('%s [data-field=paused]')" % row
        b.wait_for("%s !== null && %s.textContent === 'no'" % (paused, paused), "the type's row, not paused")
        self.assertEqual(b.js("document.querySelector('%s [data-field=limits]').textContent" % row),
                         "4 running, 10 per 1 s")
        b.click(row + " button[data-action=pause]")
        b.wait_for("%s.textContent === 'yes'" % paused, "the row to show the pause")
        self.assertTrue(ok(self.c.get("/v1/types/%s" % q(t)))["paused"], "the click paused the type")
        self.assertEqual(self.c.accept(t, timeout=0).status, 204)
        b.click(row + " button[data-action=resume]")
        b.wait_for("%s.textContent === 'no'" % paused, "the row to show the type resumed")
        self.assertFalse(ok(self.c.get("/v1/types/%s" % q(t)))["paused"], "the click resumed the type")

    def test_pause_and_resume_a_schedule_from_its_row(self):
        b, t = self.browser, self.t
        name = uniq("sched")
        ok(self.c.put("/v1/schedules/%s" % q(name), {"type": t, "cron": "@hourly"}))
        self.open()
        row = "#schedules-table tr[data-schedule=%s]" % json.dumps(name)
        paused = "document.querySelector('%s [data-field=paused]')" % row
        next_run = "document.querySelector('%s [data-field=next_run]').textContent" % row
        b.wait_for("%s !== null && %s.textContent === 'no'" % (paused, paused), "the schedule's row")
        self.assertNotEqual(b.js(next_run), "-")
        b.click(row + " button[data-action=schedule-pause]")
        b.wait_for("%s.textContent === 'yes'" % paused, "the row to show the pause")
        self.assertTrue(ok(self.c.get("/v1/schedules/%s" % q(name)))["paused"], "the click paused it")
        self.assertEqual(b.js(next_run), "-", "a paused schedule has no next run")
        b.click(row + " button[data-action=schedule-resume]")
        b.wait_for("%s.textContent === 'no'" % paused, "the row to show the schedule resumed")
        self.assertFalse(ok(self.c.get("/v1/schedules/%s" % q(name)))["paused"], "the click resumed it")

    def test_a_types_groups_and_a_jobs_group_are_shown(self):
        b, t = self.browser, self.t
        ok(self.c.put("/v1/types/%s" % q(t), {"max_running_per_group": 1}))
        globex = "<i>globex</i>"
        for jid, group in (("g-a1", "acme"), ("g-a2", "acme"), ("g-b1", globex), ("plain", None)):
            ok(self.c.add(t, jid, group=group))
        # acme's limit lets one of its two run; globex's one and the job without a group run too.
        self.assertEqual(len(ok(self.c.accept(t, count=4))["jobs"]), 3)
        self.open(type=t, job="g-b1")
        self.assertEqual(b.js("document.getElementById('groups-title').textContent"), "Groups of " + t)
        row = lambda g: "#groups-table tr[data-group=%s]" % json.dumps(g)
        b.wait_for("document.querySelector(%s) !== null" % json.dumps(row(globex)), "the groups' rows")
        field = lambda g, f: b.js("document.querySelector(%s).textContent"
                                  % json.dumps(row(g) + " [data-field=%s]" % f))
        self.assertEqual([field("acme", f) for f in ("group", "running", "pending", "full", "in_turn_at")],
                         ["acme", "1", "1", "yes", "-"])
        self.assertEqual([field(globex, f) for f in ("group", "running", "pending", "full")],
                         [globex, "1", "0", "yes"])
        self.assertEqual(b.js("document.querySelectorAll('#groups-table i').length"), 0, "a group is text")
        self.assertEqual(b.js("document.querySelectorAll('#groups-table tbody tr').length"), 2)
        limits = "#types-body tr[data-type=%s] [data-field=limits]" % json.dumps(t)
        self.assertEqual(b.js("document.querySelector(%s).textContent" % json.dumps(limits)), "1 per group")
        group = "document.querySelector('#job-fields [data-field=group]')"
        b.wait_for("%s !== null && %s.textContent === %s" % (group, group, json.dumps(globex)), "the job's group")
        b.js("go({job: 'plain'})")
        b.wait_for("%s !== null && %s.textContent === '-'" % (group, group), "no group for a job without one")

    def test_schedules_are_listed_with_their_next_run_and_counts(self):
        b, t = self.browser, self.t
        name = uniq("yearly")
        s = ok(self.c.put("/v1/schedules/%s" % q(name), {"type": t, "cron": "@yearly", "timezone": "Europe/Paris"}))
        self.open()
        row = "#schedules-table tr[data-schedule=%s]" % json.dumps(name)
        b.wait_for("document.querySelector('%s') !== null" % row, "the schedule's row")
        field = lambda f: b.js("document.querySelector('%s [data-field=%s]').textContent" % (row, f))
        self.assertEqual([field(f) for f in ("name", "type", "cron", "timezone", "enqueued", "skipped", "last_error")],
                         [name, t, "@yearly", "Europe/Paris", "0", "0", ""])
        # The page's clock() of next_run: the browser's local time, the same instant.
        self.assertEqual(field("next_run"), b.js("clock(%d)" % s["next_run"]))
        ok(self.c.delete("/v1/schedules/%s" % q(name)))

if __name__ == "__main__":
    unittest.main()
