// SPDX-License-Identifier: Apache-2.0
// The Worker runner against a real `kvq serve`: one test per feature.

import assert from 'node:assert/strict';
import { after, afterEach, before, test } from 'node:test';

import { Client, JobFailedError, KvqError, ShutdownError, Worker, type Handler, type WorkerOptions } from '../src/index';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

import { KvqServer, freePort, memoryLog, uniq, until } from './support';

let server: KvqServer;
let kvq: Client;

before(async () => {
  server = await KvqServer.start();
  kvq = new Client({ url: server.url });
});
after(async () => {
  await server.stop();
});

/** A sleep that ends early (rejecting) when the signal aborts. */
function pause(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    const t = setTimeout(resolve, ms);
    signal?.addEventListener('abort', () => {
      clearTimeout(t);
      reject(signal.reason);
    });
  });
}

const started: Worker[] = [];
afterEach(async () => {
  // A failed assertion must not leave a worker running (the file would never end).
  await Promise.all(started.splice(0).map((w) => w.stop()));
});

/** A worker on the test server, quick to stop, its log kept; stopped after each test. */
function worker(handlers: Record<string, Handler>, options: Partial<WorkerOptions> = {}) {
  const mem = memoryLog();
  const w = new Worker({
    client: new Client({ url: server.url }),
    handlers,
    pollTimeout: 0.5,
    grace: 2,
    handleSignals: false,
    log: mem.log,
    ...options,
  });
  started.push(w);
  return { w, lines: mem.lines, running: w.run() };
}

test('the return value becomes the result; progress is reported', async () => {
  const type = uniq('w');
  await kvq.putType(type, { timeout: 10 });
  const { w, running } = worker({
    [type]: async (job, { progress }) => {
      assert.equal(await progress({ step: 1 }), true);
      return { doubled: (job.data as { n: number }).n * 2 };
    },
  });
  await kvq.add(type, 'j', { n: 21 });
  assert.deepEqual(await kvq.result(type, 'j'), { doubled: 42 });
  const job = await kvq.get(type, 'j');
  assert.equal(job.attempts, 1);
  assert.deepEqual(job.progress, { step: 1 });
  await w.stop();
  await running;
});

test('the heartbeat keeps a job running far longer than its type timeout', async () => {
  const type = uniq('hb');
  await kvq.putType(type, { timeout: 1 });
  const { w, running } = worker({
    [type]: async (_job, { signal }) => {
      await pause(3500, signal);
      return 'slept';
    },
  });
  await kvq.add(type, 'long');
  assert.equal(await kvq.result(type, 'long'), 'slept');
  const job = await kvq.get(type, 'long');
  assert.equal(job.attempts, 1, 'never lost, so never run twice');
  assert.equal(job.lost_runs, 0);
  assert.deepEqual(job.errors, []);
  await w.stop();
  await running;
});

test('fencing aborts the handler signal with a halted KvqError', async () => {
  const type = uniq('fence');
  await kvq.putType(type, { timeout: 30 });
  let reason: unknown;
  let afterAbort = false;
  const { w, running } = worker(
    {
      [type]: async (_job, { signal }) => {
        await pause(60000, signal).catch((e: unknown) => {
          reason = e;
        });
        afterAbort = true;
        return 'ignored';
      },
    },
    { heartbeatInterval: 0.2 },
  );
  await kvq.add(type, 'f');
  await kvq.wait(type, 'f', { state: 'running', timeout: 10 });
  await kvq.cancel(type, 'f');
  await until(() => afterAbort, 5000, 'the handler to see its signal abort');
  assert.ok(reason instanceof KvqError, String(reason));
  assert.equal(reason.code, 'halted');
  await new Promise((r) => setTimeout(r, 300));
  const job = await kvq.get(type, 'f');
  assert.equal(job.outcome, 'cancelled', 'the handler result after fencing is dropped');
  assert.equal(job.result, null);
  assert.deepEqual(job.errors, []);
  await w.stop();
  await running;
});

