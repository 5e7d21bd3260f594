// SPDX-License-Identifier: Apache-2.0
// Schedules, pause / resume, a type's flow-control settings and groups, against a real `kvq
// serve`. The 'groups' tests need a server with groups (the group field of add,
// max_running_per_group, GET /v1/types/{type}/groups); against one without, they fail.

import assert from 'node:assert/strict';
import { after, before, describe, test } from 'node:test';

import { Client, KvqError } from '../src/index';
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

async function newType(settings = {}): Promise<string> {
  const type = uniq('f');
  await kvq.putType(type, { timeout: 30, ...settings });
  return type;
}

function isCode(code: string) {
  return (e: unknown) => e instanceof KvqError && e.code === code;
}

describe('type settings', () => {
  test('maxRunning and rate are set, read and cleared', async () => {
    const type = await newType();
    const t = await kvq.putType(type, { maxRunning: 3, rate: { limit: 10, periodMs: 1000 } });
    assert.equal(t.max_running, 3);
    assert.deepEqual(t.rate, { limit: 10, period_ms: 1000 });
    assert.equal(t.paused, false);
    assert.equal(t.paused_until, null);
    assert.deepEqual(await kvq.getType(type), t);
    assert.equal((await kvq.putType(type, { maxAttempts: 4 })).max_running, 3, 'absent: left as it is');
    const cleared = await kvq.putType(type, { maxRunning: null, rate: null });
    assert.equal(cleared.max_running, null);
    assert.equal(cleared.rate, null);
    await assert.rejects(kvq.putType(type, { maxRunning: 0 }), isCode('invalid_argument'));
    await assert.rejects(kvq.putType(type, { rate: { limit: 5000, periodMs: 1000 } }), isCode('invalid_argument'));
  });

  test('maxRunning caps accepts', async () => {
    const type = await newType({ maxRunning: 1 });
    await kvq.addMany(type, [{ id: 'a' }, { id: 'b' }]);
    const [first, ...rest] = await kvq.accept(type, { count: 5 });
    assert.equal(rest.length, 0);
    assert.deepEqual(await kvq.accept(type, { count: 5 }), []);
    await kvq.finish(first!);
    assert.equal((await kvq.accept(type, { count: 5 })).length, 1);
  });
});

describe('pause and resume', () => {
  test('a paused type hands out nothing until resumed', async () => {
    const type = await newType();
    await kvq.add(type, 'j');
    const paused = await kvq.pauseType(type);
    assert.equal(paused.paused, true);
    assert.equal(paused.paused_until, null);
    assert.deepEqual(await kvq.accept(type, { timeout: 0.2 }), []);
    assert.equal((await kvq.resumeType(type)).paused, false);
    assert.deepEqual((await kvq.accept(type)).map((j) => j.id), ['j']);
  });

  test('a pause for a while ends by itself', async () => {
    const type = await newType();
    const before = Date.now();
    const paused = await kvq.pauseType(type, { forMs: 300 });
    assert.equal(paused.paused, true);
    assert.ok(paused.paused_until! >= before + 300 - 1000, 'paused_until by the server clock');
    await kvq.add(type, 'j');
    assert.deepEqual((await kvq.accept(type, { timeout: 5 })).map((j) => j.id), ['j']);
    await assert.rejects(kvq.pauseType(uniq('missing')), isCode('not_found'));
    await assert.rejects(kvq.resumeType(uniq('missing')), isCode('not_found'));
    await assert.rejects(kvq.pauseType(type, { forMs: 0 }), isCode('invalid_argument'));
  });
});

