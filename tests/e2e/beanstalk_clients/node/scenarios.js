// The beanstalkd protocol scenarios, driven through npm's jackd (pinned in package.json) and its
// normal public API, against any server that speaks the protocol: the real beanstalkd (to prove
// the scenarios test the protocol) or `kvq serve --beanstalk-listen`. The same scenarios as
// ../scenarios.php (pheanstalk); tests/e2e/test_beanstalk_clients.py runs one per process.
//
// Usage: node scenarios.js HOST PORT SERVER SCENARIO TUBE
//   SERVER   beanstalkd or kvq: where kvq deliberately differs, the scenario checks kvq's
//            documented behaviour (docs/beanstalk.md) and says so
//   TUBE     a tube name no other scenario uses; a scenario may add suffixes to it
// Prints "ok SCENARIO" and exits 0, or prints what differed and exits 1.
//
// Two jackd 2.2.2 defects shape what runs through it (both reproduced against beanstalkd itself):
// put(Buffer) sends the Buffer's JSON form (its `typeof body === 'object'` test catches Buffers),
// so bodies go in as strings (UTF-8) and come back as Buffers; and pauseTube() writes its command
// without the closing CRLF, so it never completes: the pause is sent over a plain socket.
'use strict';

const net = require('net');
const path = require('path');
const Jackd = require(path.join(__dirname, 'node_modules', 'jackd'));

const [host, portText, server, scenario, tube] = process.argv.slice(2);
if (!tube || !['beanstalkd', 'kvq'].includes(server)) {
  console.error('usage: node scenarios.js HOST PORT beanstalkd|kvq SCENARIO TUBE');
  process.exit(2);
}
const port = Number(portText);

// -- checks -----------------------------------------------------------------------------------------
class ScenarioFailure extends Error {}

function fail(message) {
  throw new ScenarioFailure(message);
}

function show(value) {
  if (Buffer.isBuffer(value)) return `bytes ${value.toString('hex')}`;
  return JSON.stringify(value);
}

function expectEq(want, got, what) {
  const same = Buffer.isBuffer(want) && Buffer.isBuffer(got) ? want.equals(got)
                                                              : show(want) === show(got);
  if (!same) fail(`${what}: expected ${show(want)}, got ${show(got)}`);
}

function expectTrue(condition, what) {
  if (!condition) fail(`${what}: not so`);
}

// `call` must be refused with the named protocol reply (jackd rejects with an Error whose message
// starts with it, or, for a reply it does not expect, an InvalidResponseError carrying it).
async function expectReply(reply, call, what) {
  let result;
  try {
    result = await call();
  } catch (e) {
    if (!String(e.message).startsWith(reply) && e.response !== reply) fail(`${what}: expected ${reply}, got ${e.message}`);
    return;
  }
  fail(`${what}: expected ${reply}, got a normal answer ${show(result)}`);
}

function expectJob(job, want, what) {
  if (!job) fail(`${what}: expected job ${want.id}, got none`);
  expectEq(want.id, job.id, `${what} (id)`);
  expectEq(Buffer.from(want.body), job.payload, `${what} (body)`);
}

// -- helpers ----------------------------------------------------------------------------------------
let lastStep = 'none';

// A jackd client whose calls are remembered in lastStep, to name the call an error came from.
async function connect() {
  const client = new Jackd();
  await client.connect({ host, port });
  return new Proxy(client, {
    get(target, name) {
      const value = target[name];
      if (typeof value !== 'function') return value;
      return (...args) => {
        lastStep = `${String(name)}(${args.map((a) => show(a).slice(0, 40)).join(', ')})`;
        return value.apply(target, args);
      };
    },
  });
}

// A client that puts into and reserves from `name` only.
async function onTube(name) {
  const client = await connect();
  await client.use(name);
  await client.watch(name);
  await client.ignore('default');
  return client;
}

// beanstalkd 1.12 now and then never expires a reservation whose ttr has run out (its
// connection's timer is lost; the job stays reserved with a negative time-left until that
// connection sends something): seen in about 1 of 40 runs of this scenario with raw sockets too.
// Against beanstalkd only, the worker that holds the job sends a harmless command once the ttr
// is over, which puts its timer back; kvq gets no such help.
async function nudgeAfterTtr(client, reservedAt, ttr) {
  await sleep(Math.max(0, reservedAt + ttr + 0.2 - now()));
  await client.listTubesWatched();
}

