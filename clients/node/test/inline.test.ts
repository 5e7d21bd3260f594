// SPDX-License-Identifier: Apache-2.0
// The inline mode: the same handlers run in-process, with no server.

import assert from 'node:assert/strict';
import { test } from 'node:test';

import { InlineClient, JobFailedError, KvqError, type Handler } from '../src/index';

test('a handler runs in-process: its return value is the result, its progress kept', async () => {
  const double: Handler = async (job, { progress }) => {
    await progress({ half: true });
    return { n: (job.data as { n: number }).n * 2 };
  };
  const kvq = new InlineClient({ handlers: { math: double } });
  await kvq.add('math', 'j1', { n: 21 });
  assert.deepEqual(await kvq.result('math', 'j1'), { n: 42 });
  const job = await kvq.get('math', 'j1');
  assert.equal(job.state, 'finished');
  assert.equal(job.outcome, 'succeeded');
  assert.equal(job.attempts, 1);
  assert.deepEqual(job.progress, { half: true });
});

test('failures and retries are visible: attempts, errors, dead at max_attempts', async () => {
  let calls = 0;
  const flaky: Handler = async () => {
    calls++;
    if (calls < 3) throw new RangeError(`try ${calls}`);
    return 'third time';
  };
  const kvq = new InlineClient({ handlers: { flaky }, types: { flaky: { timeout: 5, maxAttempts: 5 } } });
  await kvq.add('flaky', 'f');
  assert.equal(await kvq.drain(), 3);
  const job = await kvq.get('flaky', 'f');
  assert.equal(job.outcome, 'succeeded');
  assert.equal(job.attempts, 3);
  assert.deepEqual(job.errors.map((e) => [e.attempt, e.kind, e.message]), [
    [1, 'RangeError', 'try 1'],
    [2, 'RangeError', 'try 2'],
  ]);
  assert.match((job.errors[0]!.details as { stack: string }).stack, /RangeError: try 1/);

  const always = new InlineClient({
    handlers: { bad: async () => { throw new TypeError('nope'); } },
    types: { bad: { timeout: 5, maxAttempts: 2 } },
  });
  await always.add('bad', 'b');
  const err = await always.result('bad', 'b').catch((e: unknown) => e);
  assert.ok(err instanceof JobFailedError, String(err));
  assert.equal(err.outcome, 'dead');
  assert.equal(err.kind, 'TypeError');
  assert.equal((await always.get('bad', 'b')).attempts, 2);
});

test('onlyDue leaves a retry for its backoff time; retry = false ends it dead at once', async () => {
  const kvq = new InlineClient({
    handlers: {
      t: async (job) => {
        if (job.id === 'final') throw Object.assign(new Error('bad input'), { retry: false });
        throw new Error('later');
      },
    },
    types: { t: { timeout: 5, backoff: { base: 60 } } },
  });
  await kvq.addMany('t', [{ id: 'final' }, { id: 'retry' }]);
  assert.equal(await kvq.drain({ onlyDue: true }), 2);
  assert.equal((await kvq.get('t', 'final')).outcome, 'dead');
  const r = await kvq.get('t', 'retry');
  assert.equal(r.state, 'pending');
  assert.ok(r.scheduled_time > Date.now() + 30_000, 'scheduled after the backoff');
  assert.deepEqual((await kvq.list('t', { state: 'scheduled' })).jobs.map((j) => j.id), ['retry']);
});

