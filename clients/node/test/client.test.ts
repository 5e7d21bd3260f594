// SPDX-License-Identifier: Apache-2.0
// The Client against a real `kvq serve`: every call, its answers and its errors.

import assert from 'node:assert/strict';
import { connect, type Socket } from 'node:net';
import { after, before, describe, test } from 'node:test';

import { Client, JobFailedError, KvqError, type JobEvent } from '../src/index';
import { KvqServer, freePort, uniq, until } from './support';

let server: KvqServer;
let kvq: Client;

before(async () => {
  server = await KvqServer.start();
  kvq = new Client({ url: server.url });
});
after(async () => {
  await server.stop();
});

async function newType(settings = {}): Promise<string> {
  const type = uniq('c');
  await kvq.putType(type, { timeout: 30, ...settings });
  return type;
}

describe('types', () => {
  test('putType creates and changes a type; getType and listTypes show it', async () => {
    const type = uniq('c');
    const made = await kvq.putType(type, { timeout: 12, maxAttempts: 4, backoff: { base: 0.5 } });
    assert.equal(made.type, type);
    assert.equal(made.timeout, 12);
    assert.equal(made.max_attempts, 4);
    assert.equal(made.backoff.base, 0.5);
    const changed = await kvq.putType(type, { maxAttempts: 7 });
    assert.equal(changed.timeout, 12, 'absent settings are left as they are');
    assert.equal(changed.max_attempts, 7);
    assert.deepEqual(await kvq.getType(type), changed);
    assert.ok((await kvq.listTypes()).some((t) => t.type === type));
    await kvq.deleteType(type);
    await assert.rejects(kvq.getType(type), (e: unknown) => e instanceof KvqError && e.status === 404 && e.code === 'not_found');
  });

  test('a bad setting is a KvqError invalid_argument with the server message', async () => {
    const err = await kvq.putType(uniq('c'), { timeout: 1, maxAttempts: 0 }).catch((e: unknown) => e);
    assert.ok(err instanceof KvqError, String(err));
    assert.equal(err.status, 400);
    assert.equal(err.code, 'invalid_argument');
    assert.match(err.message, /max_attempts/);
    assert.equal(err.retryable, false);
  });
});