// put that remembers the body, for expectJob.
async function put(client, body, options = {}) {
  return { id: await client.put(body, options), body };
}

// reserve-with-timeout, null on TIMED_OUT (jackd rejects it).
async function reserve(client, seconds) {
  try {
    return await client.reserveWithTimeout(seconds);
  } catch (e) {
    if (String(e.message).startsWith('TIMED_OUT')) return null;
    throw e;
  }
}

// peek-*, null on NOT_FOUND.
async function peekOrNull(call) {
  try {
    return await call();
  } catch (e) {
    if (String(e.message).startsWith('NOT_FOUND')) return null;
    throw e;
  }
}

// jackd hands YAML back as text: a dictionary's "key: value" lines, scalars unquoted.
function yamlDict(text) {
  const out = {};
  for (const line of text.split('\n')) {
    const m = /^(\S+):\s*(.*)$/.exec(line);
    if (m) out[m[1]] = m[2].replace(/^"(.*)"$/, '$1');
  }
  return out;
}

function yamlList(text) {
  return text.split('\n').filter((l) => l.startsWith('- ')).map((l) => l.slice(2).replace(/^"(.*)"$/, '$1'));
}

async function jobStats(client, job) {
  return yamlDict(await client.statsJob(job.id));
}

async function tubeStats(client, name) {
  return yamlDict(await client.statsTube(name));
}

function expectFields(want, stats, what) {
  for (const [name, value] of Object.entries(want)) {
    if (!(name in stats)) fail(`${what}: no field '${name}' in ${JSON.stringify(stats)}`);
    expectEq(String(value), stats[name], `${what} ${name}`);
  }
}

const now = () => performance.now() / 1000;
const sleep = (seconds) => new Promise((resolve) => setTimeout(resolve, seconds * 1000));

async function waitFor(predicate, seconds, what) {
  const deadline = now() + seconds;
  while (!(await predicate())) {
    if (now() > deadline) fail(`timed out after ${seconds}s waiting for ${what}`);
    await sleep(0.05);
  }
}

// One command over a plain socket, for what jackd cannot send (see the top of the file).
function rawCommand(line) {
  return new Promise((resolve, reject) => {
    const socket = net.connect(port, host, () => socket.write(`${line}\r\n`));
    let reply = '';
    socket.on('data', (chunk) => {
      reply += chunk.toString('latin1');
      if (reply.endsWith('\r\n')) {
        socket.end();
        resolve(reply.trim());
      }
    });
    socket.on('error', reject);
  });
}

async function closeAll(...clients) {
  for (const client of clients) await client.disconnect();
}

// -- the scenarios ----------------------------------------------------------------------------------
const scenarios = {};

scenarios.put_reserve_delete = async (name) => {
  const p = await onTube(name);
  const first = await put(p, 'hello', { priority: 10 });
  const second = await put(p, 'world', { priority: 10 });
  // Ids are server-assigned and distinct; kvq's do not start at 1 (nor does this check assume so).
  expectTrue(Number(first.id) > 0 && second.id !== first.id, 'distinct positive ids');
  expectJob(await reserve(p, 5), first, 'first reserve');
  await p.delete(first.id);
  expectJob(await reserve(p, 5), second, 'second reserve');
  await p.delete(second.id);
  expectEq(null, await reserve(p, 0), 'reserve from an empty tube');
  await expectReply('NOT_FOUND', () => p.peek(first.id), 'peek of a deleted job');
  await expectReply('NOT_FOUND', () => p.delete(first.id), 'second delete');
  // reserve-job: a named ready job, whatever its priority.
  const low = await put(p, 'low', { priority: 900 });
  await put(p, 'high', { priority: 1 });
  expectJob(await p.reserveJob(low.id), low, 'reserve-job');
  await p.delete(low.id);
  await closeAll(p);
};

