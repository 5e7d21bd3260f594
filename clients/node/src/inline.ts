// SPDX-License-Identifier: Apache-2.0
/**
 * Testing against the real thing: {@link InlineClient.start} starts a kvq server of the test's
 * own (`kvq serve --ephemeral`: an LMDB store in a new temporary directory, a free loopback
 * port) and resolves with a {@link Client} of it that also runs the test's handlers;
 * {@link InlineClient.close} stops the server, which removes that directory.
 *
 * (Before 0.2.0 `InlineClient` was an in-memory imitation of a server with a clock of its own;
 * it is now the server itself, so a test sees what production will.)
 *
 * @packageDocumentation
 */

import { spawn, type ChildProcess } from 'node:child_process';
import { accessSync, constants } from 'node:fs';
import { delimiter, join } from 'node:path';

import { Client, type CallOptions } from './client';
import type { TypeSettings } from './types';
import { Worker, type Handler, type Logger, type WorkerOptions } from './worker';

/** How {@link InlineClient.start} starts its server and what it runs. */
export interface InlineOptions {
  /** The handler of each job type, run by {@link InlineClient.drain} and {@link InlineClient.result}. */
  handlers?: Record<string, Handler>;
  /**
   * Types to create (`putType`) once the server is up. A type with a handler and no entry
   * here is created with `{ timeout: 30 }`, so that a test of a handler needs no set-up.
   */
  types?: Record<string, TypeSettings>;
  /** The kvq binary (default `KVQ_BIN` from the environment, else `kvq` on `PATH`). */
  kvqBin?: string;
  /** More `kvq serve` flags (`['--token', t]`: then give `token` too). */
  args?: string[];
  /** The client's token, for a server started with `--token`. */
  token?: string;
  /** Handlers at once in the workers of drain and result (default 1). */
  concurrency?: number;
  /** More options of the workers of drain and result (their log is silent by default). */
  worker?: Omit<Partial<WorkerOptions>, 'handlers' | 'client' | 'burst' | 'concurrency'>;
  /** How long the server may take to say where it listens, in ms (default 30000). */
  startTimeoutMs?: number;
}

/** Options of {@link InlineClient.drain}. */
export interface DrainOptions {
  /**
   * Only the jobs due now, and those that fall due as it runs (default false: it goes on until
   * the handlers' types have no pending job, waiting in real time for jobs scheduled later).
   */
  onlyDue?: boolean;
  /** Give up after this many ms with jobs still pending (default 30000). */
  timeoutMs?: number;
}

// The first line `kvq serve --ephemeral` prints (docs/operations.md, A throwaway server).
const LISTENING = /^kvq serve: listening on (https?:\/\/\S+) store lmdb:(\S+)/;

const silent: Logger = () => {};

/** The kvq binary: `given`, else `KVQ_BIN`, else `kvq` on `PATH`; throws saying what it tried. */
export function findKvq(given?: string): string {
  const [bin, from] = given ? [given, 'kvqBin'] : [process.env.KVQ_BIN ?? '', 'KVQ_BIN'];
  const executable = (path: string) => {
    try {
      accessSync(path, constants.X_OK);
      return true;
    } catch {
      return false;
    }
  };
  if (bin) {
    if (!executable(bin)) throw new Error(`kvq: the kvq binary ${from} names (${bin}) is not an executable file`);
    return bin;
  }
  for (const dir of (process.env.PATH ?? '').split(delimiter)) {
    if (dir && executable(join(dir, 'kvq'))) return join(dir, 'kvq');
  }
  throw new Error('kvq: no kvq binary: pass kvqBin, set KVQ_BIN, or put kvq on PATH');
}

/**
 * A {@link Client} bound to a `kvq serve --ephemeral` it started: every call of the client,
 * with the server's own answers, plus the test's handlers, which {@link drain} and
 * {@link result} run in a {@link Worker}, in real time (give a test's types a short `backoff`
 * so retries come soon). Stop it with {@link close}; a server still running when the process
 * exits is sent SIGTERM then.
 *
 * @example
 * ```ts
 * const kvq = await InlineClient.start({ handlers: { email: sendWelcome } });
 * try {
 *   await kvq.add('email', 'j1', { to: 'ada@example.com' });
 *   assert.deepEqual(await kvq.result('email', 'j1'), { sent: true });
 * } finally {
 *   await kvq.close();
 * }
 * ```
 */
export class InlineClient extends Client {
  /** The server's temporary data directory, removed when it stops. */
  readonly dataDir: string;
  private readonly handlers: Record<string, Handler>;
  private readonly workerOptions: Omit<WorkerOptions, 'handlers'>;
  private readonly exited: Promise<void>;

  private constructor(
    url: string,
    dataDir: string,
    private readonly proc: ChildProcess,
    exited: Promise<void>,
    private readonly output: string[],
    options: InlineOptions,
  ) {
    super({ url, ...(options.token !== undefined ? { token: options.token } : {}) });
    this.dataDir = dataDir;
    this.exited = exited;
    this.handlers = { ...options.handlers };
    this.workerOptions = {
      log: silent,
      ...options.worker,
      concurrency: options.concurrency ?? 1,
      handleSignals: false,
      client: this,
    };
  }

