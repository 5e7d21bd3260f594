// SPDX-License-Identifier: Apache-2.0
/**
 * The worker runner: runs a handler per job type on the jobs a kvq server hands out, with the
 * heartbeats, fencing, failure reporting, shutdown and retries a correct worker needs.
 *
 * @packageDocumentation
 */

import { EventEmitter } from 'node:events';
import * as os from 'node:os';
import { randomBytes } from 'node:crypto';

import { Client, type ClientOptions, type RetryOptions } from './client';
import { KvqError } from './errors';
import type { AcceptedJob } from './types';
import { consumerSpan } from './otel';
import { backoffMs, errorOf, retryWishes, sleep } from './util';

/** What a handler gets beside its job. */
export interface JobContext {
  /**
   * Aborted when the job is no longer this worker's (fenced: `409 halted` — cancelled, removed,
   * lost, taken by another), and when the worker stops and hands the job back. Its `reason` is
   * a {@link KvqError} with code `halted` for the first, a {@link ShutdownError} for the second.
   * Stop working when it fires: what the handler returns or throws afterwards is ignored.
   */
  signal: AbortSignal;
  /**
   * Reports progress (any JSON value) at once; it also serves as a heartbeat. Resolves `true`
   * once the server has it, `false` if it did not take it (the job is no longer ours — then the
   * signal is aborted — or the server could not be reached; the background heartbeat goes on).
   * Never rejects.
   */
  progress(value: unknown): Promise<boolean>;
  /**
   * Which attempt this run is: 1 for the first, counting every accept since the job was last
   * added anew or rerun, less the runs handed back with snooze (BullMQ's `attemptsMade` + 1).
   * The accept's answer carries it; from a server before 0.2.0, whose answer does not, it costs
   * one request (a `get` of the job).
   */
  attempt(): Promise<number>;
}

/**
 * A job handler: its return value (any JSON value; `undefined` becomes `null`) is the job's
 * result; what it throws fails the attempt, with the error's `message`, its `name` as the kind
 * and `{stack}` as the details, and the type's retry policy decides what next. An error may
 * carry `retry: false` (end the job dead now) or `retryIn` (seconds until the retry) and
 * `details` (any JSON value, kept beside the stack).
 */
export type Handler<Data = any, Result = unknown> = (job: AcceptedJob<Data>, ctx: JobContext) => Result | Promise<Result>;

/**
 * The events of a {@link Worker}: `completed` once a job's finish is recorded (with the
 * handler's result), `failed` once a failed attempt is recorded (with what the handler threw;
 * the type's policy decides whether it runs again). A listener that throws is logged, never
 * changes the job.
 */
export interface WorkerEvents<Data = any, Result = unknown> {
  completed: [job: AcceptedJob<Data>, result: Result];
  failed: [job: AcceptedJob<Data>, error: unknown];
}

/** The reason a handler's signal carries when the worker stops before the handler ends. */
export class ShutdownError extends Error {
  /** @param message - why */
  constructor(message = 'the worker is stopping: the job was handed back') {
    super(message);
    this.name = 'ShutdownError';
  }
}

/** A log line of the worker: what happened, and the error if one did. */
export type Logger = (level: 'info' | 'warn' | 'error', message: string, error?: unknown) => void;

/**
 * The defaults of {@link WorkerOptions}, the same in the Python and Go clients (the table in
 * docs/clients.md): seconds, but `concurrency`. A running job is heartbeated every third of its
 * type's timeout.
 */
export const workerDefaults = Object.freeze({ concurrency: 1, pollTimeout: 10, grace: 10, healthTimeout: 10 });

