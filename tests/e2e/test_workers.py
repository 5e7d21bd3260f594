"""Stalled jobs, worker membership and dead workers."""

import time
import unittest

from kvq_server import ServerTestCase, uniq, wait_until


class StalledJobs(ServerTestCase):

    def test_stalled_job_is_reenqueued_and_old_lock_is_halted(self):
        t, c = uniq("stall"), self.c
        c.set_timeout(t, 0.5)
        self.assertStatus(c.add(t, "s1", {"v": 1}), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        # no update: within a few timeouts the job must be pending again
        wait_until(lambda: c.job(t, "s1").json["state"] == "pending", 5,
                   message="stalled job to be pending again (%r)" % (c.job(t, "s1"),))
        self.assertStatus(c.post("/v1/jobs/%s/s1/update" % t, {"lock": lock}), 409, "halted")
        self.assertStatus(c.post("/v1/jobs/%s/s1/finish" % t, {"lock": lock}), 409, "halted")
        self.assertStatus(c.post("/v1/jobs/%s/s1/resubmit" % t, {"lock": lock}), 409, "halted")
        job = self.assertJobState(t, "s1", "pending")
        self.assertEqual(job["data"], {"v": 1})
        # and another worker gets it, with a new lock that works
        acc = self.assertStatus(c.accept(t, timeout=5), 200)["jobs"][0]
        self.assertNotEqual(acc["lock"], lock)
        self.assertStatus(c.post("/v1/jobs/%s/s1/finish" % t, {"lock": acc["lock"]}), 200)
        self.assertGreaterEqual(self.assertJobState(t, "s1", "finished")["attempts"], 2)

    def test_updates_keep_a_job_alive_past_its_timeout(self):
        t, c = uniq("alive"), self.c
        c.set_timeout(t, 0.5)
        self.assertStatus(c.add(t, "a1"), 200)
        lock = self.assertStatus(c.accept(t), 200)["jobs"][0]["lock"]
        end = time.monotonic() + 1.5
        while time.monotonic() < end:  # heartbeat for three timeouts
            self.assertStatus(c.post("/v1/jobs/%s/a1/update" % t, {"lock": lock}), 200)
            time.sleep(0.1)
        self.assertStatus(c.post("/v1/jobs/%s/a1/finish" % t, {"lock": lock}), 200)


class Membership(ServerTestCase):

    def test_register_list_heartbeat_unregister(self):
        wt, c = uniq("wt"), self.c
        r = c.post("/v1/workers/%s" % wt, {"id": "w1", "info": {"host": "h1"}, "health_timeout": 5})
        reg = self.assertStatus(r, 200)
        self.assertEqual(reg["id"], "w1")
        token = reg["token"]
        self.assertTrue(token)

        lst = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        self.assertIsInstance(lst["version"], int)
        self.assertEqual([w["id"] for w in lst["workers"]], ["w1"])
        w = lst["workers"][0]
        self.assertEqual(w["info"], {"host": "h1"})
        self.assertEqual(w["health_timeout"], 5)
        for k in ("registered_at", "last_heartbeat"):
            self.assertIn(k, w)
        version = lst["version"]

        hb = c.post("/v1/workers/%s/w1/heartbeat" % wt, {"token": token})
        self.assertEqual(self.assertStatus(hb, 200), {})
        self.assertStatus(c.post("/v1/workers/%s/w1/heartbeat" % wt, {"token": "not-it"}),
                          403, "wrong_token")

        self.assertEqual(self.assertStatus(c.delete("/v1/workers/%s/w1?token=%s" % (wt, token)),
                                           200), {})
        lst = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        self.assertEqual(lst["workers"], [])
        self.assertGreater(lst["version"], version)
        # unregistering again is fine; heartbeating is not
        self.assertStatus(c.delete("/v1/workers/%s/w1?token=%s" % (wt, token)), 200)
        self.assertStatus(c.post("/v1/workers/%s/w1/heartbeat" % wt, {"token": token}),
                          409, "halted")

    def test_unregister_puts_held_jobs_back_at_once(self):
        wt, t, c = uniq("wt"), uniq("held"), self.c
        c.set_timeout(t, 60)
        token = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "u1"}), 200)["token"]
        self.assertStatus(c.add(t, "h1"), 200)
        lock = self.assertStatus(c.accept(t, worker="u1"), 200)["jobs"][0]["lock"]
        self.assertStatus(c.delete("/v1/workers/%s/u1?token=%s" % (wt, token)), 200)
        wait_until(lambda: c.job(t, "h1").json["state"] == "pending", 2,
                   message="job of unregistered worker to be pending")
        self.assertStatus(c.post("/v1/jobs/%s/h1/update" % t, {"lock": lock}), 409, "halted")

    def test_a_departure_leaves_the_jobs_of_the_same_id_under_another_worker_type(self):
        wta, wtb, t, c = uniq("wtA"), uniq("wtB"), uniq("shared"), self.c
        c.set_timeout(t, 60)  # far away: only a departure may re-enqueue a job
        tok_a = self.assertStatus(c.post("/v1/workers/%s" % wta, {"id": "shared-id"}), 200)["token"]
        self.assertStatus(c.post("/v1/workers/%s" % wtb, {"id": "shared-id"}), 200)
        self.assertStatus(c.add(t, "a-job", priority=0), 200)
        self.assertStatus(c.add(t, "b-job", priority=1), 200)
        a = self.assertStatus(c.accept(t, worker="shared-id", worker_type=wta), 200)["jobs"][0]
        b = self.assertStatus(c.accept(t, worker="shared-id", worker_type=wtb), 200)["jobs"][0]
        self.assertEqual((a["id"], b["id"]), ("a-job", "b-job"))
        self.assertEqual(self.assertJobState(t, "b-job", "running")["worker_type"], wtb)
        mine = self.assertStatus(c.get("/v1/jobs/%s?worker=shared-id&worker_type=%s" % (t, wtb)), 200)
        self.assertEqual([j["id"] for j in mine["jobs"]], ["b-job"])
        self.assertStatus(c.delete("/v1/workers/%s/shared-id?token=%s" % (wta, tok_a)), 200)
        wait_until(lambda: c.job(t, "a-job").json["state"] == "pending", 2,
                   message="the departed worker's job to be pending")
        self.assertJobState(t, "b-job", "running")
        self.assertStatus(c.post("/v1/jobs/%s/b-job/update" % t, {"lock": b["lock"]}), 200)
        self.assertStatus(c.post("/v1/jobs/%s/b-job/finish" % t, {"lock": b["lock"]}), 200)
        self.assertStatus(c.post("/v1/jobs/%s/a-job/update" % t, {"lock": a["lock"]}), 409, "halted")

    def test_a_worker_type_without_a_worker_is_rejected(self):
        t, c = uniq("wtonly"), self.c
        c.set_timeout(t, 60)
        self.assertStatus(c.add(t, "j"), 200)
        self.assertStatus(c.accept(t, worker_type="wt"), 400, "invalid_argument")
        self.assertStatus(c.accept(t, worker="w", worker_type="no spaces"), 400, "invalid_argument")
        self.assertJobState(t, "j", "pending")

    def test_take_over_replaces_live_worker(self):
        wt, c = uniq("wt"), self.c
        tok1 = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "dup"}), 200)["token"]
        self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "dup"}), 409, "already_exists")
        self.assertStatus(c.post("/v1/workers/%s/dup/heartbeat" % wt, {"token": tok1}), 200)
        reg = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "dup", "take_over": True}), 200)
        self.assertNotEqual(reg["token"], tok1)
        self.assertStatus(c.post("/v1/workers/%s/dup/heartbeat" % wt, {"token": tok1}),
                          409, "halted")
        self.assertStatus(c.post("/v1/workers/%s/dup/heartbeat" % wt, {"token": reg["token"]}),
                          200)

    def test_a_wrong_token_is_403_and_changes_nothing(self):
        wt, c = uniq("wt"), self.c
        token = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "k1"}), 200)["token"]
        self.assertRegex(token, r"^[0-9a-f]{32}$")  # 128 bits
        before = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        wrong = token[:-1] + ("1" if token[-1] == "0" else "0")
        for bad in (wrong, "nope"):
            self.assertStatus(c.delete("/v1/workers/%s/k1?token=%s" % (wt, bad)), 403, "wrong_token")
            self.assertStatus(c.post("/v1/workers/%s/k1/heartbeat" % wt, {"token": bad}),
                              403, "wrong_token")
        after = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        self.assertEqual([w["id"] for w in after["workers"]], ["k1"], "still registered")
        self.assertEqual(after["version"], before["version"])
        self.assertEqual(after["workers"][0]["last_heartbeat"], before["workers"][0]["last_heartbeat"])
        self.assertStatus(c.delete("/v1/workers/%s/k1?token=%s" % (wt, token)), 200)
        self.assertEqual(self.assertStatus(c.get("/v1/workers/%s" % wt), 200)["workers"], [])

    def test_the_token_a_take_over_replaced_is_halted_not_wrong(self):
        wt, c = uniq("wt"), self.c
        tok1 = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "k2"}), 200)["token"]
        tok2 = self.assertStatus(c.post("/v1/workers/%s" % wt, {"id": "k2", "take_over": True}),
                                 200)["token"]
        self.assertStatus(c.delete("/v1/workers/%s/k2?token=%s" % (wt, tok1)), 200)
        lst = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        self.assertEqual([w["id"] for w in lst["workers"]], ["k2"], "the successor stays")
        self.assertStatus(c.post("/v1/workers/%s/k2/heartbeat" % wt, {"token": tok2}), 200)

    def test_dead_worker_disappears_and_its_job_is_pending_again(self):
        wt, t, c = uniq("wt"), uniq("dead"), self.c
        c.set_timeout(t, 60)  # far away: only the worker's death may re-enqueue the job
        stream = c.events("/v1/workers/%s/events" % wt, timeout=10)
        try:
            self.assertEqual(stream.status, 200, stream.body)
            self.assertTrue(stream.headers.get("content-type", "").startswith("text/event-stream"))
            name, ev = stream.next_event()
            self.assertEqual(name, "membership")
            self.assertEqual(ev["workers"], [])

            r = c.post("/v1/workers/%s" % wt, {"id": "d1", "health_timeout": 0.5})
            token = self.assertStatus(r, 200)["token"]
            self.assertStatus(c.add(t, "j1"), 200)
            lock = self.assertStatus(c.accept(t, worker="d1"), 200)["jobs"][0]["lock"]
            self.assertEqual(self.assertJobState(t, "j1", "running")["worker"], "d1")

            # the stream shows the worker join ...
            name, ev = stream.next_event()
            self.assertEqual(name, "membership")
            self.assertEqual([w["id"] for w in ev["workers"]], ["d1"], ev)
            joined = ev["version"]
            # ... and, with no heartbeats, leave
            t0 = time.monotonic()
            name, ev = stream.next_event()
            self.assertEqual(name, "membership")
            self.assertEqual(ev["workers"], [], ev)
            self.assertGreater(ev["version"], joined)
            self.assertLess(time.monotonic() - t0, 5.0)
        finally:
            stream.close()

        lst = self.assertStatus(c.get("/v1/workers/%s" % wt), 200)
        self.assertEqual(lst["workers"], [])
        wait_until(lambda: c.job(t, "j1").json["state"] == "pending", 2,
                   message="dead worker's job to be pending again (%r)" % (c.job(t, "j1"),))
        self.assertStatus(c.post("/v1/jobs/%s/j1/update" % t, {"lock": lock}), 409, "halted")
        self.assertStatus(c.post("/v1/workers/%s/d1/heartbeat" % wt, {"token": token}),
                          409, "halted")


if __name__ == "__main__":
    unittest.main()
