// SPDX-License-Identifier: Apache-2.0
// InlineClient: a client of a `kvq serve --ephemeral` it starts, which runs the test's handlers.

import assert from 'node:assert/strict';
import { chmodSync, existsSync, mkdtempSync, statSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { after, test } from 'node:test';

import { Client, InlineClient, JobFailedError, KvqError, findKvq, type Handler } from '../src/index';
import { KVQ_BIN } from './support';

// Retries within milliseconds, so a test does not wait for a backoff.
const fast = { base: 0.001, cap: 0.01, jitter: 0 };

const started: InlineClient[] = [];
async function inline(options: Parameters<typeof InlineClient.start>[0] = {}): Promise<InlineClient> {
  const kvq = await InlineClient.start({ kvqBin: KVQ_BIN, ...options });
  started.push(kvq);
  return kvq;
}
after(async () => {
  for (const kvq of started) await kvq.close();
});

test('a handler runs against a real server: its return value is the result, its progress kept', async () => {
  const double: Handler = async (job, { progress }) => {
    await progress({ half: true });
    return { n: (job.data as { n: number }).n * 2 };
  };
  const kvq = await inline({ handlers: { math: double } });
  assert.match(kvq.url, /^http:\/\/127\.0\.0\.1:\d+$/);
  await kvq.add('math', 'j1', { n: 21 });
  assert.deepEqual(await kvq.result('math', 'j1'), { n: 42 });
  const job = await kvq.get('math', 'j1');
  assert.equal(job.state, 'finished');
  assert.equal(job.outcome, 'succeeded');
  assert.equal(job.attempts, 1);
  assert.deepEqual(job.progress, { half: true });
});

test('failures and retries follow the server: attempts, errors, dead at max_attempts', async () => {
  let calls = 0;
  const flaky: Handler = async () => {
    calls++;
    if (calls < 3) throw new RangeError(`try ${calls}`);
    return 'third time';
  };
  const kvq = await inline({
    handlers: { flaky, bad: async () => { throw new TypeError('nope'); } },
    types: { flaky: { timeout: 5, maxAttempts: 5, backoff: fast }, bad: { timeout: 5, maxAttempts: 2, backoff: fast } },
  });
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

  await kvq.add('bad', 'b');
  const err = await kvq.result('bad', 'b').catch((e: unknown) => e);
  assert.ok(err instanceof JobFailedError, String(err));
  assert.equal(err.outcome, 'dead');
  assert.equal(err.kind, 'TypeError');
  assert.equal((await kvq.get('bad', 'b')).attempts, 2);
});

test('onlyDue leaves a retry for its backoff; retry = false ends it dead at once; drain waits for later jobs', async () => {
  const kvq = await inline({
    handlers: {
      t: async (job) => {
        if (job.id === 'final') throw Object.assign(new Error('bad input'), { retry: false });
        if (job.id === 'retry') throw new Error('later');
        return job.id;
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
  await assert.rejects(kvq.drain({ timeoutMs: 300 }), /jobs still pending after 300 ms: \{"t":1\}/);

  await kvq.remove('t', 'retry');
  await kvq.add('t', 'soon', {}, { scheduledTime: Date.now() + 300 });
  const t0 = Date.now();
  assert.equal(await kvq.drain(), 1);
  assert.ok(Date.now() - t0 >= 200, `drain returned after ${Date.now() - t0} ms, before the job was due`);
  assert.equal((await kvq.get('t', 'soon')).outcome, 'succeeded');
});

test('cancel during a run aborts the handler signal; errors are the server\'s', async () => {
  let seen: unknown;
  let running!: () => void;
  const isRunning = new Promise<void>((r) => (running = r));
  const kvq = await inline({
    handlers: {
      slow: (_job, { signal }) =>
        new Promise((_, reject) => {
          signal.addEventListener('abort', () => reject((seen = signal.reason)));
          running();
        }),
    },
    worker: { heartbeatInterval: 0.05 },
  });
  await kvq.add('slow', 's');
  const draining = kvq.drain({ onlyDue: true });
  await isRunning;
  assert.equal((await kvq.get('slow', 's')).state, 'running');
  await kvq.cancel('slow', 's');
  await draining;
  assert.ok(seen instanceof KvqError && seen.code === 'halted', String(seen));
  const job = await kvq.get('slow', 's');
  assert.equal(job.outcome, 'cancelled');
  await assert.rejects(kvq.get('slow', 'none'), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
  await assert.rejects(kvq.add('nobody', 'x'), (e: unknown) => e instanceof KvqError && e.code === 'no_timeout');
  await assert.rejects(kvq.cancel('slow', 's'), (e: unknown) => e instanceof KvqError && e.code === 'wrong_state');
});

test('close stops the server and removes its data directory', async () => {
  const kvq = await InlineClient.start({ kvqBin: KVQ_BIN });
  assert.ok(statSync(kvq.dataDir).isDirectory());
  await kvq.putType('t', { timeout: 1 });
  await kvq.close();
  assert.equal(existsSync(kvq.dataDir), false, 'its data directory is gone');
  await assert.rejects(new Client({ url: kvq.url, retry: { attempts: 1 } }).getType('t'),
    (e: unknown) => e instanceof KvqError && e.code === 'network');
  await kvq.close(); // twice is fine
});

test('the binary is kvqBin, then KVQ_BIN, then kvq on PATH; what goes wrong is said', async () => {
  const saved = { KVQ_BIN: process.env.KVQ_BIN, PATH: process.env.PATH };
  const onPath = mkdtempSync(join(tmpdir(), 'kvq-node-path-'));
  const empty = mkdtempSync(join(tmpdir(), 'kvq-node-path-'));
  symlinkSync(KVQ_BIN, join(onPath, 'kvq'));
  try {
    process.env.PATH = empty;
    process.env.KVQ_BIN = KVQ_BIN;
    assert.equal(findKvq(), KVQ_BIN);
    process.env.KVQ_BIN = '/nonexistent/kvq';
    assert.equal(findKvq(KVQ_BIN), KVQ_BIN);
    await assert.rejects(InlineClient.start(), /KVQ_BIN names \(\/nonexistent\/kvq\)/);
    delete process.env.KVQ_BIN;
    assert.throws(() => findKvq(), /no kvq binary/);
    process.env.PATH = onPath;
    assert.equal(findKvq(), join(onPath, 'kvq'));
    const kvq = await InlineClient.start({ handlers: { t: () => 1 } }); // found on PATH; t made with a timeout
    assert.equal((await kvq.getType('t')).timeout, 30);
    await kvq.close();
    const plain = join(empty, 'kvq');
    writeFileSync(plain, '');
    chmodSync(plain, 0o644);
    assert.throws(() => findKvq(plain), /not an executable file/);
  } finally {
    process.env.PATH = saved.PATH;
    if (saved.KVQ_BIN === undefined) delete process.env.KVQ_BIN;
    else process.env.KVQ_BIN = saved.KVQ_BIN;
  }
  await assert.rejects(InlineClient.start({ kvqBin: KVQ_BIN, args: ['--listen', '127.0.0.1:0'] }),
    /leave out --data, --store and --listen/);
  const nothing = await inline();
  await assert.rejects(nothing.drain(), /no handlers/);
});

test('a token reaches the server', async () => {
  const kvq = await inline({ args: ['--token', 's3cret'], token: 's3cret', types: { t: { timeout: 1 } } });
  assert.equal((await kvq.getType('t')).timeout, 1);
  await assert.rejects(new Client({ url: kvq.url }).getType('t'), (e: unknown) => e instanceof KvqError && e.status === 401);
});