/** How to build a {@link Worker}. */
export interface WorkerOptions<Data = any, Result = unknown> {
  /** The handler of each job type: the worker serves exactly these types. */
  handlers: Record<string, Handler<Data, Result>>;
  /** A client, or how to make one (default: `KVQ_URL` / `KVQ_TOKEN`, else localhost:7411). */
  client?: Client | ClientOptions | string;
  /** Handlers running at once, over all types (default 1). */
  concurrency?: number;
  /** This worker's id (default `hostname-pid-random`). */
  id?: string;
  /** The worker type it registers as (default `node`). */
  workerType?: string;
  /**
   * Register with the workers layer, so the server hands this worker's jobs back at once if
   * it dies (default true). Its heartbeat runs every `healthTimeout / 3`.
   */
  register?: boolean;
  /** Seconds without a heartbeat after which the server declares this worker dead (default 10). */
  healthTimeout?: number;
  /** Anything to register with (shown by `GET /v1/workers/{wtype}`). */
  info?: unknown;
  /**
   * Seconds an accept long-polls for a job (default 10). A stop cuts it short when the worker
   * is registered (a job handed out in that instant comes back when it unregisters); an
   * unregistered worker's stop waits for it.
   */
  pollTimeout?: number;
  /**
   * Stop once no job of its types is due and none is running (RQ's `--burst`): `run()` then
   * resolves, for scripts and tests. Jobs scheduled later (a retry's backoff) are left for
   * another run. Default false.
   */
  burst?: boolean;
  /**
   * Seconds between a running job's heartbeats (`update`); default a third of its type's
   * timeout, read from the server when the worker starts.
   */
  heartbeatInterval?: number;
  /** Seconds a stop lets running handlers finish before handing their jobs back (default 10). */
  grace?: number;
  /**
   * Stop on SIGTERM and SIGINT while {@link Worker.run} runs (default true); a second signal
   * exits the process at once (status 128 + the signal's number).
   */
  handleSignals?: boolean;
  /** How calls to the server are retried on 503 and network errors (default: jittered, 200 ms to 10 s). */
  retry?: RetryOptions;
  /** Where log lines go (default: warnings and errors to stderr). */
  log?: Logger;
}

interface Run {
  job: AcceptedJob;
  controller: AbortController;
  timer: ReturnType<typeof setInterval> | undefined;
  gone: boolean; // fenced or handed back: the handler's outcome is ignored
  beating: boolean;
  done: Promise<void>;
}

const defaultLog: Logger = (level, message, error) => {
  if (level === 'info') return;
  const why = error instanceof Error ? `: ${error.message}` : error === undefined ? '' : `: ${String(error)}`;
  console.error(`kvq worker ${level}: ${message}${why}`);
};

/**
 * Runs handlers on the jobs of their types.
 *
 * - Accepts with a long poll, up to as many jobs at once as it has free slots (`concurrency`).
 * - Heartbeats each running job (`update`) every third of its type's timeout, so a handler may
 *   run far longer than the timeout; `ctx.progress()` reports progress.
 * - Registers as a worker and heartbeats that registration, so if the process dies its jobs
 *   go back to pending at once.
 * - Aborts the handler's `signal` when the job is fenced (`409 halted`) or handed back.
 * - Finishes the job with the handler's return value, or fails it with what it threw.
 * - `stop()` (or SIGTERM/SIGINT) drains: it stops accepting, lets running handlers finish for
 *   `grace` seconds, then hands the others back with `snooze` (no attempt counted, no lost run)
 *   and unregisters; a second signal exits at once.
 * - Retries `503` answers and network errors with jittered backoff.
 *
 * @example
 * ```ts
 * const worker = new Worker({
 *   handlers: { email: async (job, { signal }) => sendEmail(job.data, { signal }) },
 *   concurrency: 8,
 * });
 * await worker.run(); // until SIGTERM
 * ```
 */
export class Worker<Data = any, Result = unknown> extends EventEmitter {
  /** The client it talks to the server with. */
  readonly client: Client;
  /** Its worker id (as accept and the workers layer know it). */
  readonly id: string;
  /** Its worker type. */
  readonly workerType: string;

  private readonly handlers: Record<string, Handler<Data, Result>>;
  private readonly burst: boolean;
  private readonly emptyTypes = new Set<string>(); // burst: types whose last accept, idle, was empty
  private stoppedBySignal = false;
  private readonly concurrency: number;
  private readonly register: boolean;
  private readonly healthTimeout: number;
  private readonly info: unknown;
  private readonly pollTimeout: number;
  private readonly heartbeatOverride: number | undefined;
  private readonly grace: number;
  private readonly handleSignals: boolean;
  private readonly retry: Required<RetryOptions>;
  private readonly log: Logger;

  private readonly runs = new Map<string, Run>();
  private readonly timeouts = new Map<string, number>();
  private reserved = 0;
  private readonly handingBack = new Set<Promise<void>>();
  private waiting = 0;
  private wakers: (() => void)[] = [];
  private stopping = false;
  /** Whether the server's finish takes `next` (an older one answers unknown_field). */
  private nextSupported = true;
  private readonly stopController = new AbortController();
  private token: string | undefined;
  private memberTimer: ReturnType<typeof setInterval> | undefined;
  private runPromise: Promise<void> | undefined;
  private stopPromise: Promise<void> | undefined;
  private fatal: unknown;
  private signalsSeen = 0;
  private readonly onSignal = (sig: NodeJS.Signals) => this.signalled(sig);

