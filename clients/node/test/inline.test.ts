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
