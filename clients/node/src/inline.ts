/**
 * The inline mode, for users' own unit tests: the same handlers, run in this process on jobs
 * kept in memory, with no server. Failures and retries follow the type's policy and show in
 * the jobs exactly as the server would show them (attempts, errors, outcome).
 *
 * @packageDocumentation
 */

import { JobFailedError, KvqError, type JobErrorRecord } from './errors';
import type { AddOptions, JobPage, ListOptions } from './client';
import type { Backoff, Job, ListState, NewJob, TypeInfo, TypeSettings } from './types';
import type { Handler, JobContext } from './worker';
import { errorOf, retryWishes } from './util';

/** How to build an {@link InlineClient}. */
export interface InlineOptions {
  /** The handler of each job type (the same you give a {@link Worker}). */
  handlers: Record<string, Handler>;
  /** Types' settings (as {@link InlineClient.putType}); a type with a handler exists by default. */
  types?: Record<string, TypeSettings>;
}

/** Options of {@link InlineClient.drain}. */
export interface DrainOptions {
  /** Only jobs due now (default false: a retry or a scheduled job runs without waiting). */
  onlyDue?: boolean;
  /** Stop after this many runs (default 10000), in case a handler never succeeds. */
  maxRuns?: number;
}

const DEFAULT_BACKOFF: Backoff = { base: 1, factor: 2, cap: 3600, jitter: 0.2 };

interface Stored {
  job: Job;
  controller: AbortController | null; // the running run's, if any
}

/**
 * Jobs in memory and the handlers that run them, for tests: add jobs, then `drain()` (or await
 * `result()`) runs each pending job's handler in turn, one at a time, with the same signature
 * and context as under a {@link Worker}. A throw fails the attempt with the type's retry
 * policy (`maxAttempts`; a retry runs at once unless `onlyDue`); `cancel` or `remove` during a
 * run aborts the handler's signal.
 *
 * @example
 * ```ts
 * const kvq = new InlineClient({ handlers: { email: sendWelcome }, types: { email: { timeout: 30, maxAttempts: 3 } } });
 * await kvq.add('email', 'j1', { to: 'ada@example.com' });
 * assert.deepEqual(await kvq.result('email', 'j1'), { sent: true });
 * ```
 */
export class InlineClient {
  private readonly handlers: Record<string, Handler>;
  private readonly types = new Map<string, TypeInfo>();
  private readonly jobs = new Map<string, Map<string, Stored>>();
  private lockSeq = 0;

  /** @param options - handlers and types */
  constructor(options: InlineOptions) {
    this.handlers = { ...options.handlers };
    for (const t of Object.keys(this.handlers)) this.types.set(t, this.newType(t, { timeout: 30 }));
    for (const [t, s] of Object.entries(options.types ?? {})) this.putTypeSync(t, s);
  }

  private newType(type: string, s: TypeSettings): TypeInfo {
    return {
      type,
      timeout: s.timeout ?? 30,
      finished_retention: s.finishedRetention ?? null,
      max_lost_runs: s.maxLostRuns ?? null,
      max_attempts: s.maxAttempts ?? 25,
      backoff: { ...DEFAULT_BACKOFF, ...s.backoff },
    };
  }

  private putTypeSync(type: string, s: TypeSettings): TypeInfo {
    const old = this.types.get(type);
    if (!old && s.timeout === undefined) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    if (s.maxAttempts !== undefined && (!Number.isInteger(s.maxAttempts) || s.maxAttempts < 1)) {
      throw new KvqError(400, 'invalid_argument', 'max_attempts must be an integer from 1 to 1000000');
    }
    const t = old
      ? {
          ...old,
          timeout: s.timeout ?? old.timeout,
          max_attempts: s.maxAttempts ?? old.max_attempts,
          finished_retention: s.finishedRetention === undefined ? old.finished_retention : s.finishedRetention,
          max_lost_runs: s.maxLostRuns === undefined ? old.max_lost_runs : s.maxLostRuns,
          backoff: { ...old.backoff, ...s.backoff },
        }
      : this.newType(type, s);
    this.types.set(type, t);
    return { ...t, backoff: { ...t.backoff } };
  }

  /** Creates or changes a type, as {@link Client.putType}. */
  async putType(type: string, settings: TypeSettings): Promise<TypeInfo> {
    return this.putTypeSync(type, settings);
  }

  /** A type's settings; rejects `not_found` as the server would. */
  async getType(type: string): Promise<TypeInfo> {
    const t = this.types.get(type);
    if (!t) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    return { ...t, backoff: { ...t.backoff } };
  }

  private bucket(type: string): Map<string, Stored> {
    if (!this.types.has(type)) throw new KvqError(409, 'no_timeout', `type '${type}' has no timeout`);
    let b = this.jobs.get(type);
    if (!b) this.jobs.set(type, (b = new Map()));
    return b;
  }