  /** @param options - handlers, server and behaviour */
  constructor(options: WorkerOptions<Data, Result>) {
    super();
    if (!options.handlers || Object.keys(options.handlers).length === 0) {
      throw new Error('kvq Worker: give at least one handler');
    }
    for (const [type, h] of Object.entries(options.handlers)) {
      if (typeof h !== 'function') throw new Error(`kvq Worker: the handler of '${type}' is not a function`);
    }
    const c = options.client;
    this.client = c instanceof Client ? c : new Client(c ?? {});
    this.handlers = { ...options.handlers };
    this.concurrency = options.concurrency ?? workerDefaults.concurrency;
    if (!Number.isInteger(this.concurrency) || this.concurrency < 1) {
      throw new Error(`kvq Worker: concurrency must be a positive integer, not ${options.concurrency}`);
    }
    this.id = options.id ?? `${os.hostname()}-${process.pid}-${randomBytes(3).toString('hex')}`;
    this.workerType = options.workerType ?? 'node';
    this.register = options.register ?? true;
    this.healthTimeout = options.healthTimeout ?? workerDefaults.healthTimeout;
    this.info = options.info;
    this.pollTimeout = options.pollTimeout ?? workerDefaults.pollTimeout;
    this.burst = options.burst ?? false;
    this.heartbeatOverride = options.heartbeatInterval;
    this.grace = options.grace ?? workerDefaults.grace;
    this.handleSignals = options.handleSignals ?? true;
    this.retry = { attempts: Infinity, baseMs: 200, capMs: 10000, ...options.retry };
    this.log = options.log ?? defaultLog;
  }

  /** Listens to `completed` or `failed` (see {@link WorkerEvents}). */
  override on<E extends keyof WorkerEvents<Data, Result>>(event: E, listener: (...args: WorkerEvents<Data, Result>[E]) => void): this {
    return super.on(event, listener as (...args: unknown[]) => void);
  }

  /** As {@link Worker.on}, for one event. */
  override once<E extends keyof WorkerEvents<Data, Result>>(event: E, listener: (...args: WorkerEvents<Data, Result>[E]) => void): this {
    return super.once(event, listener as (...args: unknown[]) => void);
  }

  private tell<E extends keyof WorkerEvents<Data, Result>>(event: E, ...args: WorkerEvents<Data, Result>[E]): void {
    try {
      this.emit(event, ...args);
    } catch (err) {
      this.log('error', `a '${event}' listener threw`, err);
    }
  }

  /** Handlers running now. */
  get active(): number {
    return this.runs.size;
  }

  /**
   * Runs until stopped (by {@link Worker.stop} or a signal). Resolves once drained: every job
   * finished, failed or handed back, and the worker unregistered. Rejects if the worker cannot
   * run: a type that does not exist (`404 not_found`), or another error that retrying cannot
   * cure (after draining what it holds).
   */
  run(): Promise<void> {
    if (!this.runPromise) this.runPromise = this.main();
    return this.runPromise;
  }

  /**
   * Stops: no more accepts, running handlers get `grace` seconds to finish, the rest are
   * handed back (their signals aborted). Resolves when done; safe to call more than once.
   */
  stop(): Promise<void> {
    if (!this.stopPromise) this.stopPromise = this.drain();
    return this.stopPromise;
  }

  private async main(): Promise<void> {
    if (this.handleSignals) {
      process.on('SIGTERM', this.onSignal);
      process.on('SIGINT', this.onSignal);
    }
    try {
      try {
        await this.start();
      } catch (err) {
        if (!this.stopping) this.fatal = err;
      }
      if (this.fatal === undefined && !this.stopping) {
        const loops = Object.keys(this.handlers).map((t) => this.acceptLoop(t));
        await Promise.all(loops);
      }
      await this.stop();
    } finally {
      if (this.handleSignals) {
        process.off('SIGTERM', this.onSignal);
        process.off('SIGINT', this.onSignal);
      }
    }
    if (this.stoppedBySignal && this.runs.size > 0) {
      // A handler that ignored its signal still holds the event loop (its job was handed
      // back): once the code after run() has had a second, the process exits, as a signal asked.
      this.log('warn', `${this.runs.size} handler(s) ignored their signal: exiting in 1 s`);
      setTimeout(() => process.exit(process.exitCode ?? 0), 1000).unref();
    }
    if (this.fatal !== undefined) throw this.fatal;
  }

