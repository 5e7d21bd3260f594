#!/usr/bin/env python3
"""How long a job added through one `kvq serve` takes to reach an accept waiting on another
`kvq serve` of the same data directory (two processes), against both on one server.

Usage: KVQ_BIN=build/release/src/cli/kvq scripts/cross-process-latency.py [SAMPLES] [DURABILITY]

Per sample: a long-poll accept is sent to the waiting server, the script pauses 2-12 ms (random,
so that samples do not fall into step with any periodic poll) so that it is parked, then adds a job through the adding server and times from just before the add request
to the accept's reply (both HTTP round trips are in it, the same in both modes). Prints p50, p90,
p99 and max in ms for "same process" (add and accept on server A) and "cross-process" (add on
A, accept on B). SAMPLES defaults to 1000, DURABILITY to nosync.
"""

import os
import random
import statistics
import sys
import tempfile
import threading
import time

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "e2e"))
import kvq_server  # noqa: E402


def percentile(xs, p):
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(p / 100.0 * (len(xs) - 1))))]


def measure(adder, waiter, jtype, samples):
    out = []
    for i in range(samples):
        got = {}

        def wait():
            r = waiter.accept(jtype, timeout=5)
            got["t"] = time.perf_counter()
            got["r"] = r

        th = threading.Thread(target=wait)
        th.start()
        time.sleep(0.002 + random.random() * 0.010)
        t0 = time.perf_counter()
        r = adder.add(jtype, "j%d" % i)
        if r.status != 200:
            raise SystemExit("add: %r" % (r,))
        th.join()
        if got["r"].status != 200:
            raise SystemExit("accept: %r (sample %d)" % (got["r"], i))
        out.append((got["t"] - t0) * 1000.0)
    return out


def main():
    samples = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    durability = sys.argv[2] if len(sys.argv) > 2 else "nosync"
    data = tempfile.mkdtemp(prefix="kvq-xproc-")
    a = kvq_server.KvqServer(data_dir=data, durability=durability)
    b = kvq_server.KvqServer(data_dir=data, durability=durability)
    a.start()
    b.start()
    try:
        ca, cb = a.client(), b.client()
        for t in ("same", "cross"):
            ca.set_timeout(t, 600)
        print("kvq %s, %s, %d samples each" % (kvq_server.KVQ_BIN, durability, samples))
        for name, waiter in (("same process", ca), ("cross-process", cb)):
            jtype = "same" if waiter is ca else "cross"
            lat = measure(ca, waiter, jtype, samples)
            print("%-14s p50 %.2f  p90 %.2f  p99 %.2f  max %.2f ms  (mean %.2f)" % (
                name, percentile(lat, 50), percentile(lat, 90), percentile(lat, 99), max(lat),
                statistics.mean(lat)))
    finally:
        a.cleanup()
        b.cleanup()
        import shutil
        shutil.rmtree(data, ignore_errors=True)


if __name__ == "__main__":
    main()