scenarios.priorities_across_tubes = async (name) => {
  const a = `${name}-a`;
  const b = `${name}-b`;
  const producer = await connect();
  await producer.use(a);
  const a100 = await put(producer, 'a100', { priority: 100 });
  const a50 = await put(producer, 'a50', { priority: 50 });
  await producer.use(b);
  const b5 = await put(producer, 'b5', { priority: 5 });
  const b200 = await put(producer, 'b200', { priority: 200 });
  const b5again = await put(producer, 'b5 again', { priority: 5 });
  const worker = await connect();
  expectEq(2, await worker.watch(a), 'watch answers the number watched');
  expectEq(3, await worker.watch(b), 'watch answers the number watched');
  expectEq(2, await worker.ignore('default'), 'ignore answers the number watched');
  // Best priority first across every watched tube; equal priorities in put order.
  const order = [b5, b5again, a50, a100, b200];
  for (let i = 0; i < order.length; i++) {
    const job = await reserve(worker, 5);
    expectJob(job, order[i], `reserve #${i}`);
    await worker.delete(job.id);
  }
  expectEq(null, await reserve(worker, 0), 'reserve when both tubes are empty');
  await closeAll(producer, worker);
};

scenarios.delay = async (name) => {
  const p = await onTube(name);
  const start = now();
  const job = await put(p, 'later', { delay: 2 });
  expectFields({ state: 'delayed', delay: 2 }, await jobStats(p, job), 'stats-job');
  expectEq(null, await reserve(p, 0), 'reserve before the delay');
  expectEq(null, await peekOrNull(() => p.peekReady()), 'peek-ready before the delay');
  expectJob(await p.peekDelayed(), job, 'peek-delayed');
  expectJob(await reserve(p, 10), job, 'reserve after the delay');
  const waited = now() - start;
  expectTrue(waited >= 1.95 && waited < 6, `reserved after the 2 s delay (after ${waited}s)`);
  await p.delete(job.id);
  await closeAll(p);
};

scenarios.ttr_expiry = async (name) => {
  const p1 = await onTube(name);
  const p2 = await onTube(name);
  const job = await put(p1, 'slow worker', { ttr: 1 });
  const reservedAt = now();
  expectJob(await reserve(p1, 5), job, 'first reserve');
  // The protocol's safety margin: a reserve from a connection whose job's deadline is within
  // a second answers DEADLINE_SOON at once (with ttr 1, right away).
  await expectReply('DEADLINE_SOON', () => p1.reserveWithTimeout(5),
                    'reserve while holding a job about to time out');
  expectTrue(now() - reservedAt < 1.5, 'DEADLINE_SOON came before the ttr ran out');
  if (server === 'beanstalkd') await nudgeAfterTtr(p1, reservedAt, 1);
  // Not touched: after ttr the job is ready again, and another worker gets it.
  expectJob(await reserve(p2, 10), job, 'reserve by a second worker');
  const waited = now() - reservedAt;
  expectTrue(waited >= 0.95 && waited < 8, `came back after its 1 s ttr (after ${waited}s)`);
  expectFields({ state: 'reserved', reserves: 2, timeouts: 1 }, await jobStats(p2, job),
               'stats-job after the time-out');
  // Fencing: the first worker lost the job.
  await expectReply('NOT_FOUND', () => p1.delete(job.id), 'delete by the worker that timed out');
  await p2.delete(job.id);
  await closeAll(p1, p2);
};

scenarios.touch = async (name) => {
  const p1 = await onTube(name);
  const p2 = await onTube(name);
  const job = await put(p1, 'long task', { ttr: 2 });
  const start = now();
  expectJob(await reserve(p1, 5), job, 'reserve');
  // Touched every half second for twice its ttr: it stays with its worker.
  while (now() - start < 4) {
    await sleep(0.5);
    await p1.touch(job.id);
    expectEq(null, await reserve(p2, 0), 'reserve by another worker while touched');
  }
  expectFields({ state: 'reserved', reserves: 1, timeouts: 0 }, await jobStats(p1, job),
               'stats-job after touching');
  await p1.delete(job.id);
  await closeAll(p1, p2);
};