test('a throw becomes a failure with the retry policy applied, until dead at max_attempts', async () => {
  const type = uniq('fail');
  await kvq.putType(type, { timeout: 10, maxAttempts: 3, backoff: { base: 0.05, cap: 0.1 } });
  class PaymentError extends Error {
    override name = 'PaymentError';
  }
  let calls = 0;
  const { w, running } = worker({
    [type]: async () => {
      calls++;
      throw new PaymentError(`card declined #${calls}`);
    },
  });
  await kvq.add(type, 'pay');
  const err = await kvq.result(type, 'pay').catch((e: unknown) => e);
  assert.ok(err instanceof JobFailedError, String(err));
  assert.equal(err.outcome, 'dead');
  assert.equal(err.kind, 'PaymentError');
  assert.equal(err.message, 'card declined #3');
  const job = await kvq.get(type, 'pay');
  assert.equal(job.attempts, 3);
  assert.equal(calls, 3);
  assert.deepEqual(job.errors.map((e) => [e.attempt, e.kind, e.message]), [
    [1, 'PaymentError', 'card declined #1'],
    [2, 'PaymentError', 'card declined #2'],
    [3, 'PaymentError', 'card declined #3'],
  ]);
  const details = job.errors[0]!.details as { stack: string };
  assert.match(details.stack, /PaymentError: card declined #1/);
  assert.match(details.stack, /worker\.test/);
  await w.stop();
  await running;
});

test('an error with retry = false ends the job dead at once', async () => {
  const type = uniq('final');
  await kvq.putType(type, { timeout: 10, maxAttempts: 5 });
  const { w, running } = worker({
    [type]: async () => {
      throw Object.assign(new Error('bad input'), { retry: false, details: { field: 'to' } });
    },
  });
  await kvq.add(type, 'x');
  await assert.rejects(kvq.result(type, 'x'), (e: unknown) => e instanceof JobFailedError && e.outcome === 'dead');
  const job = await kvq.get(type, 'x');
  assert.equal(job.attempts, 1);
  assert.deepEqual((job.errors[0]!.details as { details: unknown }).details, { field: 'to' });
  await w.stop();
  await running;
});

test('concurrency N really runs N handlers at once, and never more', async () => {
  const type = uniq('conc');
  await kvq.putType(type, { timeout: 10 });
  const N = 3;
  let active = 0;
  let peak = 0;
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const { w, running } = worker(
    {
      [type]: async () => {
        active++;
        peak = Math.max(peak, active);
        await gate;
        await pause(50);
        active--;
      },
    },
    { concurrency: N },
  );
  await kvq.addMany(type, Array.from({ length: 7 }, (_, i) => ({ id: `j${i}` })));
  await until(() => active === N, 5000, `${N} handlers running at once`);
  await pause(300);
  assert.equal(active, N, 'no more than N while they run');
  assert.equal(w.active, N);
  assert.equal((await kvq.list(type, { state: 'running' })).jobs.length, N);
  release();
  await until(async () => (await kvq.list(type, { state: 'succeeded' })).jobs.length === 7, 10000, 'all seven to finish');
  assert.equal(peak, N);
  await w.stop();
  await running;
});

test('the worker registers, and unregisters when stopped', async () => {
  const type = uniq('reg');
  const wtype = uniq('wt');
  await kvq.putType(type, { timeout: 10 });
  let release!: () => void;
  const gate = new Promise<void>((r) => (release = r));
  const { w, running } = worker({ [type]: () => gate }, { workerType: wtype, healthTimeout: 1 });
  await until(async () => (await kvq.listWorkers(wtype)).workers.some((x) => x.id === w.id), 5000, 'registration');
  await pause(1500); // past its health timeout: only its heartbeats keep it alive
  assert.ok((await kvq.listWorkers(wtype)).workers.some((x) => x.id === w.id), 'still alive after its health timeout');
  await kvq.add(type, 'j');
  await kvq.wait(type, 'j', { state: 'running', timeout: 5 });
  const job = await kvq.get(type, 'j');
  assert.equal(job.worker, w.id, 'accepted as the registered worker, so its death re-enqueues at once');
  assert.equal(job.worker_type, wtype);
  release();
  await kvq.result(type, 'j');
  await w.stop();
  await running;
  assert.deepEqual((await kvq.listWorkers(wtype)).workers, []);
});

test('stop lets handlers finish within the grace, and hands the rest back without an attempt', async () => {
  const type = uniq('stop');
  await kvq.putType(type, { timeout: 10 });
  const reasons: unknown[] = [];
  const { w, running } = worker(
    {
      [type]: async (job, { signal }) => {
        if (job.id === 'quick') {
          await pause(300);
          return 'done';
        }
        await pause(60000, signal).catch((e: unknown) => reasons.push(e));
        return 'too late';
      },
    },
    { concurrency: 2, grace: 1 },
  );
  await kvq.addMany(type, [{ id: 'quick' }, { id: 'slow' }]);
  await until(() => w.active === 2, 5000, 'both running');
  const t0 = Date.now();
  await w.stop();
  await running;
  assert.ok(Date.now() - t0 < 4000, 'stopped within the grace (and a poll)');
  assert.equal((await kvq.get(type, 'quick')).outcome, 'succeeded');
  const slow = await kvq.get(type, 'slow');
  assert.equal(slow.state, 'pending', 'handed back');
  assert.equal(slow.attempts, 0, 'no attempt counted');
  assert.equal(slow.lost_runs, 0);
  assert.deepEqual(slow.errors, []);
  assert.equal(reasons.length, 1);
  assert.ok(reasons[0] instanceof ShutdownError);
});

test('the registration stays alive through a grace longer than its health timeout', async () => {
  const type = uniq('drain');
  const wtype = uniq('wt');
  await kvq.putType(type, { timeout: 10 });
  const { w, running } = worker(
    { [type]: async () => { await pause(2500); return 'finished in the grace'; } },
    { workerType: wtype, healthTimeout: 0.5, grace: 5 },
  );
  await kvq.add(type, 'j');
  await until(() => w.active === 1, 5000, 'the handler to start'); // (a job accepted after the stop is handed back)
  await w.stop();
  await running;
  const job = await kvq.get(type, 'j');
  assert.equal(job.outcome, 'succeeded', JSON.stringify(job));
  assert.equal(job.result, 'finished in the grace');
  assert.equal(job.attempts, 1);
  assert.equal(job.lost_runs, 0);
});

test('a worker on a type that does not exist fails instead of idling', async () => {
  const { running } = worker({ [uniq('missing')]: async () => null });
  await assert.rejects(running, (e: unknown) => e instanceof KvqError && e.code === 'not_found' && /does not exist/.test(e.message));
});

test('a worker whose server is down waits for it (network errors retried with backoff)', async () => {
  const port = await freePort();
  const dataDir = mkdtempSync(join(tmpdir(), 'kvq-node-'));
  const type = uniq('late');
  const first = await KvqServer.start({ port, dataDir });
  await new Client({ url: first.url }).putType(type, { timeout: 10 });
  await first.stop();
  const mem = memoryLog();
  const w = new Worker({
    client: new Client({ url: `http://127.0.0.1:${port}` }),
    handlers: { [type]: async () => 'late but fine' },
    pollTimeout: 0.5,
    handleSignals: false,
    retry: { baseMs: 50, capMs: 300 },
    log: mem.log,
  });
  const running = w.run();
  await pause(700);
  const again = await KvqServer.start({ port, dataDir });
  try {
    const c = new Client({ url: again.url });
    await c.add(type, 'j');
    assert.equal(await c.result(type, 'j'), 'late but fine');
    await w.stop();
    await running;
  } finally {
    await again.stop();
    rmSync(dataDir, { recursive: true, force: true });
  }
});