  /** Starts the server, creates `types`, and resolves with a client of it. */
  static async start(options: InlineOptions = {}): Promise<InlineClient> {
    const bin = findKvq(options.kvqBin);
    const env = { ...process.env };
    delete env.KVQ_TOKEN; // the test environment's token is not this server's
    const proc = spawn(bin, ['serve', '--ephemeral', ...(options.args ?? [])], {
      stdio: ['ignore', 'pipe', 'pipe'],
      env,
    });
    const output: string[] = [];
    const exited = new Promise<void>((resolve) => proc.once('close', () => resolve()));
    const stopAtExit = () => proc.kill('SIGTERM');
    process.once('exit', stopAtExit);
    void exited.then(() => process.removeListener('exit', stopAtExit));
    const [url, dataDir] = await new Promise<[string, string]>((resolve, reject) => {
      const fail = (why: string) => {
        clearTimeout(timer);
        proc.kill('SIGTERM');
        reject(new Error(`kvq: ${bin} serve --ephemeral ${why}; its output:\n${output.join('')}`));
      };
      const ms = options.startTimeoutMs ?? 30000;
      const timer = setTimeout(() => fail(`did not say where it listens within ${ms} ms`), ms);
      let first = '';
      let decided = false;
      proc.stdout!.on('data', (chunk: Buffer) => {
        output.push(chunk.toString());
        if (decided) return;
        first += chunk.toString();
        const nl = first.indexOf('\n');
        if (nl < 0) return;
        decided = true;
        const m = LISTENING.exec(first.slice(0, nl));
        if (!m) return fail('printed something else first');
        clearTimeout(timer);
        resolve([m[1]!, m[2]!]);
      });
      proc.stderr!.on('data', (chunk: Buffer) => output.push(chunk.toString()));
      proc.once('error', (e) => fail(`could not start: ${e.message}`));
      proc.once('exit', (code, signal) => {
        if (!decided) fail(`exited (${signal ?? code}) before listening`);
      });
    });
    const kvq = new InlineClient(url, dataDir, proc, exited, output, options);
    try {
      const types = { ...options.types };
      for (const type of Object.keys(kvq.handlers)) types[type] ??= { timeout: 30 };
      for (const [type, settings] of Object.entries(types)) await kvq.putType(type, settings);
    } catch (err) {
      await kvq.close();
      throw err;
    }
    return kvq;
  }

  /** What the server printed so far. */
  serverOutput(): string {
    return this.output.join('');
  }

  private worker(burst: boolean, counted: { runs: number }): Worker {
    if (Object.keys(this.handlers).length === 0) throw new Error('kvq: InlineClient: no handlers: give them to InlineClient.start');
    const handlers: Record<string, Handler> = {};
    for (const [type, handler] of Object.entries(this.handlers)) {
      handlers[type] = (job, ctx) => {
        counted.runs++;
        return handler(job, ctx);
      };
    }
    return new Worker({ ...this.workerOptions, handlers, burst });
  }

  /**
   * Runs the handlers on their types' jobs: until none is pending (waiting in real time for
   * jobs scheduled later, at most `timeoutMs`), or with `onlyDue` until none is due and none
   * running. Resolves with the number of runs.
   */
  async drain(options: DrainOptions = {}): Promise<number> {
    const deadline = Date.now() + (options.timeoutMs ?? 30000);
    const counted = { runs: 0 };
    for (;;) {
      await this.worker(true, counted).run();
      if (options.onlyDue) return counted.runs;
      const left: Record<string, number> = {};
      for (const type of Object.keys(this.handlers)) {
        const c = await this.counts(type);
        if (c.pending + c.running > 0) left[type] = c.pending + c.running;
      }
      if (Object.keys(left).length === 0) return counted.runs;
      if (Date.now() >= deadline) {
        throw new Error(`kvq: InlineClient.drain: jobs still pending after ${options.timeoutMs ?? 30000} ms: ${JSON.stringify(left)}`);
      }
      await new Promise((r) => setTimeout(r, 20));
    }
  }

  /**
   * Runs the handlers (a {@link Worker}) until the job ends, then answers as
   * {@link Client.result}: its result, or a rejection with `JobFailedError`.
   */
  override async result<T = unknown>(type: string, id: string, options: CallOptions = {}): Promise<T> {
    const worker = this.worker(false, { runs: 0 });
    const running = worker.run();
    const awaiting = new AbortController(); // ends the wait if the worker cannot run
    const outer = options.signal;
    const onAbort = () => awaiting.abort(outer?.reason);
    outer?.addEventListener('abort', onAbort, { once: true });
    try {
      return await Promise.race([
        super.result<T>(type, id, { ...options, signal: awaiting.signal }),
        running.then(() => Promise.reject(new Error('kvq: InlineClient.result: the worker stopped'))),
      ]);
    } finally {
      outer?.removeEventListener('abort', onAbort);
      awaiting.abort();
      await worker.stop();
      await running.catch(() => {});
    }
  }

  /** Stops the server (SIGTERM; SIGKILL after 10 s) and waits until it has exited. */
  async close(): Promise<void> {
    if (this.proc.exitCode === null && this.proc.signalCode === null) {
      this.proc.kill('SIGTERM');
      const t = setTimeout(() => this.proc.kill('SIGKILL'), 10000);
      await this.exited;
      clearTimeout(t);
    }
    await this.exited;
  }
}