  private stored(type: string, id: string): Stored {
    const s = this.jobs.get(type)?.get(id);
    if (!s) throw new KvqError(404, 'not_found', `job ${type}/${id} does not exist`);
    return s;
  }

  /** Adds a job, as {@link Client.add} (`ifExists` `update` or `keep`). */
  async add(type: string, id: string, data: unknown = {}, options: Omit<AddOptions, 'signal' | 'retry' | 'timeoutMs'> = {}): Promise<{ id: string; added: boolean }> {
    return { id, added: this.addSync(type, { id, data, ...options }) };
  }

  /** Adds many jobs, as {@link Client.addMany}. */
  async addMany(type: string, jobs: NewJob[], options: { ifExists?: 'update' | 'keep' } = {}): Promise<{ added: number; kept: string[] }> {
    this.bucket(type);
    let added = 0;
    const kept: string[] = [];
    for (const j of jobs) {
      if (this.addSync(type, { ifExists: options.ifExists, ...j })) added++;
      else kept.push(j.id);
    }
    return { added, kept };
  }

  private addSync(type: string, j: NewJob): boolean {
    const b = this.bucket(type);
    const now = Date.now();
    const at = j.scheduledTime instanceof Date ? j.scheduledTime.getTime() : j.scheduledTime ?? now;
    const old = b.get(j.id);
    if (old && j.ifExists === 'keep') return false;
    if (old?.controller) {
      // running: resubmitted, as the server does; the run's end puts it back to pending
      old.job.resubmitted = true;
      old.job.data = j.data ?? {};
      return true;
    }
    const job: Job = {
      type,
      id: j.id,
      state: 'pending',
      outcome: null,
      data: j.data ?? {},
      result: null,
      progress: null,
      scheduled_time: at,
      priority: j.priority ?? old?.job.priority ?? 0,
      resubmitted: false,
      worker: '',
      worker_type: '',
      attempts: 0,
      lost_runs: 0,
      errors: old && old.job.state === 'pending' ? old.job.errors : [],
      gave_up: false,
      created_at: old?.job.created_at ?? now,
      updated_at: now,
      started_at: null,
      ended_at: null,
    };
    if (old && old.job.state === 'pending') job.attempts = old.job.attempts;
    b.set(j.id, { job, controller: null });
    return true;
  }

  /** A copy of a job; rejects `not_found`. */
  async get(type: string, id: string): Promise<Job> {
    return structuredClone(this.stored(type, id).job);
  }

