// SPDX-License-Identifier: Apache-2.0
// SIGTERM/SIGINT handling of the Worker, in a real child process.

import assert from 'node:assert/strict';
import { spawn, type ChildProcess } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Client } from '../src/index';
import { KvqServer, uniq, until } from './support';

let server: KvqServer;
let kvq: Client;

before(async () => {
  server = await KvqServer.start();
  kvq = new Client({ url: server.url });
});
after(async () => {
  await server.stop();
});

interface Child {
  proc: ChildProcess;
  out: () => string;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
}

function startChild(env: Record<string, string>): Child {
  const proc = spawn(process.execPath, [join(__dirname, 'fixtures', 'child-worker.js')], {
    env: { ...process.env, KVQ_URL: server.url, ...env },
    stdio: ['ignore', 'pipe', 'pipe'],
  });
  let out = '';
  proc.stdout!.on('data', (c: Buffer) => (out += c.toString()));
  proc.stderr!.on('data', (c: Buffer) => (out += c.toString()));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((resolve) =>
    proc.once('exit', (code, signal) => resolve({ code, signal })),
  );
  return { proc, out: () => out, exited };
}

async function withDeadline<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let t: NodeJS.Timeout | undefined;
  const timeout = new Promise<never>((_, reject) => {
    t = setTimeout(() => reject(new Error(`${what} took over ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(t);
  }
}

test('SIGTERM hands running jobs back: pending again, no attempt counted, no lost run', async () => {
  const type = uniq('sig');
  const wtype = uniq('wt');
  await kvq.putType(type, { timeout: 10, maxLostRuns: 1 });
  await kvq.addMany(type, [{ id: 'a' }, { id: 'b' }, { id: 'c' }]);
  const child = startChild({ KVQ_TYPE: type, KVQ_MODE: 'ignore', KVQ_CONCURRENCY: '2', KVQ_GRACE: '1', KVQ_WORKER_TYPE: wtype });
  try {
    await until(() => (child.out().match(/started/g) ?? []).length === 2, 10000, 'two handlers to start');
    assert.equal((await kvq.listWorkers(wtype)).workers.length, 1, 'registered');
    child.proc.kill('SIGTERM');
    const { code } = await withDeadline(child.exited, 8000, 'draining');
    assert.equal(code, 0, child.out());
    assert.match(child.out(), /drained/);
    for (const id of ['a', 'b', 'c']) {
      const job = await kvq.get(type, id);
      assert.equal(job.state, 'pending', `${id}: ${JSON.stringify(job)}`);
      assert.equal(job.attempts, 0, `${id}: no attempt counted`);
      assert.equal(job.lost_runs, 0, `${id}: no lost run`);
      assert.deepEqual(job.errors, []);
    }
    assert.deepEqual((await kvq.listWorkers(wtype)).workers, [], 'unregistered');
  } finally {
    child.proc.kill('SIGKILL');
  }
});

test('after SIGTERM, a handler that ignores its signal does not keep the process alive', async () => {
  const type = uniq('sig');
  await kvq.putType(type, { timeout: 30 });
  await kvq.add(type, 'stuck');
  const child = startChild({ KVQ_TYPE: type, KVQ_MODE: 'ignore', KVQ_GRACE: '1', KVQ_EXIT: 'natural' });
  try {
    await until(() => child.out().includes('started stuck'), 10000, 'the handler to start');
    const t0 = Date.now();
    child.proc.kill('SIGTERM');
    const { code } = await withDeadline(child.exited, 8000, 'exiting (the handler sleeps 60 s)');
    assert.equal(code, 0, child.out());
    assert.ok(Date.now() - t0 < 8000);
    assert.match(child.out(), /drained/);
    const job = await kvq.get(type, 'stuck');
    assert.equal(job.state, 'pending', 'handed back');
  } finally {
    child.proc.kill('SIGKILL');
  }
});

test('SIGINT lets a handler that ends within the grace finish its job', async () => {
  const type = uniq('sig');
  await kvq.putType(type, { timeout: 10 });
  await kvq.add(type, 'q');
  const child = startChild({ KVQ_TYPE: type, KVQ_MODE: 'quick', KVQ_GRACE: '5' });
  try {
    await until(() => child.out().includes('started q'), 10000, 'the handler to start');
    child.proc.kill('SIGINT');
    const { code } = await withDeadline(child.exited, 8000, 'draining');
    assert.equal(code, 0, child.out());
    const job = await kvq.get(type, 'q');
    assert.equal(job.outcome, 'succeeded');
    assert.equal(job.result, 'finished');
  } finally {
    child.proc.kill('SIGKILL');
  }
});

test('a second signal exits at once', async () => {
  const type = uniq('sig');
  await kvq.putType(type, { timeout: 10 });
  await kvq.add(type, 'x');
  const child = startChild({ KVQ_TYPE: type, KVQ_MODE: 'ignore', KVQ_GRACE: '60' });
  try {
    await until(() => child.out().includes('started x'), 10000, 'the handler to start');
    const t0 = Date.now();
    child.proc.kill('SIGTERM');
    // A second signal only once the first was taken: sent sooner, both may read as one.
    await until(() => child.out().includes('SIGTERM: draining'), 5000, 'the first signal to be taken');
    child.proc.kill('SIGTERM');
    const { code } = await withDeadline(child.exited, 5000, 'exiting');
    assert.equal(code, 128 + 15, child.out());
    assert.ok(Date.now() - t0 < 5000, 'well before the 60 s grace');
    assert.doesNotMatch(child.out(), /drained/);
  } finally {
    child.proc.kill('SIGKILL');
  }
});