scenarios.release_priority_delay = async (name) => {
  const p = await onTube(name);
  const urgent = await put(p, 'urgent', { priority: 10 });
  const normal = await put(p, 'normal', { priority: 20 });
  expectJob(await reserve(p, 5), urgent, 'reserve');
  const releasedAt = now();
  await p.release(urgent.id, { priority: 30, delay: 1 });
  expectFields({ state: 'delayed', pri: 30, releases: 1 }, await jobStats(p, urgent),
               'stats-job after release');
  expectJob(await p.peekDelayed(), urgent, 'peek-delayed');
  expectJob(await p.peekReady(), normal, 'peek-ready');
  await waitFor(async () => (await jobStats(p, urgent)).state === 'ready', 6,
                'the released job to be ready');
  expectTrue(now() - releasedAt >= 0.95, 'ready only after the 1 s release delay');
  // Its new priority (30) now ranks it after the job of priority 20.
  expectJob(await reserve(p, 5), normal, 'reserve after the delay');
  expectJob(await reserve(p, 5), urgent, 'reserve of the released job');
  expectFields({ reserves: 2 }, await jobStats(p, urgent), 'stats-job');
  await p.delete(normal.id);
  await p.delete(urgent.id);
  await closeAll(p);
};

scenarios.bury_kick = async (name) => {
  const p = await onTube(name);
  const one = await put(p, 'one');
  const two = await put(p, 'two');
  const three = await put(p, 'three');
  expectJob(await reserve(p, 5), one, 'reserve one');
  await p.bury(one.id, 5);
  expectJob(await reserve(p, 5), two, 'reserve two');
  await p.bury(two.id, 0);
  expectFields({ state: 'buried', buries: 1, pri: 5 }, await jobStats(p, one), 'stats-job of one');
  expectFields({ 'current-jobs-buried': 2, 'current-jobs-ready': 1 }, await tubeStats(p, name),
               'stats-tube');
  expectJob(await p.peekBuried(), one, 'peek-buried');
  const kicks = 1;
  await p.kickJob(two.id);
  expectFields({ state: 'ready', kicks }, await jobStats(p, two), 'stats-job of two after kick-job');
  await expectReply('NOT_FOUND', () => p.kickJob(three.id), 'kick-job of a ready job');
  expectEq(1, await p.kick(10), 'kick with one buried job');
  expectFields({ state: 'ready', kicks }, await jobStats(p, one), 'stats-job of one after kick');
  // With nothing buried, kick moves delayed jobs.
  const later = await put(p, 'later', { delay: 300 });
  expectEq(1, await p.kick(10), 'kick with one delayed job');
  expectFields({ state: 'ready' }, await jobStats(p, later), 'stats-job of the kicked delayed job');
  expectEq(0, await p.kick(10), 'kick with nothing to kick');
  const got = [];
  for (let i = 0; i < 4; i++) {
    const job = await reserve(p, 5);
    expectTrue(job !== null, `reserve #${i} after the kicks`);
    got.push(job.id);
    await p.delete(job.id);
  }
  const byNumber = (x, y) => Number(x) - Number(y);
  expectEq([one.id, two.id, three.id, later.id].sort(byNumber), got.sort(byNumber),
           'the jobs reserved after the kicks');
  await closeAll(p);
};

scenarios.peeks = async (name) => {
  const p = await onTube(name);
  expectEq(null, await peekOrNull(() => p.peekReady()), 'peek-ready of an empty tube');
  expectEq(null, await peekOrNull(() => p.peekDelayed()), 'peek-delayed of an empty tube');
  expectEq(null, await peekOrNull(() => p.peekBuried()), 'peek-buried of an empty tube');
  const low = await put(p, 'pri 5', { priority: 5 });
  const high = await put(p, 'pri 1', { priority: 1 });
  expectJob(await p.peekReady(), high, 'peek-ready (best priority)');
  const far = await put(p, 'in 100 s', { delay: 100 });
  const near = await put(p, 'in 50 s', { delay: 50 });
  expectJob(await p.peekDelayed(), near, 'peek-delayed (soonest)');
  expectJob(await reserve(p, 5), high, 'reserve');
  await p.bury(high.id, 1);
  expectJob(await p.peekBuried(), high, 'peek-buried');
  expectJob(await p.peek(low.id), low, 'peek by id');
  // A job that is not reserved may be deleted in any state.
  for (const job of [low, high, far, near]) await p.delete(job.id);
  expectEq(null, await peekOrNull(() => p.peekReady()), 'peek-ready after the deletes');
  await closeAll(p);
};