  /** A page of a type's jobs in id order, as {@link Client.list}. */
  async list(type: string, options: Omit<ListOptions, 'signal' | 'retry' | 'timeoutMs'> = {}): Promise<JobPage> {
    if (!this.types.has(type)) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    const limit = options.limit ?? 100;
    const all = [...(this.jobs.get(type)?.values() ?? [])]
      .map((s) => s.job)
      .filter((j) => matches(j, options.state))
      .filter((j) => options.worker === undefined || j.worker === options.worker)
      .sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0))
      .filter((j) => !options.cursor || j.id > options.cursor);
    const page = all.slice(0, limit);
    return {
      jobs: structuredClone(page),
      nextCursor: all.length > limit ? page[page.length - 1]!.id : '',
    };
  }

  /** Removes a job; a running handler's signal is aborted (`halted`). */
  async remove(type: string, id: string): Promise<void> {
    const s = this.stored(type, id);
    s.controller?.abort(new KvqError(409, 'halted', `job ${type}/${id} was removed`));
    this.jobs.get(type)!.delete(id);
  }

  /** Cancels a pending or running job; `wrong_state` if finished. */
  async cancel(type: string, id: string): Promise<Job> {
    const s = this.stored(type, id);
    if (s.job.state === 'finished') throw new KvqError(409, 'wrong_state', `job ${type}/${id} is finished`);
    s.controller?.abort(new KvqError(409, 'halted', `job ${type}/${id} was cancelled`));
    s.controller = null;
    this.end(s.job, 'cancelled');
    return structuredClone(s.job);
  }

  /** Runs a finished job again, attempts from zero, errors kept; `wrong_state` if not finished. */
  async rerun(type: string, id: string, options: { scheduledTime?: number | Date; priority?: number } = {}): Promise<Job> {
    const s = this.stored(type, id);
    if (s.job.state !== 'finished') throw new KvqError(409, 'wrong_state', `job ${type}/${id} is not finished`);
    const t = options.scheduledTime;
    Object.assign(s.job, {
      state: 'pending',
      outcome: null,
      result: null,
      progress: null,
      attempts: 0,
      lost_runs: 0,
      ended_at: null,
      gave_up: false,
      scheduled_time: t instanceof Date ? t.getTime() : t ?? Date.now(),
      priority: options.priority ?? s.job.priority,
      updated_at: Date.now(),
    });
    return structuredClone(s.job);
  }

  private end(job: Job, outcome: 'succeeded' | 'dead' | 'cancelled'): void {
    const now = Date.now();
    Object.assign(job, { state: 'finished', outcome, ended_at: now, updated_at: now });
  }

  /** The next job to run: lowest priority, then earliest scheduled time, then id. */
  private next(onlyDue: boolean): Stored | undefined {
    const now = Date.now();
    let best: Stored | undefined;
    for (const b of this.jobs.values()) {
      for (const s of b.values()) {
        const j = s.job;
        if (j.state !== 'pending' || !this.handlers[j.type]) continue;
        if (onlyDue && j.scheduled_time > now) continue;
        const bj = best?.job;
        if (
          !bj ||
          j.priority < bj.priority ||
          (j.priority === bj.priority && (j.scheduled_time < bj.scheduled_time || (j.scheduled_time === bj.scheduled_time && j.id < bj.id)))
        ) {
          best = s;
        }
      }
    }
    return best;
  }

  /**
   * Runs one pending job's handler (the next one a server would hand out).
   * @returns false if there was none to run
   */
  async runNext(options: { onlyDue?: boolean } = {}): Promise<boolean> {
    const s = this.next(options.onlyDue ?? false);
    if (!s) return false;
    await this.runOne(s);
    return true;
  }

  /**
   * Runs pending jobs, one at a time, until none is left (or `maxRuns`).
   * @returns how many runs it made
   */
  async drain(options: DrainOptions = {}): Promise<number> {
    const max = options.maxRuns ?? 10000;
    let runs = 0;
    while (runs < max && (await this.runNext(options))) runs++;
    return runs;
  }

  /**
   * Runs jobs until this one ends, then resolves with its result or rejects with
   * {@link JobFailedError} (dead or cancelled), as {@link Client.result}.
   */
  async result<T = unknown>(type: string, id: string): Promise<T> {
    for (let runs = 0; ; runs++) {
      const job = this.stored(type, id).job;
      if (job.state === 'finished') {
        if (job.outcome === 'succeeded') return structuredClone(job.result) as T;
        throw new JobFailedError(type, id, job.outcome!, job.errors.length ? structuredClone(job.errors[job.errors.length - 1]!) : null);
      }
      if (runs >= 10000 || !(await this.runNext())) {
        throw new KvqError(409, 'wrong_state', `job ${type}/${id} cannot end: nothing left to run it`);
      }
    }
  }

  private async runOne(s: Stored): Promise<void> {
    const job = s.job;
    const type = this.types.get(job.type)!;
    const controller = new AbortController();
    const now = Date.now();
    Object.assign(job, {
      state: 'running',
      attempts: job.attempts + 1,
      progress: null,
      worker: 'inline',
      started_at: now,
      updated_at: now,
      resubmitted: false,
    });
    s.controller = controller;
    const accepted = { type: job.type, id: job.id, lock: `inline-${++this.lockSeq}`, data: structuredClone(job.data) };
    const ctx: JobContext = {
      signal: controller.signal,
      progress: async (value: unknown) => {
        if (controller.signal.aborted) return false;
        job.progress = structuredClone(value);
        return true;
      },
    };
    let ok = false;
    let result: unknown;
    let error: unknown;
    try {
      result = await this.handlers[job.type]!(accepted, ctx);
      ok = true;
    } catch (err) {
      error = err;
    }
    if (controller.signal.aborted || s.controller !== controller) return; // cancelled or removed
    s.controller = null;
    if (job.resubmitted) {
      Object.assign(job, { state: 'pending', scheduled_time: Date.now(), updated_at: Date.now() });
      return;
    }
    if (ok) {
      job.result = result === undefined ? null : structuredClone(result);
      this.end(job, 'succeeded');
      return;
    }
    const e = errorOf(error);
    const wishes = retryWishes(error);
    const record: JobErrorRecord = { attempt: job.attempts, at: Date.now(), worker: 'inline', ...e };
    job.errors = [...job.errors, record].slice(-10);
    if (wishes.noRetry || job.attempts >= type.max_attempts) {
      this.end(job, 'dead');
      return;
    }
    const b = type.backoff;
    const d = Math.min(b.cap, b.base * b.factor ** (job.attempts - 1));
    const delay = wishes.retryIn ?? d * (1 - b.jitter * Math.random());
    Object.assign(job, { state: 'pending', scheduled_time: Date.now() + delay * 1000, updated_at: Date.now() });
  }
}

function matches(j: Job, state: ListState | undefined): boolean {
  switch (state) {
    case undefined:
      return true;
    case 'pending':
    case 'running':
    case 'finished':
      return j.state === state;
    case 'scheduled':
      return j.state === 'pending' && j.scheduled_time > Date.now();
    case 'due':
      return j.state === 'pending' && j.scheduled_time <= Date.now();
    default:
      return j.state === 'finished' && j.outcome === state;
  }
}