describe('schedules', () => {
  test('putSchedule, getSchedule, listSchedules, deleteSchedule', async () => {
    const type = await newType();
    const name = uniq('sch');
    const s = await kvq.putSchedule(name, { type, cron: '0 3 * * *', timezone: 'Europe/Paris', data: { kind: 'daily' }, priority: 2, catchUp: 'none' });
    assert.deepEqual(
      [s.name, s.type, s.cron, s.timezone, s.data, s.priority, s.catch_up, s.enqueued, s.skipped, s.last_run],
      [name, type, '0 3 * * *', 'Europe/Paris', { kind: 'daily' }, 2, 'none', 0, 0, null],
    );
    assert.equal(s.next_runs!.length, 5);
    assert.ok(s.next_run! > Date.now());
    assert.deepEqual((await kvq.getSchedule(name)).next_runs, s.next_runs);
    const listed = (await kvq.listSchedules()).filter((x) => x.name === name);
    assert.equal(listed.length, 1);
    assert.equal(listed[0]!.next_runs, undefined);
    const replaced = await kvq.putSchedule(name, { type, cron: '@hourly' });
    assert.deepEqual([replaced.cron, replaced.timezone, replaced.catch_up], ['@hourly', 'UTC', 'one']);
    await kvq.deleteSchedule(name);
    await assert.rejects(kvq.getSchedule(name), isCode('not_found'));
    await assert.rejects(kvq.deleteSchedule(name), isCode('not_found'));
    await assert.rejects(kvq.putSchedule(uniq('bad'), { type, cron: 'not a cron' }), isCode('invalid_argument'));
    await assert.rejects(kvq.putSchedule(uniq('bad'), { type: uniq('missing'), cron: '@daily' }), isCode('not_found'));
  });

  test('a schedule enqueues NAME@TIME jobs', async () => {
    const type = await newType();
    const name = uniq('every');
    await kvq.putSchedule(name, { type, cron: '* * * * * *', data: { n: 1 } });
    try {
      const jobs = await until(async () => {
        const page = await kvq.list(type);
        return page.jobs.length ? page.jobs : null;
      }, 10000, 'an enqueued job');
      assert.ok(jobs);
      assert.ok(jobs[0]!.id.startsWith(`${name}@`), jobs[0]!.id);
      assert.deepEqual(jobs[0]!.data, { n: 1 });
    } finally {
      await kvq.deleteSchedule(name);
    }
  });
});

describe('groups', () => {
  test('add and addMany with a group; the job carries it', async () => {
    const type = await newType();
    await kvq.add(type, 'a', {}, { group: 'tenant-42' });
    await kvq.add(type, 'none');
    assert.equal((await kvq.addMany(type, [{ id: 'b', group: 'tenant-7' }, { id: 'c' }])).added, 2);
    assert.equal((await kvq.get(type, 'a')).group, 'tenant-42');
    assert.equal((await kvq.get(type, 'b')).group, 'tenant-7');
    assert.equal((await kvq.get(type, 'none')).group ?? null, null);
    await assert.rejects(kvq.add(type, 'bad', {}, { group: 'x'.repeat(129) }), isCode('invalid_argument'));
  });

  test('maxRunningPerGroup caps each group; groups() lists them', async () => {
    const type = await newType({ maxRunningPerGroup: 1 });
    assert.equal((await kvq.getType(type)).max_running_per_group, 1);
    await kvq.addMany(type, [{ id: 'a0', group: 'A' }, { id: 'a1', group: 'A' }, { id: 'b0', group: 'B' }]);
    const taken = await kvq.accept(type, { count: 10 });
    assert.deepEqual(taken.map((j) => j.id).sort(), ['a0', 'b0']);
    assert.deepEqual(await kvq.accept(type), []);
    const page = await kvq.groups(type);
    assert.deepEqual(page.groups.map((g) => [g.group, g.running, g.pending, g.full]), [['A', 1, 1, true], ['B', 1, 0, true]]);
    assert.equal(page.nextAfter, '');
    const first = await kvq.groups(type, { limit: 1 });
    assert.deepEqual([first.groups.map((g) => g.group), first.nextAfter], [['A'], 'A']);
    const all = [];
    for await (const g of kvq.listAllGroups(type, { limit: 1 })) all.push(g.group);
    assert.deepEqual(all, ['A', 'B']);
    await kvq.finish(taken.find((j) => j.id === 'a0')!);
    assert.deepEqual((await kvq.accept(type)).map((j) => j.id), ['a1']);
    assert.equal((await kvq.putType(type, { maxRunningPerGroup: null })).max_running_per_group, null);
    await assert.rejects(kvq.groups(uniq('missing')), isCode('not_found'));
  });

  test('groups take turns', async () => {
    const type = await newType();
    await kvq.addMany(type, [{ id: 'a0', group: 'A' }, { id: 'a1', group: 'A' }, { id: 'a2', group: 'A' }, { id: 'b0', group: 'B' }]);
    const taken = await kvq.accept(type, { count: 2 });
    assert.deepEqual(taken.map((j) => j.id).sort(), ['a0', 'b0'], 'one of each group');
  });
});
