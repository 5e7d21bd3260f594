// SPDX-License-Identifier: Apache-2.0
// Finish with next, acceptAny over several types, an add's own timeout and bytes bodies, and
// the Worker's one request per job, against a real `kvq serve`.

import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { Client, KvqError, Worker, jobBytes } from '../src/index';
import { KvqServer, memoryLog, uniq, until } from './support';

let server: KvqServer;
let kvq: Client;

before(async () => {
  server = await KvqServer.start();
  kvq = new Client({ url: server.url });
});
after(async () => {
  await server.stop();
});

async function newType(): Promise<string> {
  const type = uniq('n');
  await kvq.putType(type, { timeout: 30 });
  return type;
}

test('finish with next returns the next job, recorded on its worker, then null', async () => {
  const type = await newType();
  await kvq.add(type, 'a', { n: 1 });
  await kvq.add(type, 'b', { n: 2 });
  const [first] = await kvq.accept(type, { worker: 'w1' });
  const next = await kvq.finish(first!, { ok: true }, { next: { worker: 'w2' } });
  assert.ok(next);
  assert.notEqual(next.id, first!.id);
  assert.equal(next.data_format, 'json');
  assert.equal((await kvq.get(type, first!.id)).outcome, 'succeeded');
  assert.equal((await kvq.get(type, next.id)).worker, 'w2');
  assert.equal(await kvq.finish(next, null, { next: {} }), null);
  assert.equal(await kvq.finish({ ...next, lock: next.lock }, null), null); // a repeat, no next
});

test('a fenced finish with next is halted and takes nothing', async () => {
  const type = await newType();
  await kvq.add(type, 'a');
  const [job] = await kvq.accept(type);
  await kvq.cancel(type, 'a');
  await kvq.add(type, 'b');
  await assert.rejects(kvq.finish(job!, null, { next: {} }), (e: unknown) => e instanceof KvqError && e.halted);
  assert.equal((await kvq.get(type, 'b')).state, 'pending');
});

test('acceptAny takes the best priority across types', async () => {
  const t1 = await newType();
  const t2 = await newType();
  await kvq.add(t1, 'low', {}, { priority: 9 });
  await kvq.add(t2, 'high', {}, { priority: 1 });
  const [job] = await kvq.acceptAny([t1, t2]);
  assert.deepEqual([job!.type, job!.id], [t2, 'high']);
  const [again] = await kvq.acceptAny([t1, t2], { timeout: 0.1 });
  assert.equal(again!.id, 'low');
  await assert.rejects(kvq.acceptAny([]), (e: unknown) => e instanceof KvqError && e.code === 'invalid_argument');
});

test('bytes bodies round-trip, and a job shows its own timeout', async () => {
  const type = await newType();
  const raw = new Uint8Array([0, 255, 98, 1]);
  await kvq.add(type, 'bin', undefined, { body: raw, jobTimeout: 20 });
  const job = await kvq.get(type, 'bin');
  assert.deepEqual([job.data, job.data_format, job.timeout], [null, 'bytes', 20]);
  assert.deepEqual(jobBytes(job), raw);
  const [taken] = await kvq.accept(type);
  assert.deepEqual(jobBytes(taken!), raw);
  await assert.rejects(kvq.add(type, 'x', {}, { jobTimeout: 0 }), (e: unknown) => e instanceof KvqError && /timeout/.test(e.message));
});

test('a busy worker spends one request per job', async () => {
  const type = await newType();
  await kvq.addMany(type, Array.from({ length: 30 }, (_, i) => ({ id: `j${i}`, data: { i } })));
  const accepts = async () => {
    const text = await (await fetch(`${server.url}/metrics`)).text();
    return text
      .split('\n')
      .filter((l) => l.startsWith('kvq_http_requests_total{route="/v1/accept/{type}"'))
      .reduce((n, l) => n + Number(l.slice(l.lastIndexOf(' ') + 1)), 0);
  };
  const before = await accepts();
  let ran = 0;
  const mem = memoryLog();
  const w = new Worker({
    client: new Client({ url: server.url }),
    handlers: { [type]: async () => ++ran },
    pollTimeout: 0.5,
    handleSignals: false,
    register: false,
    log: mem.log,
  });
  const running = w.run();
  try {
    await until(async () => (await kvq.list(type, { state: 'succeeded', limit: 100 })).jobs.length === 30, 20000, 'every job to finish');
  } finally {
    await w.stop();
    await running;
  }
  assert.equal(ran, 30);
  const used = (await accepts()) - before;
  assert.ok(used < 8, `the worker accepted ${used} times for 30 jobs`);
});
