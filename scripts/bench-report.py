#!/usr/bin/env python3
"""Turns the results of the peer comparison (`make bench`) into docs/benchmarks.md and a chart.

kvq is measured side by side with beanstalkd, PostgreSQL (SKIP LOCKED) and a Redis reliable
queue. This script only reads what the benchmark wrote and formats it; it measures nothing.

Usage:
    scripts/bench-report.py --results RESULTS.jsonl --machine MACHINE.json --md OUT.md --png OUT.png

Inputs:
    MACHINE.json   one JSON object describing the machine and the run: date, command, cores, cpu,
                   memory_gb, kernel, fsync_per_s, fsync_note, data_dir, runs, seconds,
                   warmup_seconds, payload_bytes, window, workload, layers_doc, and "systems": a
                   list of {"system": id, "name": display name, "config": {"durable": ..,
                   "relaxed": ..}} in display order. Ids starting with "kvq" are kvq, the rest
                   are peers.
    RESULTS.jsonl  one JSON object per line, either
                     {"kind": "lifecycle", "system", "class", "workers", "producers", "run",
                      "seconds", "jobs", "jobs_per_s", "latency_ms": {"p50", "p99"}, "errors",
                      "cost": {"requests_per_job", "commits_per_job" (null: not counted)}}
                   or
                     {"kind": "scale", "system", "class", "jobs", "add_per_s", "accept_per_s",
                      "memory_mb", "disk_mb", "run"}.
                   Either kind may carry "error": "message" instead of numbers (a failed run);
                   it is shown as "failed" with the message in a footnote.

Outputs:
    OUT.md   Markdown: machine, workload, targets, throughput and latency tables per class,
             the cost per job (requests and store commits), the scale table, configurations and
             failures. Figures are medians over the runs,
             with the min–max spread.
    OUT.png  Median jobs/s against worker connections, one panel per class (needs matplotlib;
             the Agg backend is used, so no display is needed).

Exit status: 0 when both files were written, 1 when an input could not be read or the chart
could not be drawn (the Markdown is still written in that case).
"""

import argparse
import importlib.util
import json
import os
import statistics
import sys
from collections import Counter, defaultdict

CLASSES = ("durable", "relaxed")  # shown first, in this order; any other class found follows
TARGET_WORKERS = 16  # the targets are judged at this many worker connections
CONTENTION_WORKERS = 64  # worker counts from here up are labelled "(contention)"
KVQ_HTTP = "kvq-http"  # the system ids the targets talk about
KVQ_LIB = "kvq-lib"
KVQ_BEANSTALK = "kvq-beanstalk"
# (kvq system, named peer, minimum kvq / that peer jobs/s ratio, or None: the ratio is reported
# only), in both classes: kvq over the beanstalkd protocol against beanstalkd itself, driven by
# the same client, and its standing against Redis.
PEER_TARGETS = (
    (KVQ_BEANSTALK, "beanstalkd", 1.0),
    (KVQ_BEANSTALK, "redis", None),
)
# (kvq system, class, minimum kvq / best peer jobs/s ratio)
THROUGHPUT_TARGETS = (
    (KVQ_HTTP, "relaxed", 1.0),
    (KVQ_HTTP, "durable", 2.0),
    (KVQ_LIB, "relaxed", 2.0),
    (KVQ_LIB, "durable", 2.0),
)
TITLE = "# Benchmarks: kvq side by side with beanstalkd, PostgreSQL and Redis"


# ---------------------------------------------------------------------------------------------
# Reading the inputs
# ---------------------------------------------------------------------------------------------

class Failure:
    """One failed entry (or unreadable line) of the results."""

    def __init__(self, entry, message):
        self.kind = entry.get("kind", "?")
        self.system = entry.get("system")
        self.cls = entry.get("class")
        self.workers = entry.get("workers")
        self.run = entry.get("run")
        self.message = " ".join(str(message).split()) or "failed"

    def cell(self):
        """The table cell this failure belongs to, or None when it belongs to none."""
        if self.kind == "lifecycle" and self.system and self.cls and self.workers is not None:
            return ("lifecycle", self.system, self.cls, self.workers)
        if self.kind == "scale" and self.system and self.cls:
            return ("scale", self.system, self.cls)
        return None