  private signalled(sig: NodeJS.Signals): void {
    this.signalsSeen++;
    if (this.signalsSeen > 1) {
      this.log('warn', `second ${sig}: exiting now`);
      process.exit(128 + (os.constants.signals[sig] ?? 15));
    }
    this.log('info', `${sig}: draining (send it again to exit at once)`);
    this.stoppedBySignal = true;
    void this.stop();
  }

  /** Options of a call that a stop abandons (starting up, registering). */
  private callOptions() {
    return { retry: this.retry, signal: this.stopController.signal };
  }

  private async start(): Promise<void> {
    for (const type of Object.keys(this.handlers)) {
      try {
        const info = await this.client.getType(type, this.callOptions());
        this.timeouts.set(type, info.timeout);
      } catch (err) {
        if (err instanceof KvqError && err.code === 'not_found') {
          throw new KvqError(404, 'not_found', `kvq Worker: job type '${type}' does not exist (create it with a timeout first)`);
        }
        throw err;
      }
    }
    if (!this.register) return;
    await this.registerNow();
    const every = Math.max(50, (this.healthTimeout * 1000) / 3);
    this.memberTimer = setInterval(() => void this.memberHeartbeat(), every);
  }

  private async registerNow(): Promise<void> {
    const r = await this.client.registerWorker(this.workerType, this.id, {
      healthTimeout: this.healthTimeout,
      info: this.info,
      takeOver: true,
      ...this.callOptions(),
    });
    this.token = r.token;
  }

  private memberBeating = false;

  private async memberHeartbeat(): Promise<void> {
    if (this.memberBeating || !this.token) return;
    this.memberBeating = true;
    try {
      // Not aborted by stop: the registration must stay alive through the drain, or the
      // server would hand out the jobs still finishing within the grace.
      await this.client.heartbeatWorker(this.workerType, this.id, this.token, {
        retry: { ...this.retry, attempts: 2 },
        timeoutMs: Math.max(1000, (this.healthTimeout * 1000) / 2),
      });
    } catch (err) {
      if (err instanceof KvqError && (err.halted || err.code === 'wrong_token')) {
        // Declared dead (or replaced): its jobs were handed out again, and their next calls
        // are fenced. Register again to go on.
        this.log('warn', 'the server declared this worker gone: registering again', err);
        try {
          await this.registerNow();
        } catch (e) {
          if (!this.stopping) this.log('error', 'registering again failed', e);
        }
      } else if (!this.stopping) {
        this.log('warn', 'worker heartbeat failed', err);
      }
    } finally {
      this.memberBeating = false;
    }
  }

  // ---- slots --------------------------------------------------------------------------

  private free(): number {
    return this.concurrency - this.runs.size - this.reserved;
  }

  private wake(): void {
    const w = this.wakers;
    this.wakers = [];
    w.forEach((f) => f());
  }

  /** Waits for a free slot; reserves this loop's share of the free slots. 0 when stopping. */
  private async reserve(): Promise<number> {
    this.waiting++;
    try {
      while (!this.stopping && this.free() <= 0) {
        await new Promise<void>((resolve) => this.wakers.push(resolve));
      }
      if (this.stopping) return 0;
      const n = Math.min(100, Math.max(1, Math.floor(this.free() / this.waiting)));
      this.reserved += n;
      return n;
    } finally {
      this.waiting--;
    }
  }

  private release(n: number): void {
    this.reserved -= n;
    this.wake();
  }

  // ---- accepting ----------------------------------------------------------------------