scenarios.stats = async (name) => {
  const p = await onTube(name);
  const job = await put(p, 'xyz', { priority: 7, ttr: 30 });
  let stats = await jobStats(p, job);
  expectFields({ id: job.id, tube: name, state: 'ready', pri: 7, ttr: 30, delay: 0, reserves: 0,
                 timeouts: 0, releases: 0, buries: 0, kicks: 0 }, stats, 'stats-job of a ready job');
  expectTrue(/^\d+$/.test(stats.age) && Number(stats.age) < 10, 'age in seconds');
  expectFields({ name, 'current-jobs-ready': 1, 'current-jobs-reserved': 0,
                 'current-jobs-delayed': 0, 'current-jobs-buried': 0, 'total-jobs': 1, pause: 0 },
               await tubeStats(p, name), 'stats-tube');
  expectJob(await reserve(p, 5), job, 'reserve');
  stats = await jobStats(p, job);
  expectFields({ state: 'reserved', reserves: 1 }, stats, 'stats-job of a reserved job');
  const left = Number(stats['time-left']);
  expectTrue(left >= 25 && left <= 30, `time-left of a 30 s ttr just reserved (${left})`);
  await put(p, 'later', { delay: 100 });
  expectFields({ 'current-jobs-ready': 0, 'current-jobs-reserved': 1, 'current-jobs-delayed': 1,
                 'total-jobs': 2 }, await tubeStats(p, name), 'stats-tube');
  const serverStats = yamlDict(await p.stats());
  for (const field of ['current-jobs-reserved', 'current-connections', 'total-jobs', 'uptime']) {
    expectTrue(/^\d+$/.test(serverStats[field] || ''), `stats has a number '${field}'`);
  }
  expectTrue(Number(serverStats['current-jobs-reserved']) >= 1, 'stats counts the reserved job');
  await expectReply('NOT_FOUND', () => p.statsTube(`${name}-none`), 'stats-tube of an unknown tube');
  await p.delete(job.id);
  await closeAll(p);
};

scenarios.tubes = async (name) => {
  const a = `${name}-a`;
  const b = `${name}-b`;
  const p = await connect();
  expectEq('default', await p.listTubeUsed(), 'a new connection uses');
  expectEq(['default'], yamlList(await p.listTubesWatched()), 'a new connection watches');
  expectEq(name, await p.use(name), 'use answers the tube');
  expectEq(name, await p.listTubeUsed(), 'after use');
  await p.watch(a);
  await p.watch(b);
  expectEq([a, b, 'default'].sort(), yamlList(await p.listTubesWatched()).sort(), 'after two watches');
  await p.ignore('default');
  expectEq(1, await p.ignore(a), 'ignore answers the number left');
  expectEq([b], yamlList(await p.listTubesWatched()), 'after two ignores');
  await expectReply('NOT_IGNORED', () => p.ignore(b), 'ignore of the last watched tube');
  const tubes = yamlList(await p.listTubes());
  for (const tubeName of ['default', name, b]) {
    expectTrue(tubes.includes(tubeName), `list-tubes has '${tubeName}' (${tubes.join(' ')})`);
  }
  // The used tube is where put goes, whatever is watched.
  const job = await put(p, 'into the used tube');
  expectFields({ tube: name }, await jobStats(p, job), 'stats-job');
  await p.delete(job.id);
  await closeAll(p);
};

scenarios.pause_tube = async (name) => {
  const p = await onTube(name);
  const job = await put(p, 'paused');
  expectEq('PAUSED', await rawCommand(`pause-tube ${name} 2`), 'pause-tube (plain socket)');
  const pausedAt = now();
  const stats = await tubeStats(p, name);
  expectFields({ pause: 2 }, stats, 'stats-tube of a paused tube');
  expectTrue(['1', '2'].includes(stats['pause-time-left']), `pause-time-left (${stats['pause-time-left']})`);
  expectEq(null, await reserve(p, 0), 'reserve from a paused tube');
  expectJob(await reserve(p, 10), job, 'reserve once the pause ends');
  const waited = now() - pausedAt;
  expectTrue(waited >= 1.9 && waited < 7, `reserved after the 2 s pause (after ${waited}s)`);
  await p.delete(job.id);
  await closeAll(p);
};