class Results:
    """The results grouped by table cell: successful runs, failures, and the systems to show."""

    def __init__(self, machine):
        self.systems = []  # [(id, display name)] in display order
        self.names = {}
        for s in machine.get("systems", []):
            if isinstance(s, dict) and s.get("system"):
                self.add_system(s["system"], s.get("name") or s["system"])
        self.lifecycle = defaultdict(list)  # (system, class, workers) -> [entry]
        self.scale = defaultdict(list)  # (system, class) -> [entry]
        self.failures = []  # [Failure]

    def add_system(self, system, name):
        if system not in self.names:
            self.names[system] = name
            self.systems.append((system, name))

    def add(self, entry):
        kind = entry.get("kind")
        system = entry.get("system")
        if system:
            if system not in self.names:
                warn(f"system {system!r} is not in MACHINE.json's systems; shown by its id")
            self.add_system(system, system)
        if "error" in entry:
            self.failures.append(Failure(entry, entry["error"]))
        elif kind == "lifecycle":
            self.add_lifecycle(entry)
        elif kind == "scale":
            self.add_scale(entry)
        else:
            self.failures.append(Failure(entry, f"unknown kind {kind!r}"))

    def add_lifecycle(self, entry):
        if not (entry.get("system") and entry.get("class") and is_number(entry.get("workers"))
                and is_number(entry.get("jobs_per_s"))):
            self.failures.append(Failure(entry, "incomplete entry (no system, class, workers "
                                                "or jobs_per_s)"))
            return
        self.lifecycle[(entry["system"], entry["class"], entry["workers"])].append(entry)

    def add_scale(self, entry):
        if not (entry.get("system") and entry.get("class")):
            self.failures.append(Failure(entry, "incomplete entry (no system or class)"))
            return
        self.scale[(entry["system"], entry["class"])].append(entry)

    def classes(self):
        found = {k[1] for k in self.lifecycle} | {f.cls for f in self.failures
                                                 if f.kind == "lifecycle" and f.cls}
        return list(CLASSES) + sorted(found - set(CLASSES))

    def workers(self, cls):
        found = {k[2] for k in self.lifecycle if k[1] == cls}
        found |= {f.workers for f in self.failures
                  if f.kind == "lifecycle" and f.cls == cls and is_number(f.workers)}
        return sorted(found)

    def is_kvq(self, system):
        return system.startswith("kvq")

    def peers(self):
        return [s for s, _ in self.systems if not self.is_kvq(s)]

    def failures_at(self, cell):
        return [f for f in self.failures if f.cell() == cell]


def warn(message):
    print(f"bench-report: {message}", file=sys.stderr)


def is_number(x):
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def load_machine(path):
    with open(path, encoding="utf-8") as f:
        machine = json.load(f)
    if not isinstance(machine, dict):
        raise ValueError(f"{path}: expected one JSON object")
    return machine


def parse_line(number, line):
    """(entry, None) for a JSON object, or (None, message) for anything else."""
    try:
        entry = json.loads(line)
    except json.JSONDecodeError as e:
        return None, f"line {number}: not JSON ({e.msg})"
    if not isinstance(entry, dict):
        return None, f"line {number}: not a JSON object"
    return entry, None


def load_results(path, machine):
    results = Results(machine)
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if not line.strip():
                continue
            entry, problem = parse_line(number, line)
            if problem:
                results.failures.append(Failure({}, problem))
            else:
                results.add(entry)
    return results


# ---------------------------------------------------------------------------------------------
# Statistics and number formatting
# ---------------------------------------------------------------------------------------------

class Spread:
    """Median, min and max of the values of one field over the runs of one cell."""

    def __init__(self, values):
        self.n = len(values)
        self.median = statistics.median(values)
        self.min = min(values)
        self.max = max(values)


def spread(entries, field, sub=None):
    """The Spread of entry[field] (or entry[field][sub]) over entries, or None if none has it."""
    values = []
    for e in entries:
        v = e.get(field)
        if sub is not None:
            v = v.get(sub) if isinstance(v, dict) else None
        if is_number(v):
            values.append(v)
    return Spread(values) if values else None


def median_rate(results, system, cls, workers):
    s = spread(results.lifecycle.get((system, cls, workers), []), "jobs_per_s")
    return s.median if s else None


