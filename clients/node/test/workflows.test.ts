// SPDX-License-Identifier: Apache-2.0
// Workflows against a real `kvq serve`: dependsOn, dependencies(), batches and fanOut.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client, KvqError, type NewJob } from '../src/index';
import { KvqServer, uniq } from './support';

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
  const type = uniq('w');
  await kvq.putType(type, { timeout: 30 });
  return type;
}

async function finishOne(type: string, result: unknown = null): Promise<void> {
  const [job] = await kvq.accept(type);
  assert.ok(job, `a job of ${type}`);
  await kvq.finish(job, result);
}

const isCode = (status: number, code: string) => (e: unknown) => e instanceof KvqError && e.status === status && e.code === code;

describe('dependencies', () => {
  test('a job added with dependsOn waits, then is pending; dependencies() shows the result', async () => {
    const fetch = await newType();
    const report = await newType();
    await kvq.add(fetch, 'eu', { region: 'eu' });
    assert.deepEqual(await kvq.add(report, 'weekly', {}, { dependsOn: [{ type: fetch, id: 'eu' }] }), { id: 'weekly', added: true });
    const job = await kvq.get(report, 'weekly');
    assert.equal(job.state, 'waiting');
    assert.equal(job.dependencies, 1);
    assert.equal(job.waiting_on, 1);
    assert.deepEqual(await kvq.accept(report), []);
    const before = await kvq.dependencies(report, 'weekly');
    assert.equal(before.length, 1);
    assert.equal(before[0]!.resolved, null);

    await finishOne(fetch, { rows: 120 });
    assert.equal((await kvq.get(report, 'weekly')).state, 'pending');
    const [dep] = await kvq.dependencies(report, 'weekly');
    assert.equal(dep!.type, fetch);
    assert.equal(dep!.id, 'eu');
    assert.equal(dep!.resolved, 'succeeded');
    assert.deepEqual(dep!.job!.result, { rows: 120 });
    assert.deepEqual(await kvq.dependencies(fetch, 'eu'), []);
    await assert.rejects(kvq.dependencies(fetch, 'nope'), isCode(404, 'not_found'));
  });

  test('addMany takes dependsOn and onDependencyFailure per job', async () => {
    const type = await newType();
    const a = { type, id: 'a' };
    await kvq.addMany(type, [
      { id: 'a' },
      { id: 'b', dependsOn: [a] },
      { id: 'c', dependsOn: [a], onDependencyFailure: 'run' },
    ]);
    await kvq.cancel(type, 'a');
    const b = await kvq.get(type, 'b');
    assert.equal(b.outcome, 'cancelled');
    assert.equal(b.errors.at(-1)!.kind, 'dependency_failed');
    const c = await kvq.get(type, 'c');
    assert.equal(c.state, 'pending');
    assert.equal(c.on_dependency_failure, 'run');
    await assert.rejects(kvq.add(type, 'd', {}, { dependsOn: [{ type, id: 'nope' }] }), isCode(404, 'not_found'));
  });
});

describe('batches', () => {
  test('fanOut of 5 jobs fires the callback once, with batch.members 5', async () => {
    const work = await newType();
    const report = await newType();
    const id = uniq('batch');
    const jobs: NewJob[] = [0, 1, 2, 3, 4].map((n) => ({ id: `j${n}`, data: { n } }));
    const batch = await kvq.fanOut(id, work, jobs, { callback: { type: report, id: 'done', data: { to: 'ops' } } });
    assert.equal(batch.id, id);
    assert.equal(batch.state, 'sealed');
    assert.equal(batch.sealed, true);
    assert.equal(batch.counts.members, 5);
    assert.equal(jobs[0]!.batch, undefined, 'fanOut leaves the caller\'s jobs alone');
    assert.equal((await kvq.get(work, 'j0')).batch, id);
    for (let i = 0; i < 5; i++) {
      assert.equal((await kvq.counts(report)).pending, 0);
      await finishOne(work);
    }
    const got = await kvq.getBatch(id);
    assert.equal(got.state, 'fired');
    assert.equal(got.fired, true);
    assert.equal(got.counts.succeeded, 5);
    assert.equal(got.counts.unfinished, 0);
    assert.ok(got.settled_at !== null);
    const callbacks = [];
    for await (const j of kvq.listAll(report)) callbacks.push(j);
    assert.deepEqual(callbacks.map((j) => j.id), ['done']);
    const data = callbacks[0]!.data as { to: string; batch: { id: string; members: number; succeeded: number } };
    assert.equal(data.to, 'ops');
    assert.equal(data.batch.id, id);
    assert.equal(data.batch.members, 5);
    assert.equal(data.batch.succeeded, 5);
  });

  test('putBatch, sealBatch, getBatch and their errors; an add to a sealed batch is 409 wrong_state', async () => {
    const type = await newType();
    const report = await newType();
    const id = uniq('batch');
    const put = await kvq.putBatch(id, { type: report, id: 'r' }, { on: 'success' });
    assert.equal(put.state, 'open');
    assert.equal(put.on, 'success');
    assert.equal(put.sealed, false);
    assert.equal(put.settled_at, null);
    await kvq.add(type, 'm', {}, { batch: id });
    assert.equal((await kvq.getBatch(id)).counts.members, 1);
    assert.equal((await kvq.sealBatch(id)).state, 'sealed');
    await assert.rejects(kvq.add(type, 'late', {}, { batch: id }), isCode(409, 'wrong_state'));
    await assert.rejects(kvq.addMany(type, [{ id: 'late2', batch: id }]), isCode(409, 'wrong_state'));
    await assert.rejects(kvq.getBatch(uniq('missing')), isCode(404, 'not_found'));
    await assert.rejects(kvq.add(type, 'x', {}, { batch: uniq('missing') }), isCode(404, 'not_found'));
    await assert.rejects(
      kvq.putBatch(uniq('batch'), { type: report, id: 'r' }, { on: 'sometimes' as 'success' }),
      isCode(400, 'invalid_argument'),
    );
  });
});
