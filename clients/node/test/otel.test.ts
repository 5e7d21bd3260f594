// SPDX-License-Identifier: Apache-2.0
// Traces across the hop. A job's traceparent from its add to its handler, against a real kvq
// serve; and the OpenTelemetry path, in a child process whose NODE_PATH finds a small fake of
// @opentelemetry/api (fixtures/otel-path): the API is not installed here, and the test must
// read back what kvq asked of it, which a real SDK would only give through an exporter.

import assert from 'node:assert/strict';
import { execFile } from 'node:child_process';
import { join } from 'node:path';
import { after, before, test } from 'node:test';

import { Client, InlineClient, KvqError, type AcceptedJob } from '../src/index';
import { KVQ_BIN } from './support';

const PARENT = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01';
const AMBIENT = '00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01';

let kvq: InlineClient;
const seen: Record<string, string | undefined> = {};

before(async () => {
  kvq = await InlineClient.start({
    kvqBin: KVQ_BIN,
    handlers: { t: (job: AcceptedJob) => void (seen[job.id] = job.traceparent) },
  });
});
after(async () => {
  await kvq.close();
});

function recordingClient(url: string): { client: Client; headers: (string | null)[] } {
  const headers: (string | null)[] = [];
  const client = new Client({
    url,
    fetch: (input, init) => {
      headers.push(new Headers(init?.headers).get('traceparent'));
      return fetch(input, init);
    },
  });
  return { client, headers };
}

test('without @opentelemetry/api (this environment) an add sends no trace header and the worker runs', async () => {
  assert.throws(() => require.resolve('@opentelemetry/api'), /Cannot find module/, 'this test is of an environment without the API');
  const { client, headers } = recordingClient(kvq.url);
  await client.add('t', 'plain-a');
  await client.addMany('t', [{ id: 'plain-b' }]);
  assert.deepEqual(headers, [null, null]);
  assert.equal(await kvq.drain(), 2);
  assert.deepEqual([seen['plain-a'], seen['plain-b']], [undefined, undefined]);
});

test('an explicit traceparent round-trips through the server to the handler', async () => {
  await kvq.add('t', 'tp-a', {}, { traceparent: PARENT });
  await kvq.addMany('t', [{ id: 'tp-b', traceparent: AMBIENT }, { id: 'tp-none' }]);
  assert.equal((await kvq.get('t', 'tp-a')).traceparent, PARENT);
  assert.equal((await kvq.get('t', 'tp-none')).traceparent, undefined);
  await kvq.drain();
  assert.deepEqual([seen['tp-a'], seen['tp-b'], seen['tp-none']], [PARENT, AMBIENT, undefined]);
});

test('an invalid traceparent is refused', async () => {
  await assert.rejects(kvq.add('t', 'bad-tp', {}, { traceparent: '00-not-a-trace-01' }),
    (e: unknown) => e instanceof KvqError && e.status === 400 && e.code === 'invalid_argument');
  await assert.rejects(kvq.get('t', 'bad-tp'), (e: unknown) => e instanceof KvqError && e.code === 'not_found');
});

interface ChildAnswer {
  headers: (string | null)[];
  runs: number;
  spans: { name: string; kind: number; parent?: string; traceparent: string; attributes: Record<string, string>; status?: { code: number; message: string }; exceptions: string[] }[];
  inHandler: Record<string, string | undefined>;
  stored: string | null;
}

test('with @opentelemetry/api: adds carry the active span, handlers run in consumer spans with their outcome', async () => {
  const out = await new Promise<string>((resolve, reject) => {
    execFile(process.execPath, [join(__dirname, 'fixtures', 'otel-child.js')], {
      env: { ...process.env, KVQ_BIN, AMBIENT, NODE_PATH: join(__dirname, '..', '..', 'test', 'fixtures', 'otel-path') },
      timeout: 60000,
    }, (err, stdout, stderr) => (err ? reject(new Error(`${err.message}\n${stderr}`)) : resolve(stdout)));
  });
  const answer = JSON.parse(out) as ChildAnswer;
  assert.deepEqual(answer.headers, [AMBIENT, AMBIENT, null], 'add and addMany in the span send it; a get does not');
  assert.equal(answer.runs, 2);
  const byId = Object.fromEntries(answer.spans.map((s) => [s.attributes['messaging.message.id'], s]));
  const ok = byId.ok!;
  const bad = byId.bad!;
  assert.equal(ok.name, 't process');
  assert.equal(ok.kind, 4, 'a consumer span');
  assert.deepEqual(ok.attributes, {
    'messaging.system': 'kvq',
    'messaging.operation': 'process',
    'messaging.destination.name': 't',
    'messaging.message.id': 'ok',
    'kvq.outcome': 'succeeded',
  });
  assert.equal(ok.status, undefined);
  assert.equal(bad.attributes['kvq.outcome'], 'failed');
  assert.deepEqual(bad.status, { code: 2, message: 'bad input' });
  assert.deepEqual(bad.exceptions, ['bad input']);
  assert.equal(answer.inHandler.ok, ok.traceparent, 'the span is active in its handler');
  // The server kept the add's header, so the span continues the application's trace.
  assert.equal(answer.stored, AMBIENT);
  assert.equal(ok.parent, AMBIENT);
  assert.equal(ok.traceparent.split('-')[1], AMBIENT.split('-')[1]);
});