test('cancel during a run aborts the handler signal; errors are KvqErrors as from a server', async () => {
  let seen: unknown;
  const kvq = new InlineClient({
    handlers: {
      slow: (_job, { signal }) =>
        new Promise((_, reject) => signal.addEventListener('abort', () => reject((seen = signal.reason)))),
    },
  });
  await kvq.add('slow', 's');
  const running = kvq.drain();
  await new Promise((r) => setImmediate(r));
  assert.equal((await kvq.get('slow', 's')).state, 'running');
  await kvq.cancel('slow', 's');
  await running;
  assert.ok(seen instanceof KvqError && seen.code === 'halted');
  const job = await kvq.get('slow', 's');
  assert.equal(job.outcome, 'cancelled');
  assert.deepEqual(job.errors, [], 'a cancelled run is not a failure');
  await assert.rejects(kvq.get('slow', 'none'), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
  await assert.rejects(kvq.add('nobody', 'x'), (e: unknown) => e instanceof KvqError && e.code === 'no_timeout');
  await assert.rejects(kvq.cancel('slow', 's'), (e: unknown) => e instanceof KvqError && e.code === 'wrong_state');
  assert.equal((await kvq.rerun('slow', 's')).state, 'pending');
});

test('ifExists keep and addMany report as the server does', async () => {
  const kvq = new InlineClient({ handlers: { t: async () => null } });
  assert.deepEqual(await kvq.add('t', 'a', { v: 1 }), { id: 'a', added: true });
  assert.deepEqual(await kvq.add('t', 'a', { v: 2 }, { ifExists: 'keep' }), { id: 'a', added: false });
  assert.deepEqual(await kvq.addMany('t', [{ id: 'a' }, { id: 'b' }], { ifExists: 'keep' }), { added: 1, kept: ['a'] });
  assert.deepEqual((await kvq.get('t', 'a')).data, { v: 1 });
  const page = await kvq.list('t', { limit: 1 });
  assert.deepEqual(page.jobs.map((j) => j.id), ['a']);
  assert.equal(page.nextCursor, 'a');
  assert.deepEqual((await kvq.list('t', { cursor: page.nextCursor })).jobs.map((j) => j.id), ['b']);
});

test('a job scheduled later runs only once the inline clock reaches it', async () => {
  const ran: string[] = [];
  const kvq = new InlineClient({ handlers: { t: async (job) => void ran.push(job.id) } });
  const start = kvq.now();
  await kvq.add('t', 'later', {}, { scheduledTime: start + 3_600_000 });
  await kvq.add('t', 'now');
  assert.equal(await kvq.drain({ onlyDue: true }), 1);
  assert.deepEqual(ran, ['now']);
  assert.equal((await kvq.get('t', 'later')).state, 'pending');
  kvq.advance(3_540_000);
  assert.equal(await kvq.drain({ onlyDue: true }), 0, 'a minute early');
  kvq.advance(60_000);
  assert.equal(await kvq.drain({ onlyDue: true }), 1);
  const job = await kvq.get('t', 'later');
  assert.equal(job.outcome, 'succeeded');
  assert.ok(job.started_at! >= job.scheduled_time);
});

test('drain moves the inline clock and runs jobs in the order of their times', async () => {
  const ran: string[] = [];
  const kvq = new InlineClient({ handlers: { t: async (job) => void ran.push(job.id) } });
  const start = kvq.now();
  await kvq.add('t', 'b', {}, { scheduledTime: start + 20_000, priority: -5 }); // a better priority does not run it early
  await kvq.add('t', 'a', {}, { scheduledTime: new Date(start + 10_000) });
  await kvq.add('t', 'c');
  assert.equal(await kvq.drain(), 3);
  assert.deepEqual(ran, ['c', 'a', 'b']);
  assert.ok(kvq.now() >= start + 20_000, 'the clock moved to the last job');
  // runNext does the same one job at a time
  await kvq.add('t', 'd', {}, { scheduledTime: kvq.now() + 5_000 });
  assert.equal(await kvq.runNext({ onlyDue: true }), false);
  assert.equal(await kvq.runNext(), true);
  assert.deepEqual(ran, ['c', 'a', 'b', 'd']);
});

test('a retry waits for its backoff on the inline clock', async () => {
  let calls = 0;
  const kvq = new InlineClient({
    handlers: { t: async () => { if (++calls === 1) throw new Error('busy'); return 'ok'; } },
    types: { t: { timeout: 5, backoff: { base: 10, jitter: 0 } } },
  });
  await kvq.add('t', 'j');
  assert.equal(await kvq.drain({ onlyDue: true }), 1);
  const j = await kvq.get('t', 'j');
  assert.equal(j.state, 'pending');
  assert.equal(j.scheduled_time, j.errors[0]!.at + 10_000);
  assert.equal(await kvq.result('t', 'j'), 'ok');
  const done = await kvq.get('t', 'j');
  assert.ok(done.started_at! >= j.scheduled_time, 'the retry ran at its time');
});

test('pauseType and resumeType; a pause for a while ends by the inline clock', async () => {
  const kvq = new InlineClient({ handlers: { t: async () => null } });
  const paused = await kvq.pauseType('t');
  assert.equal(paused.paused, true);
  assert.equal(paused.paused_until, null);
  await kvq.add('t', 'j');
  assert.equal(await kvq.drain(), 0);
  await assert.rejects(kvq.result('t', 'j'), (e: unknown) => e instanceof KvqError && e.code === 'wrong_state');
  assert.equal((await kvq.resumeType('t')).paused, false);
  assert.equal(await kvq.drain({ onlyDue: true }), 1);

  const forAMinute = await kvq.pauseType('t', { forMs: 60_000 });
  assert.ok(forAMinute.paused_until! >= kvq.now() + 59_000);
  await kvq.add('t', 'k');
  assert.equal(await kvq.drain({ onlyDue: true }), 0);
  assert.equal(await kvq.drain(), 1, 'drain moves the clock past the pause');
  assert.equal((await kvq.getType('t')).paused, false);
  await assert.rejects(kvq.pauseType('missing'), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
  await assert.rejects(kvq.pauseType('t', { forMs: 0 }), (e: unknown) => e instanceof KvqError && e.code === 'invalid_argument');
});

/** A handler that records the most runs at once per key, each taking a few ms. */
function tracking(key: (id: string) => string) {
  const now = new Map<string, number>();
  const most = new Map<string, number>();
  const handler: Handler = async (job) => {
    const k = key(job.id);
    now.set(k, (now.get(k) ?? 0) + 1);
    most.set(k, Math.max(most.get(k) ?? 0, now.get(k)!));
    await new Promise((r) => setTimeout(r, 10));
    now.set(k, now.get(k)! - 1);
    return null;
  };
  return { handler, most };
}

test('concurrency runs handlers at once, never more than maxRunning', async () => {
  const { handler, most } = tracking(() => 'all');
  const kvq = new InlineClient({ handlers: { t: handler }, concurrency: 4 });
  await kvq.addMany('t', Array.from({ length: 8 }, (_, i) => ({ id: `j${i}` })));
  assert.equal(await kvq.drain(), 8);
  assert.equal(most.get('all'), 4);
  const t = await kvq.putType('t', { maxRunning: 2 });
  assert.equal(t.max_running, 2);
  most.clear();
  await kvq.addMany('t', Array.from({ length: 8 }, (_, i) => ({ id: `j${i}` })));
  assert.equal(await kvq.drain(), 8);
  assert.equal(most.get('all'), 2);
  assert.equal((await kvq.putType('t', { maxRunning: null })).max_running, null);
  await assert.rejects(kvq.putType('t', { maxRunning: 0 }), (e: unknown) => e instanceof KvqError && e.code === 'invalid_argument');
});

test('rate counts runs per window of the inline clock', async () => {
  const kvq = new InlineClient({ handlers: { t: async () => null }, types: { t: { timeout: 5, rate: { limit: 2, periodMs: 1000 } } } });
  assert.deepEqual((await kvq.getType('t')).rate, { limit: 2, period_ms: 1000 });
  await kvq.addMany('t', Array.from({ length: 5 }, (_, i) => ({ id: `j${i}` })));
  assert.equal(await kvq.drain({ onlyDue: true }), 2);
  kvq.advance(1000);
  assert.equal(await kvq.drain({ onlyDue: true }), 2);
  assert.equal(await kvq.drain(), 1);
});

test('groups take turns; a better priority goes first; groups() lists them', async () => {
  const ran: string[] = [];
  const kvq = new InlineClient({ handlers: { t: async (job) => void ran.push(job.id) } });
  const at = kvq.now() - 10_000; // all due, all at the same millisecond
  await kvq.addMany('t', [0, 1, 2].map((i) => ({ id: `a${i}`, group: 'A', scheduledTime: at })));
  await kvq.add('t', 'b0', {}, { group: 'B', scheduledTime: at });
  await kvq.add('t', 'b1', {}, { group: 'B', scheduledTime: at });
  await kvq.add('t', 'n0', {}, { scheduledTime: at });
  assert.equal((await kvq.get('t', 'a1')).group, 'A');
  assert.equal((await kvq.get('t', 'n0')).group, null);
  const page = await kvq.groups('t');
  assert.deepEqual(page.groups.map((g) => [g.group, g.running, g.pending, g.full]), [['A', 0, 3, false], ['B', 0, 2, false]]);
  assert.ok(page.groups[0]!.in_turn_at! > 0);
  assert.equal(page.nextAfter, '');
  const first = await kvq.groups('t', { limit: 1 });
  assert.deepEqual([first.groups.map((g) => g.group), first.nextAfter], [['A'], 'A']);
  assert.deepEqual((await kvq.groups('t', { after: 'A' })).groups.map((g) => g.group), ['B']);
  assert.equal(await kvq.drain(), 6);
  // the job without a group wins the tie at its time; then the groups, by name, each going to
  // the back once served (as kvq serve gives them)
  assert.deepEqual(ran, ['n0', 'a0', 'b0', 'a1', 'b1', 'a2']);

  ran.length = 0;
  const at2 = kvq.now() - 10_000;
  await kvq.add('t', 'a0', {}, { group: 'A', scheduledTime: at2 });
  await kvq.add('t', 'a1', {}, { group: 'A', priority: -1, scheduledTime: at2 });
  await kvq.add('t', 'b0', {}, { group: 'B', scheduledTime: at2 });
  await kvq.drain();
  assert.deepEqual(ran, ['a1', 'b0', 'a0']);
  await assert.rejects(kvq.add('t', 'bad', {}, { group: 'x'.repeat(129) }), (e: unknown) => e instanceof KvqError && e.code === 'invalid_argument');
});

/** An inline client whose type `t` records the order its jobs run in, with g1..g3 of group G at `base` and u1..u3 without a group at base + 1, 2, 3 steps. */
async function groupAndUngrouped(base: (kvq: InlineClient) => number, step: number): Promise<{ kvq: InlineClient; ran: string[] }> {
  const ran: string[] = [];
  const kvq = new InlineClient({ handlers: { t: async (job) => void ran.push(job.id) } });
  const at = base(kvq);
  await kvq.addMany('t', [1, 2, 3].map((i) => ({ id: `g${i}`, group: 'G', scheduledTime: at })));
  await kvq.addMany('t', [1, 2, 3].map((i) => ({ id: `u${i}`, scheduledTime: at + i * step })));
  return { kvq, ran };
}

test('jobs without a group keep their own time against a group\'s turns', async () => {
  // kvq serve, jobs due at base (G) and base + 1, 2, 3 ms (u1..u3), one accept at a time: g1,
  // u1, u2, u3, g2, g3 — G goes to the back once served, while each job without a group keeps
  // its own time (not "one more group": g1, u1, g2, u2, g3, u3).
  const { kvq, ran } = await groupAndUngrouped((k) => k.now() - 10_000, 1);
  while (await kvq.runNext({ onlyDue: true }));
  assert.deepEqual(ran, ['g1', 'u1', 'u2', 'u3', 'g2', 'g3']);
});

test('a group\'s turn against jobs without a group as the clock moves', async () => {
  // G's jobs at base, u1..u3 at base + 1, 2, 3 s; one accept at each of base + 1 .. 6 s. kvq
  // serve (sleeping instead of advancing): g1, u1, g2, u2, u3, g3 — G's turn is its last run's
  // start, and a job without a group due by then goes first (u3 at base + 3 s against g2's
  // start at base + 3 s: a tie, to the job).
  const { kvq, ran } = await groupAndUngrouped((k) => k.now(), 1000);
  for (let i = 0; i < 6; i++) {
    kvq.advance(1000);
    assert.equal(await kvq.runNext({ onlyDue: true }), true);
  }
  assert.deepEqual(ran, ['g1', 'u1', 'g2', 'u2', 'u3', 'g3']);
});

test('a group whose first job is not due is not in line', async () => {
  const ran: string[] = [];
  const kvq = new InlineClient({ handlers: { t: async (job) => void ran.push(job.id) } });
  const now = kvq.now();
  await kvq.add('t', 'g-later', {}, { group: 'G', priority: 0, scheduledTime: now + 3_600_000 });
  await kvq.add('t', 'g-due', {}, { group: 'G', priority: 1, scheduledTime: now - 1000 });
  await kvq.add('t', 'u', {}, { priority: 1, scheduledTime: now - 500 });
  assert.equal(await kvq.drain({ onlyDue: true }), 1);
  assert.deepEqual(ran, ['u']);
  assert.equal((await kvq.groups('t')).groups[0]!.in_turn_at, now + 3_600_000);
  assert.equal(await kvq.drain(), 2);
  assert.deepEqual(ran, ['u', 'g-later', 'g-due']);
});

test('maxRunningPerGroup caps each group under concurrency', async () => {
  const { handler, most } = tracking((id) => id[0]!);
  const kvq = new InlineClient({ handlers: { t: handler }, types: { t: { timeout: 5, maxRunningPerGroup: 1 } }, concurrency: 10 });
  for (let i = 0; i < 3; i++) {
    await kvq.add('t', `a${i}`, {}, { group: 'A' });
    await kvq.add('t', `b${i}`, {}, { group: 'B' });
    await kvq.add('t', `n${i}`);
  }
  assert.equal(await kvq.drain(), 9);
  assert.deepEqual([most.get('a'), most.get('b'), most.get('n')], [1, 1, 3]);
  assert.deepEqual((await kvq.groups('t')).groups, []);
});