describe('jobs', () => {
  test('add, get, and ifExists keep leaves an existing job alone', async () => {
    const type = await newType();
    assert.deepEqual(await kvq.add(type, 'j1', { n: 1 }, { priority: 3 }), { id: 'j1', added: true });
    assert.deepEqual(await kvq.add(type, 'j1', { n: 2 }, { ifExists: 'keep' }), { id: 'j1', added: false });
    const job = await kvq.get(type, 'j1');
    assert.equal(job.state, 'pending');
    assert.deepEqual(job.data, { n: 1 });
    assert.equal(job.priority, 3);
    await kvq.add(type, 'j1', { n: 3 });
    assert.deepEqual((await kvq.get(type, 'j1')).data, { n: 3 }, 'update (the default) replaces it');
  });

  test('a job scheduled in the future is pending, not due', async () => {
    const type = await newType();
    await kvq.add(type, 'later', {}, { scheduledTime: new Date(Date.now() + 3600_000) });
    assert.equal((await kvq.list(type, { state: 'scheduled' })).jobs.length, 1);
    assert.equal((await kvq.list(type, { state: 'due' })).jobs.length, 0);
    assert.equal(await kvq.pendingCount(type), 0);
  });

  test('addMany adds in one batch and reports what keep left', async () => {
    const type = await newType();
    await kvq.add(type, 'b', { old: true });
    const r = await kvq.addMany(type, [{ id: 'a' }, { id: 'b', data: { old: false } }, { id: 'c', data: { x: 1 } }], { ifExists: 'keep' });
    assert.deepEqual(r, { added: 2, kept: ['b'] });
    assert.deepEqual((await kvq.get(type, 'b')).data, { old: true });
    assert.deepEqual((await kvq.get(type, 'c')).data, { x: 1 });
  });

  test('list filters by state and pages with a cursor; listAll walks every page', async () => {
    const type = await newType();
    await kvq.addMany(type, ['j1', 'j2', 'j3', 'j4', 'j5'].map((id) => ({ id })));
    const [taken] = await kvq.accept(type, { count: 1 });
    assert.ok(taken);
    const first = await kvq.list(type, { state: 'pending', limit: 2 });
    assert.equal(first.jobs.length, 2);
    assert.notEqual(first.nextCursor, '');
    const second = await kvq.list(type, { state: 'pending', limit: 2, cursor: first.nextCursor });
    assert.equal(second.jobs.length, 2);
    assert.ok(second.jobs[0]!.id > first.jobs[1]!.id, 'pages go on in id order');
    const running = await kvq.list(type, { state: 'running' });
    assert.deepEqual(running.jobs.map((j) => j.id), [taken.id]);
    const all: string[] = [];
    for await (const j of kvq.listAll(type, { state: 'pending', limit: 1 })) all.push(j.id);
    assert.equal(all.length, 4);
    assert.ok(!all.includes(taken.id));
    await assert.rejects(kvq.list(type, { state: 'bogus' as never }), (e: unknown) => e instanceof KvqError && e.code === 'invalid_argument');
  });

  test('get of a missing job, and add to a type without a timeout, are named errors', async () => {
    const type = await newType();
    await assert.rejects(kvq.get(type, 'nope'), (e: unknown) => e instanceof KvqError && e.status === 404 && e.code === 'not_found');
    await assert.rejects(kvq.add(uniq('none'), 'j'), (e: unknown) => e instanceof KvqError && e.status === 409 && e.code === 'no_timeout');
  });

  test('remove, cancel and rerun', async () => {
    const type = await newType();
    await kvq.add(type, 'r');
    await kvq.remove(type, 'r');
    await assert.rejects(kvq.get(type, 'r'), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
    await kvq.add(type, 'c', { k: 1 });
    const cancelled = await kvq.cancel(type, 'c');
    assert.equal(cancelled.state, 'finished');
    assert.equal(cancelled.outcome, 'cancelled');
    await assert.rejects(kvq.cancel(type, 'c'), (e: unknown) => e instanceof KvqError && e.status === 409 && e.code === 'wrong_state');
    const again = await kvq.rerun(type, 'c');
    assert.equal(again.state, 'pending');
    assert.deepEqual(again.data, { k: 1 });
    await assert.rejects(kvq.rerun(type, 'c'), (e: unknown) => e instanceof KvqError && e.code === 'wrong_state');
  });
});

describe('worker calls', () => {
  test('accept, update with progress, finish; a stale lock is fenced (409 halted)', async () => {
    const type = await newType();
    await kvq.addMany(type, [{ id: 'a' }, { id: 'b' }]);
    const jobs = await kvq.accept(type, { count: 5, timeout: 1 });
    assert.equal(jobs.length, 2, 'one accept takes up to count jobs');
    const job = jobs[0]!;
    assert.deepEqual(await kvq.update(job, { progress: { step: 1 } }), { resubmitted: false });
    assert.deepEqual((await kvq.get(type, job.id)).progress, { step: 1 });
    await kvq.finish(job, { ok: 1 });
    const done = await kvq.get(type, job.id);
    assert.equal(done.outcome, 'succeeded');
    assert.deepEqual(done.result, { ok: 1 });
    const err = await kvq.update(job).catch((e: unknown) => e);
    assert.ok(err instanceof KvqError && err.halted, String(err));
    assert.deepEqual(await kvq.accept(type, { timeout: 0 }), [], 'none left: an empty answer (204)');
  });

  test('fail records the error and applies the policy; snooze does not count the attempt', async () => {
    const type = await newType({ maxAttempts: 2, backoff: { base: 0.01, cap: 0.02 } });
    await kvq.add(type, 'f');
    let [job] = await kvq.accept(type, { timeout: 1 });
    await kvq.snooze(job!);
    assert.equal((await kvq.get(type, 'f')).attempts, 0);
    [job] = await kvq.accept(type, { timeout: 1 });
    const first = await kvq.fail(job!, { message: 'db down', kind: 'DbError', details: { code: 57 } });
    assert.equal(first.dead, false);
    assert.equal(first.attempt, 1);
    [job] = await kvq.accept(type, { timeout: 5 });
    const second = await kvq.fail(job!, { message: 'still down' });
    assert.equal(second.dead, true);
    const j = await kvq.get(type, 'f');
    assert.equal(j.outcome, 'dead');
    assert.deepEqual(j.errors.map((e) => [e.kind, e.message]), [['DbError', 'db down'], ['error', 'still down']]);
  });

  test('worker membership: register, heartbeat, list, deregister', async () => {
    const wtype = uniq('wt');
    const { token } = await kvq.registerWorker(wtype, 'w1', { healthTimeout: 5, info: { v: 1 } });
    await kvq.heartbeatWorker(wtype, 'w1', token);
    assert.deepEqual((await kvq.listWorkers(wtype)).workers.map((w) => w.id), ['w1']);
    await assert.rejects(kvq.heartbeatWorker(wtype, 'w1', '0'.repeat(32)), (e: unknown) => e instanceof KvqError && e.status === 403);
    await kvq.deregisterWorker(wtype, 'w1', token);
    assert.deepEqual((await kvq.listWorkers(wtype)).workers, []);
  });
});

describe('watching', () => {
  test('wait answers at the state, or null when its timeout passes', async () => {
    const type = await newType();
    await kvq.add(type, 'w');
    assert.equal(await kvq.wait(type, 'w', { state: 'running', timeout: 0.2 }), null);
    const waiting = kvq.wait(type, 'w', { state: 'running', timeout: 10 });
    await kvq.accept(type, { timeout: 1 });
    const ev = await waiting;
    assert.equal(ev?.found, true);
    assert.equal(ev?.state, 'running');
  });

  test('events iterates the job through its states and ends after finished', async () => {
    const type = await newType();
    await kvq.add(type, 'e', { in: 1 });
    const seen: JobEvent[] = [];
    const following = (async () => {
      for await (const ev of kvq.events(type, 'e')) seen.push(ev);
    })();
    const [job] = await kvq.accept(type, { timeout: 5 });
    await kvq.wait(type, 'e', { state: 'running', timeout: 5 });
    await new Promise((r) => setTimeout(r, 200));
    await kvq.finish(job!, { out: 2 });
    await following;
    assert.ok(['pending', 'running'].includes(seen[0]!.state!), 'the first event is the state when asked');
    const last = seen[seen.length - 1]!;
    assert.equal(last.state, 'finished');
    assert.equal(last.outcome, 'succeeded');
    assert.deepEqual(last.result, { out: 2 });
    assert.ok(seen.some((e) => e.state === 'running'), JSON.stringify(seen));
  });

  test('events of a missing job is not_found', async () => {
    const type = await newType();
    const it = kvq.events(type, 'ghost');
    await assert.rejects(it.next(), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
  });

  test('an AbortSignal stops a long poll and an event stream at once', async () => {
    const type = await newType();
    await kvq.add(type, 'a');
    const t0 = Date.now();
    await assert.rejects(kvq.wait(type, 'a', { timeout: 30, signal: AbortSignal.timeout(200) }), (e: unknown) => e instanceof Error && /TimeoutError|AbortError/.test(e.name));
    const controller = new AbortController();
    setTimeout(() => controller.abort(new Error('enough')), 200);
    await assert.rejects(
      (async () => {
        for await (const _ of kvq.events(type, 'a', { signal: controller.signal })) void _;
      })(),
      /enough/,
    );
    assert.ok(Date.now() - t0 < 5000, 'both stopped early');
  });

  test('result resolves with a succeeded job result', async () => {
    const type = await newType();
    await kvq.add(type, 'ok');
    const r = kvq.result(type, 'ok');
    const [job] = await kvq.accept(type, { timeout: 5 });
    await kvq.finish(job!, { rows: 12 });
    assert.deepEqual(await r, { rows: 12 });
    assert.deepEqual(await kvq.result(type, 'ok'), { rows: 12 }, 'and at once for a finished job');
  });

  test('result rejects with the last error of a dead job, and for a cancelled one', async () => {
    const type = await newType({ maxAttempts: 1 });
    await kvq.add(type, 'bad');
    const r = kvq.result(type, 'bad');
    const [job] = await kvq.accept(type, { timeout: 5 });
    await kvq.fail(job!, { message: 'no such user', kind: 'LookupError', details: { user: 7 } });
    const err = await r.catch((e: unknown) => e);
    assert.ok(err instanceof JobFailedError, String(err));
    assert.equal(err.outcome, 'dead');
    assert.equal(err.message, 'no such user');
    assert.equal(err.kind, 'LookupError');
    assert.deepEqual(err.details, { user: 7 });
    await kvq.add(type, 'cx');
    await kvq.cancel(type, 'cx');
    await assert.rejects(kvq.result(type, 'cx'), (e: unknown) => e instanceof JobFailedError && e.outcome === 'cancelled');
  });
});

describe('retries', () => {
  test('a server that cannot be reached is a KvqError network after the retries', async () => {
    const port = await freePort();
    const c = new Client({ url: `http://127.0.0.1:${port}`, retry: { attempts: 3, baseMs: 10 } });
    const err = await c.health().catch((e: unknown) => e);
    assert.ok(err instanceof KvqError, String(err));
    assert.equal(err.status, 0);
    assert.equal(err.code, 'network');
    assert.equal(err.retryable, true);
  });

  test('network errors are retried until the server comes up', async () => {
    const port = await freePort();
    const c = new Client({ url: `http://127.0.0.1:${port}`, retry: { attempts: Infinity, baseMs: 50, capMs: 200 } });
    const asking = c.health();
    await new Promise((r) => setTimeout(r, 500));
    const late = await KvqServer.start({ port });
    try {
      assert.equal((await asking).status, 'ok');
    } finally {
      await late.stop();
    }
  });

  test('a 503 answer is retried with backoff until the server takes the call', async () => {
    // A server whose request-body budget one held-open request fills: every other request
    // with a body is answered 503 until that one is done.
    const busy = await KvqServer.start({ args: ['--max-body-memory', '4096', '--max-body', '4096'] });
    try {
      const c = new Client({ url: busy.url, retry: { attempts: 1 } });
      const type = uniq('busy');
      await c.putType(type, { timeout: 5 });
      const port = Number(new URL(busy.url).port);
      // The hog's head reserves its body's bytes, once nothing else holds any: a probe sent
      // before the server read that head would take budget first and get the hog refused, so
      // the hog goes first, alone, and is sent again until no answer shows it was taken.
      let hog: Socket | undefined;
      for (const deadline = Date.now() + 10_000; !hog; ) {
        const conn = connect(port, '127.0.0.1');
        await new Promise((r) => conn.once('connect', r));
        conn.write(`PUT /v1/types/${type} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4090\r\n\r\n{`);
        const answered = await new Promise<boolean>((r) => {
          conn.once('data', () => r(true));
          setTimeout(() => r(false), 200);
        });
        if (!answered) hog = conn;
        else conn.destroy();
        assert.ok(hog || Date.now() < deadline, 'the server kept refusing the request meant to fill its body budget');
      }
      const refused = await until(
        () => c.add(type, 'j').then(() => null, (e: unknown) => e),
        3000,
        'a 503 while the budget is held',
      );
      assert.ok(refused instanceof KvqError && refused.status === 503 && refused.retryable, String(refused));
      const retrying = new Client({ url: busy.url, retry: { attempts: Infinity, baseMs: 50, capMs: 200 } });
      const adding = retrying.add(type, 'j', { n: 1 });
      await new Promise((r) => setTimeout(r, 400));
      hog.destroy(); // frees the budget
      assert.deepEqual(await adding, { id: 'j', added: true });
      assert.deepEqual((await c.get(type, 'j')).data, { n: 1 });
    } finally {
      await busy.stop();
    }
  });
});