scenarios.foreign_connection = async (name) => {
  const owner = await onTube(name);
  const other = await onTube(name);
  const job = await put(owner, 'mine');
  expectJob(await reserve(owner, 5), job, 'reserve');
  // A reserved job belongs to its connection: the others get NOT_FOUND.
  await expectReply('NOT_FOUND', () => other.delete(job.id), 'delete by another connection');
  await expectReply('NOT_FOUND', () => other.release(job.id), 'release by another connection');
  await expectReply('NOT_FOUND', () => other.bury(job.id, 0), 'bury by another connection');
  await expectReply('NOT_FOUND', () => other.touch(job.id), 'touch by another connection');
  expectFields({ state: 'reserved', releases: 0, buries: 0 }, await jobStats(other, job),
               'stats-job after the refused commands');
  await owner.delete(job.id);
  await expectReply('NOT_FOUND', () => owner.peek(job.id), 'peek after the delete');
  await closeAll(owner, other);
};

scenarios.binary_bodies = async (name) => {
  const p = await onTube(name);
  // Strings only (see the top of the file): UTF-8 brings bytes 0x80-0xF4 with the ASCII ones.
  let everyChar = '';
  for (let c = 0; c < 0x800; c++) everyChar += String.fromCharCode(c);
  let random = '';
  while (Buffer.byteLength(random) < 60000) random += String.fromCodePoint(1 + Math.floor(Math.random() * 0x10fff0));
  const bodies = {
    'every code point below U+0800': `${everyChar}\r\n\0\r\n`,
    'line ends and NUL': '\r\n\r\n\0',
    'about 60000 bytes of random code points': random,
  };
  for (const [what, body] of Object.entries(bodies)) {
    const job = await put(p, body);
    expectJob(await p.peek(job.id), job, `peek of ${what}`);
    const got = await reserve(p, 5);
    expectJob(got, job, `reserve of ${what}`);
    expectEq(Buffer.byteLength(body), got.payload.length, `length of ${what}`);
    await p.delete(got.id);
  }
  await closeAll(p);
};

scenarios.disconnect_releases = async (name) => {
  const leaving = await onTube(name);
  const staying = await onTube(name);
  const job = await put(leaving, 'orphan', { ttr: 120 });
  expectJob(await reserve(leaving, 5), job, 'reserve');
  expectEq(null, await reserve(staying, 0), 'reserve while the job is held');
  await leaving.disconnect();
  const closedAt = now();
  // Released at once, long before its 120 s ttr.
  expectJob(await reserve(staying, 10), job, 'reserve after the holder disconnected');
  const waited = now() - closedAt;
  expectTrue(waited < 3, `released when the connection closed (after ${waited}s)`);
  expectFields({ reserves: 2, timeouts: 0 }, await jobStats(staying, job), 'stats-job');
  await staying.delete(job.id);
  await closeAll(staying);
};

// ---------------------------------------------------------------------------------------------------
(async () => {
  if (scenario === 'list') {
    console.log(Object.keys(scenarios).join('\n'));
    return;
  }
  if (!scenarios[scenario]) {
    console.error(`unknown scenario '${scenario}'`);
    process.exit(2);
  }
  try {
    await scenarios[scenario](tube);
  } catch (e) {
    // jackd rejects from its socket handler, so the stack cannot name the scenario's line: the
    // last client call made names the step instead.
    const kind = e instanceof ScenarioFailure ? '' : `unexpected ${e.constructor.name} after step '${lastStep}': `;
    console.log(`FAIL ${scenario}: ${kind}${e.message}`);
    process.exit(1);
  }
  console.log(`ok ${scenario}`);
  // A jackd socket left open by a failed disconnect must not keep the process alive.
  process.exit(0);
})();