  private async acceptLoop(type: string): Promise<void> {
    let failures = 0;
    // With several types, each loop's accept waits at most 1 s, so that the types take turns
    // at the free slots rather than one long poll holding them (as the Go and Python runners).
    const poll = Object.keys(this.handlers).length > 1 ? Math.min(1, this.pollTimeout) : this.pollTimeout;
    while (!this.stopping) {
      if (this.waiting > 0) {
        // Another type's loop waits for a slot: let it take the one this loop just gave back
        // (its wake-up runs before this), or a loop that polls nothing would keep it for ever.
        await new Promise<void>((resolve) => setImmediate(resolve));
      }
      const n = await this.reserve();
      if (n === 0) break;
      let jobs: AcceptedJob[];
      const idle = this.runs.size === 0;
      try {
        // A registered worker's stop aborts it: a job the server handed out as the answer was
        // dropped comes back when the worker unregisters. An unregistered one's would stay
        // taken until it timed out, so its stop waits, and hands back what it brings.
        jobs = await this.client.accept(type, {
          ...(this.register ? { signal: this.stopController.signal } : {}),
          timeout: !this.burst ? poll : idle ? 0 : Math.min(0.2, poll),
          count: n,
          ...(this.register ? { worker: this.id, workerType: this.workerType } : {}),
          retry: { attempts: 1 },
        });
        failures = 0;
      } catch (err) {
        this.release(n);
        if (this.stopping) break;
        if (err instanceof KvqError && err.code === 'not_found') {
          this.fatal = new KvqError(404, 'not_found', `kvq Worker: job type '${type}' no longer exists`);
          void this.stop();
          break;
        }
        if (!(err instanceof KvqError && err.retryable)) this.log('error', `accept of '${type}' failed`, err);
        else if (failures === 0) this.log('warn', `accept of '${type}' failed, retrying`, err);
        failures++;
        try {
          await sleep(backoffMs(failures, this.retry.baseMs, this.retry.capMs), this.stopController.signal);
        } catch {
          break; // stopping
        }
        continue;
      }
      this.reserved -= n;
      for (const job of jobs) {
        if (this.stopping) this.trackHandBack(job);
        else this.startRun(job);
      }
      this.wake();
      if (!this.burst) continue;
      if (jobs.length > 0 || !idle) this.emptyTypes.clear();
      else this.emptyTypes.add(type);
      if (this.runs.size === 0 && this.emptyTypes.size === Object.keys(this.handlers).length) {
        this.log('info', 'burst: no job due and none running: stopping');
        void this.stop();
        break;
      }
    }
  }

  // ---- running one job ----------------------------------------------------------------

  private startRun(job: AcceptedJob): void {
    const key = `${job.type}\u0000${job.id}`;
    const controller = new AbortController();
    const run: Run = { job, controller, timer: undefined, gone: false, beating: false, done: Promise.resolve() };
    const every = this.heartbeatOverride ?? (this.timeouts.get(job.type) ?? 30) / 3;
    run.timer = setInterval(() => void this.beat(run), Math.max(20, every * 1000));
    this.runs.set(key, run);
    const ctx: JobContext = {
      signal: controller.signal,
      progress: (value: unknown) => this.beat(run, { progress: value }),
      attempt: async () =>
        job.attempt ?? (await this.client.get(job.type, job.id, { retry: this.retry })).attempts,
    };
    run.done = (async () => {
      let ok = false;
      let result: Result | undefined;
      let error: unknown;
      const typed = job as AcceptedJob<Data>;
      const span = consumerSpan(job.type, job.id, job.traceparent);
      try {
        result = await span.run(() => this.handlers[job.type]!(typed, ctx));
        ok = true;
      } catch (err) {
        error = err;
      }
      clearInterval(run.timer);
      span.end(run.gone ? 'dropped' : ok ? 'succeeded' : 'failed', ok || run.gone ? undefined : error);
      if (run.gone) return;
      if (ok) {
        if (await this.report(run, 'finish', () => this.finishAndTakeNext(job, result === undefined ? null : result))) {
          this.tell('completed', typed, result as Result);
        }
      } else {
        const wishes = retryWishes(error);
        if (await this.report(run, 'fail', () => this.client.fail(job, errorOf(error), { ...wishes, ...this.reportOptions(job) }))) {
          this.tell('failed', typed, error);
        }
      }
    })().finally(() => {
      clearInterval(run.timer);
      // A resubmitted job may come back as its own next job, under the same key.
      if (this.runs.get(key) === run) this.runs.delete(key);
      this.wake();
    });
  }

  /**
   * Finishes the job and, while the worker runs, takes the next due job of its types in the
   * same request (without waiting: an idle worker waits in its accept loop), started at once
   * in the slot this run frees: a busy worker spends one request per job. Only the first try
   * asks for a next job: a retry after a lost answer could take a second while the first waits
   * unseen until its timeout.
   */
  private async finishAndTakeNext(job: AcceptedJob, result: unknown): Promise<void> {
    const options = this.reportOptions(job);
    if (this.stopping || !this.nextSupported) {
      await this.client.finish(job, result, options);
      return;
    }
    let next: AcceptedJob | null;
    try {
      next = await this.client.finish(job, result, {
        ...options,
        retry: { ...this.retry, attempts: 1 },
        next: {
          types: Object.keys(this.handlers),
          ...(this.register ? { worker: this.id, workerType: this.workerType } : {}),
        },
      });
    } catch (err) {
      if (err instanceof KvqError && err.code === 'unknown_field') this.nextSupported = false; // an older server
      else if (!(err instanceof KvqError && err.retryable)) throw err;
      await this.client.finish(job, result, options);
      return;
    }
    if (next === null) return;
    if (this.stopping) this.trackHandBack(next);
    else this.startRun(next);
  }

