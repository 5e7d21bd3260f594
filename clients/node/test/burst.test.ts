// SPDX-License-Identifier: Apache-2.0
// Counts, burst mode, the completed/failed events and typed handlers, against a real `kvq serve`.

import assert from 'node:assert/strict';
import { spawnSync } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Client, InlineClient, KvqError, Worker, workerDefaults, type AcceptedJob } from '../src/index';
import { KVQ_BIN, KvqServer, memoryLog, uniq } from './support';

let server: KvqServer;
let kvq: Client;

before(async () => {
  server = await KvqServer.start();
  kvq = new Client({ url: server.url });
});
after(async () => {
  await server.stop();
});

test('counts: each state of a type, from GET /v1/stats', async () => {
  const type = uniq('c');
  await kvq.putType(type, { timeout: 30 });
  await kvq.addMany(type, [{ id: 'a' }, { id: 'b' }, { id: 'later', scheduledTime: Date.now() + 3_600_000 }]);
  const [first] = await kvq.accept(type);
  await kvq.finish(first!, null);
  await kvq.accept(type);
  assert.deepEqual(await kvq.counts(type), { pending: 1, scheduled: 1, running: 1, finished: 1, dead: 0, cancelled: 0 });
  const stats = await kvq.stats();
  assert.ok(stats.types.some((t) => t.type === type));
  assert.ok(stats.accepts >= 2);
  await assert.rejects(kvq.counts(uniq('missing')), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
});

test('burst: run() resolves once no job is due and none running; events tell each outcome', async () => {
  const type = uniq('b');
  const other = uniq('b');
  await kvq.putType(type, { timeout: 30, maxAttempts: 1 });
  await kvq.putType(other, { timeout: 30 });
  await kvq.addMany(type, [{ id: 'j0', data: { n: 0 } }, { id: 'j1', data: { n: 1 } }, { id: 'j2', data: { n: 2 } },
    { id: 'bad', data: { n: -1 } }, { id: 'later', data: { n: 9 }, scheduledTime: Date.now() + 3_600_000 }]);
  await kvq.add(other, 'o', { n: 5 });
  const w = new Worker<{ n: number }, { doubled: number }>({
    client: new Client({ url: server.url }),
    handlers: {
      [type]: async (job) => {
        if (job.data.n < 0) throw new Error('negative');
        return { doubled: job.data.n * 2 };
      },
      [other]: (job) => ({ doubled: job.data.n * 2 }),
    },
    concurrency: 2,
    pollTimeout: 30,
    burst: true,
    handleSignals: false,
    log: memoryLog().log,
  });
  const completed: string[] = [];
  const failed: string[] = [];
  w.on('completed', (job: AcceptedJob<{ n: number }>, result: { doubled: number }) => completed.push(`${job.id}=${result.doubled}`));
  w.on('failed', (job, error) => failed.push(`${job.id}:${(error as Error).message}`));
  const t0 = Date.now();
  await w.run();
  assert.ok(Date.now() - t0 < 10_000, 'well before the 30 s poll');
  assert.deepEqual(completed.sort(), ['j0=0', 'j1=2', 'j2=4', 'o=10']);
  assert.deepEqual(failed, ['bad:negative']);
  assert.deepEqual(await kvq.counts(type), { pending: 1, scheduled: 1, running: 0, finished: 4, dead: 1, cancelled: 0 });
});

test('with more types than slots every type gets its turn: a job of the last type runs at once', async () => {
  const types = [uniq('turn'), uniq('turn'), uniq('turn')];
  for (const t of types) await kvq.putType(t, { timeout: 30 });
  const ran: string[] = [];
  const handlers = Object.fromEntries(types.map((t) => [t, (job: AcceptedJob) => void ran.push(`${job.type}/${job.id}`)]));
  // Burst: it stops only once an accept of each type came back empty, so a loop that kept the
  // one slot to itself would never let it stop.
  const burst = new Worker({ client: new Client({ url: server.url }), handlers, concurrency: 1, burst: true,
    handleSignals: false, register: false, log: memoryLog().log });
  await kvq.add(types[2]!, 'b1');
  const t0 = Date.now();
  await burst.run();
  assert.deepEqual(ran, [`${types[2]}/b1`]);
  assert.ok(Date.now() - t0 < 5000, `burst took ${Date.now() - t0} ms`);
  // Long-polling: a job added to the last type while the others poll is taken within about 1 s
  // (each accept waits at most 1 s with several types), not after their 30 s polls.
  const w = new Worker({ client: new Client({ url: server.url }), handlers, concurrency: 1, pollTimeout: 30,
    handleSignals: false, register: false, log: memoryLog().log });
  const running = w.run();
  await new Promise((r) => setTimeout(r, 200));
  const added = Date.now();
  await kvq.add(types[2]!, 'b2');
  assert.equal(await kvq.result(types[2]!, 'b2'), null);
  const took = Date.now() - added;
  await w.stop();
  await running;
  assert.ok(took < 4000, `the job waited ${took} ms for its type's turn`);
});

test('typed handlers: Worker<Data, Result> checks what a handler returns', () => {
  const handlers = { t: (job: AcceptedJob<{ n: number }>) => ({ doubled: String(job.data.n) }) };
  assert.throws(
    () =>
      new Worker<{ n: number }, { doubled: number }>({
        // @ts-expect-error a handler whose result is not a Result does not compile
        handlers,
        client: 'http://127.0.0.1:1',
        concurrency: 0, // and at run time, this is refused
      }),
    /concurrency/,
  );
});

test('the package loads as an ES module and as CommonJS, with the same classes', () => {
  const root = join(__dirname, '..', '..');
  const probe = [
    "import * as esm from '@kvq/client';",
    "import { createRequire } from 'node:module';",
    "const cjs = createRequire(process.cwd() + '/package.json')('@kvq/client');",
    "console.log(JSON.stringify([typeof esm.Worker, esm.Client === cjs.Client, Object.keys(cjs).every((k) => k in esm)]));",
  ].join('\n');
  const r = spawnSync(process.execPath, ['--input-type=module', '-e', probe], { cwd: root, encoding: 'utf8' });
  assert.equal(r.status, 0, r.stderr);
  assert.deepEqual(JSON.parse(r.stdout), ['function', true, true]);
});

test('the worker defaults are the clients\' one set (docs/clients.md)', () => {
  assert.deepEqual({ ...workerDefaults }, { concurrency: 1, pollTimeout: 10, grace: 10, healthTimeout: 10 });
});

test('stop ends an idle registered worker\'s long poll at once', async () => {
  const type = uniq('idle');
  await kvq.putType(type, { timeout: 30 });
  const w = new Worker({ client: new Client({ url: server.url }), handlers: { [type]: () => null },
    pollTimeout: 30, handleSignals: false, log: memoryLog().log });
  const running = w.run();
  await new Promise((r) => setTimeout(r, 300)); // registered and polling
  const t0 = Date.now();
  await w.stop();
  await running;
  assert.ok(Date.now() - t0 < 3000, `stopped in ${Date.now() - t0} ms`);
  await kvq.add(type, 'after');
  assert.deepEqual((await kvq.accept(type, { timeout: 1 })).map((j) => j.id), ['after'], 'the cut accept took no job');
});

test('a handler can ask which attempt it is, on a server and inline', async () => {
  const type = uniq('att');
  await kvq.putType(type, { timeout: 30, maxAttempts: 5 });
  const seen: number[] = [];
  const handler = async (_job: AcceptedJob, ctx: { attempt(): Promise<number> }) => {
    const n = await ctx.attempt();
    seen.push(n);
    if (n < 3) throw Object.assign(new Error('not yet'), { retryIn: 0 });
    return n;
  };
  const w = new Worker({ client: new Client({ url: server.url }), handlers: { [type]: handler },
    pollTimeout: 0.5, handleSignals: false, log: memoryLog().log });
  const running = w.run();
  await kvq.add(type, 'j', {});
  assert.equal(await kvq.result(type, 'j'), 3);
  await w.stop();
  await running;
  const inline = await InlineClient.start({ kvqBin: KVQ_BIN, handlers: { t: handler }, types: { t: { timeout: 30, maxAttempts: 5 } } });
  try {
    await inline.add('t', 'j', {});
    assert.equal(await inline.result('t', 'j'), 3);
  } finally {
    await inline.close();
  }
  assert.deepEqual(seen, [1, 2, 3, 1, 2, 3]);
});