def median_p99(results, system, cls, workers):
    s = spread(results.lifecycle.get((system, cls, workers), []), "latency_ms", "p99")
    return s.median if s else None


def fmt_int(x):
    return f"{x:,.0f}"


def fmt_ms(x):
    """About three significant digits: 0.041, 0.41, 3.20, 12.3, 123."""
    if x >= 100:
        return f"{x:,.0f}"
    if x >= 10:
        return f"{x:.1f}"
    if x >= 0.1:
        return f"{x:.2f}"
    return f"{x:.3f}"


def fmt_mb(x):
    return f"{x:,.1f}"


def fmt_spread(s, fmt):
    """ "median (min–max)", or just the median when there is one run or no spread."""
    if s is None:
        return "—"
    if s.n == 1 or s.min == s.max:
        return fmt(s.median)
    return f"{fmt(s.median)} ({fmt(s.min)}–{fmt(s.max)})"


def fmt_ratio(x):
    return "∞" if x == float("inf") else f"{x:.2f}×"


# ---------------------------------------------------------------------------------------------
# Markdown building blocks
# ---------------------------------------------------------------------------------------------

def md_cell(x):
    return " ".join(str(x).split()).replace("|", "\\|")


def md_table(header, rows, align=None):
    """A Markdown table; align has an 'l' or 'r' per column (default: first left, rest right)."""
    align = align or "l" + "r" * (len(header) - 1)
    rule = ["---:" if a == "r" else "---" for a in align]
    lines = ["| " + " | ".join(md_cell(h) for h in header) + " |",
             "| " + " | ".join(rule) + " |"]
    lines += ["| " + " | ".join(md_cell(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


class Footnotes:
    """Numbers the failure footnotes in the order they are first referenced."""

    def __init__(self, results):
        self.results = results
        self.labels = {}  # cell -> label
        self.texts = []  # [(label, text)]

    def ref(self, cell):
        """The footnote reference for cell's failures ("" when it has none)."""
        failures = self.results.failures_at(cell)
        if not failures:
            return ""
        if cell not in self.labels:
            label = str(len(self.labels) + 1)
            self.labels[cell] = label
            self.texts.append((label, describe_failures(self.results, cell, failures)))
        return f"[^{self.labels[cell]}]"


def describe_cell(results, cell):
    name = results.names.get(cell[1], cell[1])
    if cell[0] == "lifecycle":
        return f"{name}, {cell[2]}, {cell[3]} workers"
    return f"{name}, {cell[2]}, scale"


def describe_failures(results, cell, failures):
    """'<cell>: run 1, run 3: message; run 2: other message'."""
    by_message = defaultdict(list)
    for f in failures:
        by_message[f.message].append(f"run {f.run}" if f.run is not None else "a run")
    parts = [f"{', '.join(runs)}: {message}" for message, runs in by_message.items()]
    return f"{describe_cell(results, cell)}: " + "; ".join(parts)


def system_label(results, system):
    name = results.names.get(system, system)
    return f"**{name}**" if results.is_kvq(system) else name


def workers_header(workers):
    return f"{workers} (contention)" if workers >= CONTENTION_WORKERS else str(workers)


def cell_text(value, entries, failures, note):
    """A table cell: the value, "failed" when every run failed, and the footnote if any failed."""
    if not entries:
        return f"failed{note}" if failures else "—"
    return f"{value}{note}"


# ---------------------------------------------------------------------------------------------
# Sections
# ---------------------------------------------------------------------------------------------

def section_header(machine):
    command = machine.get("command", "make bench")
    date = machine.get("date", "an unknown date")
    lines = [TITLE, "",
             f"Generated by `{command}` on {date} (`scripts/bench-report.py`). "
             f"Do not edit by hand: rerun `{command}` instead."]
    layers = machine.get("layers_doc")
    if layers:
        lines += ["", f"The per-layer benchmarks (kv, jobs, workers, etcd) are in "
                      f"[{layers}]({layers})."]
    return "\n".join(lines)


def field(machine, key, unit=""):
    """machine[key] followed by unit, or "unknown"."""
    v = machine.get(key)
    return "unknown" if v in (None, "") else f"{v}{unit}"


def section_machine(machine):
    def get(key, unit=""):
        return field(machine, key, unit)

    fsync = machine.get("fsync_per_s")
    fsync_text = f"{fmt_int(fsync)} fsyncs/s" if is_number(fsync) else "unknown"
    if machine.get("fsync_note"):
        fsync_text += f" ({machine['fsync_note']})"
    data_dir = machine.get("data_dir")
    lines = ["## Machine", "",
             f"* Cores: {get('cores')}",
             f"* CPU: {get('cpu')}",
             f"* Memory: {get('memory_gb', ' GB')}",
             f"* Kernel: {get('kernel')}",
             f"* fsync rate: {fsync_text}",
             "* Data directory: " + (f"`{data_dir}`" if data_dir else "unknown")]
    return "\n".join(lines)


def section_workload(machine):
    def get(key, unit=""):
        return field(machine, key, unit)

    lines = ["## Workload", ""]
    if machine.get("workload"):
        lines += [" ".join(str(machine["workload"]).split()), ""]
    lines += [f"* Runs per configuration: {get('runs')}",
              f"* Measured time per run: {get('seconds', ' s')}",
              f"* Warm-up per run: {get('warmup_seconds', ' s')}",
              f"* Payload: {get('payload_bytes', ' bytes')}",
              f"* Window: {get('window')}",
              "",
              "Each figure is the median of the runs, with the spread (min–max) in parentheses. "
              "Ratios are computed from medians measured in the same run of the benchmark."]
    return "\n".join(lines)


def best_peer(results, cls, metric, pick):
    """(system, value) of the peer whose median `metric` at TARGET_WORKERS `pick` (max or min)
    chooses, or None when no peer has one."""
    values = [(metric(results, p, cls, TARGET_WORKERS), p) for p in results.peers()]
    values = [(v, p) for v, p in values if v is not None]
    if not values:
        return None
    value, peer = pick(values)
    return peer, value


def met_text(ok):
    return "yes" if ok else "**NO**"


def throughput_target_row(results, system, cls, minimum):
    name = results.names[system]
    target = f"{name} ÷ best peer, {cls}, jobs/s ≥ {minimum:.1f}×"
    mine = median_rate(results, system, cls, TARGET_WORKERS)
    best = best_peer(results, cls, median_rate, max)
    if mine is None or best is None:
        missing = name if mine is None else "any peer"
        return [target, f"n/a (no {cls} data for {missing})", "—", "n/a"]
    peer, rate = best
    ratio = mine / rate if rate > 0 else float("inf")
    measured = f"{fmt_ratio(ratio)} ({fmt_int(mine)} vs {fmt_int(rate)} jobs/s)"
    return [target, measured, results.names[peer], met_text(ratio >= minimum)]


def peer_target_row(results, system, peer, cls, minimum):
    name, peer_name = results.names[system], results.names[peer]
    wanted = f" ≥ {minimum:.1f}×" if minimum is not None else " (reported)"
    target = f"{name} ÷ {peer_name}, {cls}, jobs/s{wanted}"
    mine = median_rate(results, system, cls, TARGET_WORKERS)
    theirs = median_rate(results, peer, cls, TARGET_WORKERS)
    if mine is None or theirs is None:
        missing = name if mine is None else peer_name
        return [target, f"n/a (no {cls} data for {missing})", peer_name, "n/a"]
    ratio = mine / theirs if theirs > 0 else float("inf")
    measured = f"{fmt_ratio(ratio)} ({fmt_int(mine)} vs {fmt_int(theirs)} jobs/s)"
    met = met_text(ratio >= minimum) if minimum is not None else "—"
    return [target, measured, peer_name, met]


def latency_target_row(results, system, cls):
    name = results.names[system]
    target = f"{name}, {cls}, add→accept p99 below every peer's"
    mine = median_p99(results, system, cls, TARGET_WORKERS)
    best = best_peer(results, cls, median_p99, min)
    if mine is None or best is None:
        missing = name if mine is None else "any peer"
        return [target, f"n/a (no {cls} latency for {missing})", "—", "n/a"]
    peer, value = best
    measured = f"{fmt_ms(mine)} ms vs {fmt_ms(value)} ms"
    return [target, measured, results.names[peer], met_text(mine < value)]


def section_targets(results):
    rows = [throughput_target_row(results, system, cls, minimum)
            for system, cls, minimum in THROUGHPUT_TARGETS if system in results.names]
    rows += [peer_target_row(results, system, peer, cls, minimum)
             for system, peer, minimum in PEER_TARGETS for cls in CLASSES
             if system in results.names and peer in results.names]
    rows += [latency_target_row(results, system, cls)
             for cls in CLASSES for system in (KVQ_HTTP, KVQ_BEANSTALK, KVQ_LIB)
             if system in results.names]
    lines = ["## Targets", "",
             f"Judged at {TARGET_WORKERS} worker connections, from the medians. The best peer is "
             f"the one with the most jobs/s (or the lowest p99) in that class."]
    if rows:
        lines += ["", md_table(["Target", "Measured", "Best peer", "Met"], rows, "llll")]
    else:
        lines += ["", "No kvq system was measured, so there is nothing to judge."]
    return "\n".join(lines)


def section_notes(machine):
    """MACHINE.json's "notes": facts a reader needs to read the tables right (optional)."""
    notes = machine.get("notes") or []
    if not notes:
        return ""
    return "\n".join(["## Reading the results", ""] + [f"* {md_cell(n)}" for n in notes])


def section_chart(md_path, png_path):
    rel = os.path.relpath(os.path.abspath(png_path), os.path.dirname(os.path.abspath(md_path)))
    return f"![jobs/s by concurrency]({rel.replace(os.sep, '/')})"


def lifecycle_table(results, footnotes, cls, render):
    """One row per system, one column per worker count; render(entries) gives a cell's value."""
    workers = results.workers(cls)
    header = ["System \\ workers"] + [workers_header(w) for w in workers]
    rows = []
    for system, _ in results.systems:
        row = [system_label(results, system)]
        for w in workers:
            cell = ("lifecycle", system, cls, w)
            entries = results.lifecycle.get((system, cls, w), [])
            failures = results.failures_at(cell)
            value = render(entries) if entries else ""
            row.append(cell_text(value, entries, failures, footnotes.ref(cell)))
        rows.append(row)
    return md_table(header, rows)


def render_rate(entries):
    text = fmt_spread(spread(entries, "jobs_per_s"), fmt_int)
    errors = sum(e["errors"] for e in entries if is_number(e.get("errors")))
    if errors:
        text += f" ({fmt_int(errors)} job errors)"
    return text


def render_latency(entries):
    p50 = spread(entries, "latency_ms", "p50")
    p99 = spread(entries, "latency_ms", "p99")
    return " / ".join(fmt_ms(s.median) if s else "—" for s in (p50, p99))


def lifecycle_section(results, footnotes, title, intro, render):
    lines = [title, "", intro]
    classes = [c for c in results.classes() if results.workers(c)]
    if not classes:
        return "\n".join(lines + ["", "No lifecycle results."])
    for cls in classes:
        lines += ["", f"### {cls.capitalize()}", "",
                  lifecycle_table(results, footnotes, cls, render)]
    return "\n".join(lines)


def section_throughput(results, footnotes):
    intro = ("Median jobs/s over the runs, with the min–max spread; columns are worker "
             "connections.")
    return lifecycle_section(results, footnotes, "## Throughput (jobs/s, end to end)", intro,
                             render_rate)


def section_latency(results, footnotes):
    intro = ("Time from a job's add to its accept by a worker: median p50 / median p99 over "
             "the runs; columns are worker connections.")
    return lifecycle_section(results, footnotes, "## add→accept latency (ms)", intro,
                             render_latency)


def fmt_per_job(x):
    return f"{x:.2f}"


def cost_cell(entries, field):
    s = spread(entries, "cost", field)
    if s is None:
        return "not counted" if entries else "—"
    return fmt_spread(s, fmt_per_job)


def use_values(entries, who, field):
    values = []
    for e in entries:
        v = e.get("use", {}).get(who, {}).get(field)
        if is_number(v):
            values.append(v)
    return Spread(values) if values else None


def use_cell(entries, system, who, field, fmt):
    # kvq in-process is its own server; PostgreSQL's work is in its backends, which the
    # postmaster's counts leave out.
    if system == "kvq-lib" and who == "server":
        who = "client"
    if system == "postgres" and who == "server":
        return "not counted"
    s = use_values(entries, who, field)
    return fmt_spread(s, fmt) if s else "—"


def section_cpu(results):
    """CPU time and context switches per job at TARGET_WORKERS: the server's (kvq in-process:
    the whole process) and the benchmark clients' process, over the measured seconds."""
    classes = [c for c in results.classes() if results.workers(c)]
    has_use = any(isinstance(e.get("use"), dict)
                  for entries in results.lifecycle.values() for e in entries)
    if not classes or not has_use:
        return None
    header = ["System"]
    for cls in classes:
        header += [f"{cls.capitalize()}: server µs/job", f"{cls.capitalize()}: client µs/job",
                   f"{cls.capitalize()}: server switches/job"]
    rows = []
    for system, _ in results.systems:
        row = [system_label(results, system)]
        for cls in classes:
            entries = results.lifecycle.get((system, cls, TARGET_WORKERS), [])
            row += [use_cell(entries, system, "server", "cpu_us", lambda x: f"{x:.0f}"),
                    "—" if system == "kvq-lib" else
                    use_cell(entries, system, "client", "cpu_us", lambda x: f"{x:.0f}"),
                    use_cell(entries, system, "server", "context_switches", fmt_per_job)]
        rows.append(row)
    intro = (f"CPU time (user + system) and context switches per job finished in the measured "
             f"seconds, at {TARGET_WORKERS} worker connections: medians over the runs, with the "
             "min–max spread. Server: the server process, every thread (kvq in-process: the "
             "benchmark process, which is kvq and its callers; PostgreSQL's backends are not "
             "counted). Client: the benchmark process driving a server. Read from /proc before "
             "and after the measured seconds (queue_bench --server-pid).")
    return "\n".join(["## CPU per job", "", intro, "",
                      md_table(header, rows, "l" + "r" * (len(header) - 1))])


def section_cost(results):
    """Requests and store commits per finished job, at TARGET_WORKERS, so the comparison of
    speeds stays honest about the work each system does for a job."""
    classes = [c for c in results.classes() if results.workers(c)]
    has_cost = any(isinstance(e.get("cost"), dict)
                   for entries in results.lifecycle.values() for e in entries)
    if not classes or not has_cost:
        return None
    header = ["System"]
    for cls in classes:
        header += [f"{cls.capitalize()}: requests/job", f"{cls.capitalize()}: commits/job"]
    rows = []
    for system, _ in results.systems:
        row = [system_label(results, system)]
        for cls in classes:
            entries = results.lifecycle.get((system, cls, TARGET_WORKERS), [])
            row += [cost_cell(entries, "requests_per_job"), cost_cell(entries, "commits_per_job")]
        rows.append(row)
    intro = (f"What each system spent per finished job at {TARGET_WORKERS} worker connections, "
             "over the whole run (warm-up and drain included): medians over the runs, with the "
             "min–max spread. Requests are the round trips the benchmark's clients made "
             "(commands, statements, HTTP requests, library calls), empty reserves included. "
             "Commits are the store's own count: beanstalkd's binlog records written "
             "(`binlog-records-written`), PostgreSQL's committed transactions "
             "(`pg_stat_database.xact_commit`, read-only ones included: each idle worker's "
             "backend reads every NOTIFY in a transaction of its own), kvq's LMDB write transactions (the last "
             "transaction id, `mdb_stat -e`; group commit applies the kvq transactions that "
             "commit together in one, with one fsync when durable); Redis keeps no such count "
             "(every write command is appended to its AOF).")
    return "\n".join(["## Cost per job", "", intro, "",
                      md_table(header, rows, "l" + "r" * (len(header) - 1))])


def scale_cells(results):
    """The (system, class) cells of the scale benchmark, in display order."""
    cells = set(results.scale) | {f.cell()[1:] for f in results.failures
                                  if f.kind == "scale" and f.cell()}
    order = {s: i for i, (s, _) in enumerate(results.systems)}
    class_order = {c: i for i, c in enumerate(results.classes())}
    return sorted(cells, key=lambda c: (order.get(c[0], len(order)),
                                        class_order.get(c[1], len(class_order)), c[1]))


def section_scale(results, footnotes):
    cells = scale_cells(results)
    if not cells:
        return None
    counts = Counter(e["jobs"] for entries in results.scale.values() for e in entries
                     if is_number(e.get("jobs")))
    jobs = counts.most_common(1)[0][0] if counts else 1_000_000
    fields = (("add_per_s", fmt_int), ("accept_per_s", fmt_int),
              ("memory_mb", fmt_mb), ("disk_mb", fmt_mb))
    rows = []
    for system, cls in cells:
        entries = results.scale.get((system, cls), [])
        cell = ("scale", system, cls)
        note = footnotes.ref(cell)
        failures = results.failures_at(cell)
        if not entries:
            values = [cell_text("", entries, failures, note)] + ["—"] * (len(fields) - 1)
        else:
            values = [fmt_spread(spread(entries, f), fmt) for f, fmt in fields]
            values[0] += note
        rows.append([system_label(results, system), cls] + values)
    header = ["System", "Class", "add/s", "accept/s", "Memory (MB)", "Disk (MB)"]
    lines = [f"## Scale: {fmt_int(jobs)} pending jobs", "",
             f"Adding {fmt_int(jobs)} jobs, then accepting them, with memory and disk use as the "
             "benchmark measured them: medians over the runs, with the min–max spread.", "",
             md_table(header, rows, "llrrrr")]
    other = sorted(set(counts) - {jobs})
    if other:
        lines += ["", "Some runs used other job counts: " + ", ".join(map(fmt_int, other)) + "."]
    return "\n".join(lines)


def system_configs(machine):
    """{system id: {class: configuration text}} from MACHINE.json's systems."""
    configs = {}
    for s in machine.get("systems", []):
        if isinstance(s, dict) and s.get("system"):
            config = s.get("config")
            configs[s["system"]] = config if isinstance(config, dict) else {}
    return configs


def section_configuration(machine, results):
    configs = system_configs(machine)
    keys = []
    for config in configs.values():
        keys += [k for k in config if k not in keys]
    keys = [k for k in CLASSES if k in keys] + [k for k in keys if k not in CLASSES]
    if not keys:
        return None
    rows = [[system_label(results, system)] + [configs.get(system, {}).get(k, "—") for k in keys]
            for system, _ in results.systems if system in configs]
    header = ["System"] + [k.capitalize() for k in keys]
    return "\n".join(["## Configuration", "", md_table(header, rows, "l" * len(header))])


def section_failures(results, footnotes):
    if not results.failures:
        return None
    lines = ["## Failures", "",
             f"{len(results.failures)} entr{'y' if len(results.failures) == 1 else 'ies'} of the "
             "results failed. A table cell whose every run failed reads \"failed\"; a cell with "
             "some failed runs shows the median of the others. The messages:"]
    loose = [f for f in results.failures if f.cell() is None]
    if loose:
        lines.append("")
        for f in loose:
            where = ", ".join(str(x) for x in (f.kind, f.system, f.cls) if x and x != "?")
            lines.append(f"* {where + ': ' if where else ''}{f.message}")
    if footnotes.texts:
        lines.append("")
        lines += [f"[^{label}]: {md_cell(text)}" for label, text in footnotes.texts]
    return "\n".join(lines)


def build_markdown(machine, results, md_path, png_path):
    footnotes = Footnotes(results)
    sections = [
        section_header(machine),
        section_machine(machine),
        section_workload(machine),
        section_targets(results),
        section_chart(md_path, png_path),
        section_notes(machine),
        section_throughput(results, footnotes),
        section_latency(results, footnotes),
        section_cost(results),
        section_cpu(results),
        section_scale(results, footnotes),
        section_configuration(machine, results),
        section_failures(results, footnotes),  # last: it lists the footnotes referenced above
    ]
    return "\n\n".join(s for s in sections if s) + "\n"


# ---------------------------------------------------------------------------------------------
# Chart
# ---------------------------------------------------------------------------------------------

def plot_class(ax, results, cls, colours):
    """One panel: median jobs/s against workers, one line per system; returns {system: line}."""
    workers = results.workers(cls)
    lines = {}
    for system, name in results.systems:
        points = [(w, spread(results.lifecycle.get((system, cls, w), []), "jobs_per_s"))
                  for w in workers]
        points = [(w, s) for w, s in points if s is not None]
        if not points:
            continue
        xs = [w for w, _ in points]
        ys = [s.median for _, s in points]
        yerr = [[s.median - s.min for _, s in points], [s.max - s.median for _, s in points]]
        kvq = results.is_kvq(system)
        container = ax.errorbar(xs, ys, yerr=yerr, label=name, color=colours[system],
                                linestyle="-" if kvq else "--", linewidth=2.6 if kvq else 1.4,
                                marker="o" if kvq else "s", markersize=6 if kvq else 5,
                                capsize=3, zorder=3 if kvq else 2)
        lines[system] = container
    ax.set_title(f"{cls.capitalize()}")
    ax.set_xlabel("worker connections")
    ax.grid(True, which="major", alpha=0.3)
    if workers:
        ax.set_xscale("log", base=2)
        ax.set_xticks(workers)
        ax.set_xticklabels([str(w) for w in workers])
        ax.minorticks_off()
        ax.set_xlim(workers[0] / 1.4, workers[-1] * 1.4)
    if not lines:
        ax.text(0.5, 0.5, "no data", transform=ax.transAxes, ha="center", va="center",
                color="grey")
    ax.set_ylim(bottom=0)
    return lines


def write_chart(results, machine, png_path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    palette = plt.get_cmap("tab10").colors
    colours = {s: palette[i % len(palette)] for i, (s, _) in enumerate(results.systems)}
    classes = [c for c in results.classes() if results.workers(c)] or list(CLASSES)
    fig, axes = plt.subplots(1, len(classes), figsize=(12, 5), sharey=False, squeeze=False)
    handles = {}
    for ax, cls in zip(axes[0], classes):
        handles.update(plot_class(ax, results, cls, colours))
        ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,.0f}"))
    axes[0][0].set_ylabel("jobs/s (median)")
    runs = machine.get("runs")
    fig.suptitle("End-to-end jobs/s by concurrency" +
                 (f" (median of {runs} runs, bars: min–max)" if runs else " (bars: min–max)"))
    order = [s for s, _ in results.systems if s in handles]
    if order:
        fig.legend([handles[s] for s in order], [results.names[s] for s in order],
                   loc="lower center", ncol=min(len(order), 3), frameon=False)
    # Three legend columns fit the long system names; leave room for two legend rows.
    fig.tight_layout(rect=(0, 0.13 if order else 0, 1, 1))
    fig.savefig(png_path, dpi=110)
    plt.close(fig)


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------

def parse_args(argv):
    parser = argparse.ArgumentParser(
        description="Write docs/benchmarks.md and its chart from the peer benchmark's results.")
    parser.add_argument("--results", required=True, help="results, one JSON object per line")
    parser.add_argument("--machine", required=True, help="machine and run description (JSON)")
    parser.add_argument("--md", required=True, help="Markdown file to write")
    parser.add_argument("--png", required=True, help="chart (PNG) to write")
    return parser.parse_args(argv)


def write_file(path, text):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8") as f:
        f.write(text)
    os.replace(tmp, path)


def ensure_matplotlib():
    """Re-runs this script under the system Python when `python3` lacks matplotlib.

    python3-matplotlib is a Debian package, so it is importable from /usr/bin/python3 only; a
    `python3` earlier on PATH (pyenv, a venv) would otherwise fail to draw the chart.
    """
    if importlib.util.find_spec("matplotlib") is not None:
        return
    system_python = "/usr/bin/python3"
    if (os.environ.get("KVQ_BENCH_REPORT_REEXEC") or not os.access(system_python, os.X_OK)
            or os.path.realpath(sys.executable) == os.path.realpath(system_python)):
        return  # write_chart reports the missing module
    os.environ["KVQ_BENCH_REPORT_REEXEC"] = "1"
    os.execv(system_python, [system_python, os.path.abspath(__file__)] + sys.argv[1:])


def main(argv=None):
    args = parse_args(argv)
    if argv is None:
        ensure_matplotlib()
    try:
        machine = load_machine(args.machine)
        results = load_results(args.results, machine)
    except (OSError, ValueError) as e:
        warn(f"cannot read the inputs: {e}")
        return 1
    write_file(args.md, build_markdown(machine, results, args.md, args.png))
    try:
        os.makedirs(os.path.dirname(os.path.abspath(args.png)), exist_ok=True)
        write_chart(results, machine, args.png)
    except ImportError:
        warn(f"matplotlib is missing for {sys.executable}: wrote {args.md} but no chart "
             "(apt-get install python3-matplotlib, and run this with /usr/bin/python3)")
        return 1
    if results.failures:
        warn(f"{len(results.failures)} failed entries; see the Failures section of {args.md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