  /** Options of a finish or fail: retried until the job's timeout has surely passed. */
  private reportOptions(job: AcceptedJob) {
    const limit = Math.max(30, 2 * (this.timeouts.get(job.type) ?? 30)) * 1000;
    return { retry: this.retry, signal: AbortSignal.timeout(limit) };
  }

  /** Sends a run's finish or fail; true once the server recorded it. */
  private async report(run: Run, what: string, call: () => Promise<unknown>): Promise<boolean> {
    try {
      await call();
      return true;
    } catch (err) {
      if (err instanceof KvqError && err.halted) {
        this.log('info', `${what} of ${run.job.type}/${run.job.id}: no longer ours`, err);
      } else {
        this.log('error', `${what} of ${run.job.type}/${run.job.id} failed: the job will be retried when its run times out`, err);
      }
      return false;
    }
  }

  /** A heartbeat (or a progress report). False if the server did not take it. */
  private async beat(run: Run, body: { progress?: unknown } = {}): Promise<boolean> {
    if (run.gone) return false;
    const isProgress = 'progress' in body;
    if (run.beating && !isProgress) return true; // one heartbeat at a time
    run.beating = true;
    try {
      await this.client.update(run.job, { ...body, retry: { ...this.retry, attempts: isProgress ? 3 : 1 } });
      return true;
    } catch (err) {
      if (err instanceof KvqError && err.halted) this.fence(run, err);
      else if (!run.gone) this.log('warn', `heartbeat of ${run.job.type}/${run.job.id} failed`, err);
      return false;
    } finally {
      run.beating = false;
    }
  }

  private fence(run: Run, reason: Error): void {
    if (run.gone) return;
    run.gone = true;
    clearInterval(run.timer);
    this.log('info', `${run.job.type}/${run.job.id} was taken from this worker: aborting its handler`, reason);
    run.controller.abort(reason);
  }

  private trackHandBack(job: AcceptedJob): void {
    const p = this.handBack(job).finally(() => this.handingBack.delete(p));
    this.handingBack.add(p);
  }

  private async handBack(job: AcceptedJob): Promise<void> {
    try {
      await this.client.snooze(job, { delay: 0, retry: { ...this.retry, attempts: 5, capMs: 1000 } });
    } catch (err) {
      if (!(err instanceof KvqError && err.halted)) this.log('error', `handing ${job.type}/${job.id} back failed`, err);
    }
  }

  // ---- stopping -----------------------------------------------------------------------

  private async drain(): Promise<void> {
    this.stopping = true;
    this.stopController.abort(new ShutdownError('the worker is stopping'));
    this.wake();
    // Let running handlers finish within the grace; meanwhile the accept loops end (an
    // accept in flight is waited for: the jobs it brings are handed back at once).
    const graceTimer = new AbortController();
    const graceOver = sleep(this.grace * 1000, graceTimer.signal).catch(() => undefined);
    const allDone = (async () => {
      while ([...this.runs.values()].some((r) => !r.gone)) {
        await Promise.race([Promise.all([...this.runs.values()].map((r) => r.done)), sleep(50)]);
      }
    })();
    await Promise.race([allDone, graceOver]);
    graceTimer.abort();
    const late = [...this.runs.values()].filter((r) => !r.gone);
    if (late.length) this.log('warn', `grace over: handing ${late.length} running job(s) back`);
    await Promise.all(
      late.map(async (r) => {
        r.gone = true;
        clearInterval(r.timer);
        r.controller.abort(new ShutdownError());
        await this.handBack(r.job);
      }),
    );
    // Wait for accepts still in flight (the loops see `stopping` when they return).
    while (this.reserved > 0) await sleep(20);
    while (this.handingBack.size) await Promise.all([...this.handingBack]);
    if (this.memberTimer) clearInterval(this.memberTimer);
    if (this.register && this.token) {
      try {
        await this.client.deregisterWorker(this.workerType, this.id, this.token, { retry: { attempts: 3 } });
      } catch (err) {
        this.log('warn', 'unregistering failed (the server will declare this worker dead)', err);
      }
    }
  }
}
