// SPDX-License-Identifier: Apache-2.0
/**
 * The inline mode, for users' own unit tests: the same handlers, run in this process on jobs
 * kept in memory, with no server. Failures and retries follow the type's policy and show in
 * the jobs exactly as the server would show them (attempts, errors, outcome). Time is the
 * inline client's own clock, and flow control (pause, `maxRunning`, `rate`, groups) holds as on
 * a server.
 *
 * @packageDocumentation
 */

import { JobFailedError, KvqError, type JobErrorRecord } from './errors';
import type { AddOptions, GroupPage, GroupsOptions, JobPage, ListOptions } from './client';
import type { Backoff, Counts, GroupInfo, Job, ListState, NewJob, TypeInfo, TypeSettings } from './types';
import type { Handler, JobContext } from './worker';
import { errorOf, retryWishes } from './util';

/** How to build an {@link InlineClient}. */
export interface InlineOptions {
  /** The handler of each job type (the same you give a {@link Worker}). */
  handlers: Record<string, Handler>;
  /** Types' settings (as {@link InlineClient.putType}); a type with a handler exists by default. */
  types?: Record<string, TypeSettings>;
  /**
   * How many handlers {@link InlineClient.drain} runs at once (default 1: one at a time, in
   * order), never more of a type than its `maxRunning` nor of a group than its type's
   * `maxRunningPerGroup`.
   */
  concurrency?: number;
}

/** Options of {@link InlineClient.drain}. */
export interface DrainOptions {
  /**
   * Only jobs due by the inline clock, which it leaves alone (default false: when nothing is
   * due, the clock moves to the next job's time — a scheduled job, a retry, a pause's end — and
   * the drain goes on, so jobs run in the order of their times without waiting).
   */
  onlyDue?: boolean;
  /** Stop after this many runs (default 10000), in case a handler never succeeds. */
  maxRuns?: number;
  /** Handlers at once for this drain (default the client's `concurrency`). */
  concurrency?: number;
}

/** A type as the inline client keeps it: its settings and flow control. */
type InlineType = TypeInfo & { max_running_per_group: number | null };

const DEFAULT_BACKOFF: Backoff = { base: 1, factor: 2, cap: 3600, jitter: 0.2 };

interface Stored {
  job: Job;
  controller: AbortController | null; // the running run's, if any
  order: number; // order of adds
}

/**
 * Jobs in memory and the handlers that run them, for tests: add jobs, then `drain()` (or await
 * `result()`) runs each pending job's handler in turn, one at a time, with the same signature
 * and context as under a {@link Worker}. A throw fails the attempt with the type's retry
 * policy (`maxAttempts`, the backoff); `cancel` or `remove` during a run aborts the handler's
 * signal.
 *
 * Time is the client's own clock, {@link InlineClient.now}: the real time plus what
 * {@link InlineClient.advance} and the drains moved it. A job runs only once that clock reaches
 * its `scheduled_time` (a `scheduledTime` given to `add`, a retry's backoff). `drain()` runs
 * the due jobs, then moves the clock to the next job's time and goes on until nothing is left,
 * so jobs run in the order of their times and a test never waits; `drain({ onlyDue: true })`
 * leaves the clock alone, so a test can see that a job scheduled later has not run yet.
 * Within a type, due jobs run in the server's order: the lower priority first; within a
 * priority each group with due jobs stands in line as one entry at its `in_turn_at`, the later
 * of its first pending job's time (its best by priority, then time) and its last run's start,
 * so a group just served goes to the back; jobs without a group are not one more group: each
 * stands at its own scheduled time, and a group goes before it only if its `in_turn_at` is
 * strictly earlier (a tie goes to the job without a group). A group whose first job is not due
 * yet is not in line, even if a worse-priority job of it is. Between types, the lower priority
 * runs first, then the earlier place in line, then the earlier add. A paused type's jobs do
 * not run (`pauseType`; with `forMs` the pause ends by the inline clock); `maxRunning` and
 * `maxRunningPerGroup` cap how many run at once under `concurrency`; `rate` counts runs
 * started per window of the inline clock. Schedules are not run inline.
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
  private readonly types = new Map<string, InlineType>();
  private readonly jobs = new Map<string, Map<string, Stored>>();
  private readonly concurrency: number;
  private readonly starts = new Map<string, number[]>(); // type -> runs started in its rate window
  private readonly turns = new Map<string, { seq: number; at: number }>(); // type + group -> last start
  private lockSeq = 0;
  private addSeq = 0;
  private turnSeq = 0;
  private offsetMs = 0;

  /** @param options - handlers, types and concurrency */
  constructor(options: InlineOptions) {
    this.handlers = { ...options.handlers };
    this.concurrency = Math.max(1, options.concurrency ?? 1);
    for (const t of Object.keys(this.handlers)) this.types.set(t, this.newType(t, { timeout: 30 }));
    for (const [t, s] of Object.entries(options.types ?? {})) this.putTypeSync(t, s);
  }

  /** The inline clock, ms since the epoch: the real time plus what `advance` and the drains moved it. */
  now(): number {
    return Date.now() + this.offsetMs;
  }

  /** Moves the inline clock forward by `ms`, so jobs scheduled up to then are due. */
  advance(ms: number): void {
    if (ms > 0) this.offsetMs += ms;
  }

  private newType(type: string, s: TypeSettings): InlineType {
    return {
      type,
      timeout: s.timeout ?? 30,
      finished_retention: s.finishedRetention ?? null,
      max_lost_runs: s.maxLostRuns ?? null,
      max_attempts: s.maxAttempts ?? 25,
      backoff: { ...DEFAULT_BACKOFF, ...s.backoff },
      paused: false,
      paused_until: null,
      max_running: null,
      rate: null,
      max_running_per_group: null,
    };
  }

  private putTypeSync(type: string, s: TypeSettings): TypeInfo {
    const old = this.types.get(type);
    if (!old && s.timeout === undefined) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    if (s.maxAttempts !== undefined && (!Number.isInteger(s.maxAttempts) || s.maxAttempts < 1)) {
      throw new KvqError(400, 'invalid_argument', 'max_attempts must be an integer from 1 to 1000000');
    }
    for (const [name, v] of [['max_running', s.maxRunning], ['max_running_per_group', s.maxRunningPerGroup]] as const) {
      if (v !== undefined && v !== null && (!Number.isInteger(v) || v < 1 || v > 1000000)) {
        throw new KvqError(400, 'invalid_argument', `${name} must be an integer from 1 to 1000000, or null`);
      }
    }
    if (s.rate) {
      if (!Number.isInteger(s.rate.limit) || s.rate.limit < 1 || s.rate.limit > 1000) {
        throw new KvqError(400, 'invalid_argument', 'rate.limit must be an integer from 1 to 1000');
      }
      if (!Number.isInteger(s.rate.periodMs) || s.rate.periodMs < 1 || s.rate.periodMs > 86400000) {
        throw new KvqError(400, 'invalid_argument', 'rate.period_ms must be an integer from 1 to 86400000');
      }
    }
    const base = old ?? this.newType(type, s);
    const t: InlineType = {
      ...base,
      timeout: s.timeout ?? base.timeout,
      max_attempts: s.maxAttempts ?? base.max_attempts,
      finished_retention: s.finishedRetention === undefined ? base.finished_retention : s.finishedRetention,
      max_lost_runs: s.maxLostRuns === undefined ? base.max_lost_runs : s.maxLostRuns,
      backoff: { ...base.backoff, ...s.backoff },
      max_running: s.maxRunning === undefined ? base.max_running : s.maxRunning,
      rate: s.rate === undefined ? base.rate : s.rate === null ? null : { limit: s.rate.limit, period_ms: s.rate.periodMs },
      max_running_per_group: s.maxRunningPerGroup === undefined ? base.max_running_per_group : s.maxRunningPerGroup,
    };
    this.types.set(type, t);
    return this.typeView(t);
  }

  private typeView(t: InlineType): TypeInfo {
    this.isPaused(t);
    return structuredClone(t);
  }

  /** Creates or changes a type, as {@link Client.putType}. */
  async putType(type: string, settings: TypeSettings): Promise<TypeInfo> {
    return this.putTypeSync(type, settings);
  }

  /** A type's settings; rejects `not_found` as the server would. */
  async getType(type: string): Promise<TypeInfo> {
    return this.typeView(this.typeOf(type));
  }

  /** How many of the type's jobs are in each state, as {@link Client.counts}, by the inline clock. */
  async counts(type: string): Promise<Counts> {
    this.typeOf(type);
    const out: Counts = { pending: 0, scheduled: 0, running: 0, finished: 0, dead: 0, cancelled: 0 };
    const now = this.now();
    for (const { job } of this.jobs.get(type)?.values() ?? []) {
      out[job.state]++;
      if (job.state === 'pending' && job.scheduled_time > now) out.scheduled++;
      if (job.outcome === 'dead' || job.outcome === 'cancelled') out[job.outcome]++;
    }
    return out;
  }

  private typeOf(type: string): InlineType {
    const t = this.types.get(type);
    if (!t) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    return t;
  }

  /** Whether the type is paused now (a pause given `forMs` ends by the inline clock). */
  private isPaused(t: InlineType): boolean {
    if (t.paused && t.paused_until !== null && this.now() >= t.paused_until) {
      t.paused = false;
      t.paused_until = null;
    }
    return t.paused;
  }

  /**
   * Pauses a type, as {@link Client.pauseType}: its jobs do not run until `resumeType`, or for
   * `forMs` of the inline clock (a `drain()` moves the clock past the pause's end when nothing
   * else is left to run).
   */
  async pauseType(type: string, options: { forMs?: number } = {}): Promise<TypeInfo> {
    const t = this.typeOf(type);
    const f = options.forMs;
    if (f !== undefined && (!Number.isInteger(f) || f < 1 || f > 315360000000)) {
      throw new KvqError(400, 'invalid_argument', 'for_ms must be an integer from 1 to 315360000000');
    }
    t.paused = true;
    t.paused_until = f === undefined ? null : this.now() + f;
    return this.typeView(t);
  }

  /** Ends a type's pause, as {@link Client.resumeType}. */
  async resumeType(type: string): Promise<TypeInfo> {
    const t = this.typeOf(type);
    t.paused = false;
    t.paused_until = null;
    return this.typeView(t);
  }

  /**
   * A page of a type's groups that have pending or running jobs, by name, as
   * {@link Client.groups} (`in_turn_at`: its first pending job's time, by priority then time,
   * or its last run's start if later, while it has pending jobs and is not full).
   */
  async groups(type: string, options: Omit<GroupsOptions, 'signal' | 'retry' | 'timeoutMs'> = {}): Promise<GroupPage> {
    const t = this.typeOf(type);
    const stats = new Map<string, GroupInfo>();
    const firsts = new Map<string, Stored>();
    for (const s of this.jobs.get(type)?.values() ?? []) {
      const job = s.job;
      if (job.group == null || job.state === 'finished') continue;
      let g = stats.get(job.group);
      if (!g) stats.set(job.group, (g = { group: job.group, running: 0, pending: 0, full: false, in_turn_at: null }));
      if (job.state === 'running') g.running++;
      else {
        g.pending++;
        const f = firsts.get(job.group);
        if (!f || firstBefore(s, f)) firsts.set(job.group, s);
      }
    }
    const names = [...stats.keys()].filter((g) => !options.after || g > options.after).sort();
    const limit = options.limit ?? 100;
    const groups = names.slice(0, limit).map((name) => {
      const g = stats.get(name)!;
      g.full = t.max_running_per_group !== null && g.running >= t.max_running_per_group;
      if (g.full || g.pending === 0) g.in_turn_at = null;
      else g.in_turn_at = this.place(type, name, firsts.get(name)!.job).at;
      return g;
    });
    return { groups, nextAfter: names.length > limit ? groups[groups.length - 1]!.group : '' };
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
    for (const j of jobs) {
      const g = j.group;
      if (g !== undefined && (typeof g !== 'string' || g.length === 0 || Buffer.byteLength(g) > 128 || /[\x00-\x1f\x7f]/.test(g))) {
        throw new KvqError(400, 'invalid_argument', 'group must be 1..128 bytes without control characters');
      }
    }
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
    const now = this.now();
    const g = j.group;
    if (g !== undefined && (typeof g !== 'string' || g.length === 0 || Buffer.byteLength(g) > 128 || /[\x00-\x1f\x7f]/.test(g))) {
      throw new KvqError(400, 'invalid_argument', 'group must be 1..128 bytes without control characters');
    }
    const at = j.scheduledTime instanceof Date ? j.scheduledTime.getTime() : j.scheduledTime ?? now;
    const old = b.get(j.id);
    if (old && j.ifExists === 'keep') return false;
    if (old?.controller) {
      // running: resubmitted, as the server does; the run's end puts it back to pending
      old.job.resubmitted = true;
      old.job.data = j.data ?? {};
      return true;
    }
    this.forgetTurn(type, g);
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
      group: g ?? null,
    };
    if (old && old.job.state === 'pending') job.attempts = old.job.attempts;
    b.set(j.id, { job, controller: null, order: ++this.addSeq });
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
      .filter((j) => matches(j, options.state, this.now()))
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
    this.forgetTurn(type, s.job.group);
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
      scheduled_time: t instanceof Date ? t.getTime() : t ?? this.now(),
      priority: options.priority ?? s.job.priority,
      updated_at: this.now(),
    });
    return structuredClone(s.job);
  }

  private end(job: Job, outcome: 'succeeded' | 'dead' | 'cancelled'): void {
    const now = this.now();
    Object.assign(job, { state: 'finished', outcome, ended_at: now, updated_at: now });
  }

  /** Runs started within the type's rate window (pruned to it), or undefined without a rate. */
  private rateStarts(t: InlineType, now: number): number[] | undefined {
    if (!t.rate) return undefined;
    const starts = (this.starts.get(t.type) ?? []).filter((at) => at > now - t.rate!.period_ms);
    this.starts.set(t.type, starts);
    return starts;
  }

  /**
   * The next job a server would hand out now, under flow control: due, its type not paused,
   * below `max_running`, `max_running_per_group` and `rate`. Within a type, as the server's
   * accept picks: by priority first; within a priority each group stands in line once, at its
   * `in_turn_at` (its first pending job's time, by priority then time, or its last run's start
   * if later), and each job without a group at its own scheduled time, a group going first
   * only if its `in_turn_at` is strictly earlier; a group whose first job is not due is not in
   * line. Between types: lowest priority, then the earlier place in line, then first added.
   */
  private next(): Stored | undefined {
    const now = this.now();
    const running = new Map<string, number>();
    for (const b of this.jobs.values()) {
      for (const { job } of b.values()) {
        if (job.state !== 'running') continue;
        running.set(job.type, (running.get(job.type) ?? 0) + 1);
        if (job.group != null) running.set(turnKey(job.type, job.group), (running.get(turnKey(job.type, job.group)) ?? 0) + 1);
      }
    }
    let best: { s: Stored; at: number } | undefined;
    for (const [type, b] of this.jobs) {
      if (!this.handlers[type]) continue;
      const t = this.types.get(type)!;
      if (this.isPaused(t)) continue;
      if (t.max_running !== null && (running.get(type) ?? 0) >= t.max_running) continue;
      const starts = this.rateStarts(t, now);
      if (starts && starts.length >= t.rate!.limit) continue;
      const head = this.head(b, t, now, running);
      if (!head) continue;
      const [j, bj] = [head.s, best?.s];
      if (
        !bj ||
        j.job.priority < bj.job.priority ||
        (j.job.priority === bj.job.priority && (head.at < best!.at || (head.at === best!.at && j.order < bj.order)))
      ) {
        best = head;
      }
    }
    return best?.s;
  }

  /** The job an accept of the type would take now, and where it stands (its time or its group's in_turn_at). */
  private head(b: Map<string, Stored>, t: InlineType, now: number, running: Map<string, number>): { s: Stored; at: number } | undefined {
    let ungrouped: Stored | undefined;
    const firsts = new Map<string, Stored>();
    for (const s of b.values()) {
      const j = s.job;
      if (j.state !== 'pending') continue;
      if (j.group == null) {
        if (j.scheduled_time <= now && (!ungrouped || firstBefore(s, ungrouped))) ungrouped = s;
        continue;
      }
      const f = firsts.get(j.group);
      if (!f || firstBefore(s, f)) firsts.set(j.group, s);
    }
    let turn: { s: Stored; place: Place } | undefined;
    for (const [group, first] of firsts) {
      if (t.max_running_per_group !== null && (running.get(turnKey(t.type, group)) ?? 0) >= t.max_running_per_group) continue; // full
      const place = this.place(t.type, group, first.job);
      if (place.at > now) continue; // its first job, or its turn, is not due
      if (!turn || placeBefore(place, turn.place)) turn = { s: first, place };
    }
    const u = ungrouped?.job;
    if (turn && (!u || turn.place.priority < u.priority || (turn.place.priority === u.priority && turn.place.at < u.scheduled_time))) {
      return { s: turn.s, at: turn.place.at };
    }
    return ungrouped && { s: ungrouped, at: ungrouped.job.scheduled_time };
  }

  /**
   * Where a group whose first pending job is `first` stands in line: at its in_turn_at, that
   * job's time or its last run's start if later (then, among groups in turn at the same
   * millisecond, by name those whose turn is their first job's time, before those whose turn
   * is a run's start, in start order: the server's microseconds).
   */
  private place(type: string, group: string, first: Job): Place {
    const last = this.turns.get(turnKey(type, group));
    if (last && last.at >= first.scheduled_time) return { priority: first.priority, at: last.at, seq: last.seq, name: '' };
    return { priority: first.priority, at: first.scheduled_time, seq: 0, name: group };
  }

  /**
   * Forgets a group's last run's start if it has no pending or running job (the server then
   * deletes the group's row), so a job added to it later stands at its own time.
   */
  private forgetTurn(type: string, group: string | null | undefined): void {
    if (group == null || !this.turns.has(turnKey(type, group))) return;
    for (const { job } of this.jobs.get(type)?.values() ?? []) {
      if (job.group === group && job.state !== 'finished') return;
    }
    this.turns.delete(turnKey(type, group));
  }

  /**
   * Moves the inline clock to the earliest time after now that a pending job can start (its
   * scheduled time, a pause's end, room in its rate window). @returns false if there is none
   */
  private advanceToNext(): boolean {
    const now = this.now();
    let next = Infinity;
    for (const b of this.jobs.values()) {
      for (const { job } of b.values()) {
        if (job.state !== 'pending' || !this.handlers[job.type]) continue;
        const t = this.types.get(job.type)!;
        let at = job.scheduled_time;
        if (this.isPaused(t)) {
          if (t.paused_until === null) continue;
          at = Math.max(at, t.paused_until);
        }
        const starts = this.rateStarts(t, now);
        if (starts && starts.length >= t.rate!.limit) at = Math.max(at, starts[starts.length - t.rate!.limit]! + t.rate!.period_ms);
        if (at > now) next = Math.min(next, at);
      }
    }
    if (next === Infinity) return false;
    this.offsetMs += next - now;
    return true;
  }

  /**
   * Runs one pending job's handler: the next one a server would hand out. Without `onlyDue`,
   * when none is due, it first moves the inline clock to the next job's time.
   * @returns false if there was none to run
   */
  async runNext(options: { onlyDue?: boolean } = {}): Promise<boolean> {
    let s = this.next();
    if (!s && !options.onlyDue && this.advanceToNext()) s = this.next();
    if (!s) return false;
    await this.runOne(s);
    return true;
  }

  /**
   * Runs pending jobs until none is left to run (or `maxRuns`): the due ones, then, unless
   * `onlyDue`, moving the inline clock to the next job's time, and so on. Up to `concurrency`
   * handlers run at once.
   * @returns how many runs it made
   */
  async drain(options: DrainOptions = {}): Promise<number> {
    return this.runUntil(options, () => false);
  }

  private async runUntil(options: DrainOptions, stop: () => boolean): Promise<number> {
    const max = options.maxRuns ?? 10000;
    const limit = Math.max(1, options.concurrency ?? this.concurrency);
    const active = new Set<Promise<void>>();
    let runs = 0;
    for (;;) {
      let started = false;
      while (runs < max && active.size < limit && !stop()) {
        const s = this.next();
        if (!s) break;
        runs++;
        started = true;
        const p: Promise<void> = this.runOne(s).finally(() => active.delete(p));
        active.add(p);
      }
      if (active.size > 0) {
        await Promise.race(active);
        continue;
      }
      if (!started && (runs >= max || stop() || options.onlyDue || !this.advanceToNext())) return runs;
    }
  }

  /**
   * Runs jobs (as `drain()`, moving the inline clock as needed, so jobs due before it run
   * first) until this one ends, then resolves with its result or rejects with
   * {@link JobFailedError} (dead or cancelled), as {@link Client.result}. Rejects
   * `wrong_state` if it cannot end (its type paused until resumed, or `maxRuns` reached).
   */
  async result<T = unknown>(type: string, id: string): Promise<T> {
    this.stored(type, id);
    const ended = () => {
      const s = this.jobs.get(type)?.get(id);
      return !s || s.job.state === 'finished';
    };
    await this.runUntil({}, ended);
    const job = this.stored(type, id).job;
    if (job.state === 'finished') {
      if (job.outcome === 'succeeded') return structuredClone(job.result) as T;
      throw new JobFailedError(type, id, job.outcome!, job.errors.length ? structuredClone(job.errors[job.errors.length - 1]!) : null);
    }
    throw new KvqError(409, 'wrong_state', `job ${type}/${id} cannot end: nothing left to run it`);
  }

  private async runOne(s: Stored): Promise<void> {
    const job = s.job;
    const type = this.types.get(job.type)!;
    const controller = new AbortController();
    const now = this.now();
    this.rateStarts(type, now)?.push(now);
    if (job.group != null) this.turns.set(turnKey(job.type, job.group), { seq: ++this.turnSeq, at: now });
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
    const attempt = job.attempts;
    const ctx: JobContext = {
      signal: controller.signal,
      progress: async (value: unknown) => {
        if (controller.signal.aborted) return false;
        job.progress = structuredClone(value);
        return true;
      },
      attempt: async () => attempt,
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
      Object.assign(job, { state: 'pending', scheduled_time: this.now(), updated_at: this.now() });
      return;
    }
    if (ok) {
      job.result = result === undefined ? null : structuredClone(result);
      this.end(job, 'succeeded');
      return;
    }
    const e = errorOf(error);
    const wishes = retryWishes(error);
    const record: JobErrorRecord = { attempt: job.attempts, at: this.now(), worker: 'inline', ...e };
    job.errors = [...job.errors, record].slice(-10);
    if (wishes.noRetry || job.attempts >= type.max_attempts) {
      this.end(job, 'dead');
      return;
    }
    const b = type.backoff;
    const d = Math.min(b.cap, b.base * b.factor ** (job.attempts - 1));
    const delay = wishes.retryIn ?? d * (1 - b.jitter * Math.random());
    Object.assign(job, { state: 'pending', scheduled_time: this.now() + Math.round(delay * 1000), updated_at: this.now() });
  }
}

/** Where a group stands in line (see InlineClient.place). */
type Place = { priority: number; at: number; seq: number; name: string };

function placeBefore(p: Place, q: Place): boolean {
  if (p.priority !== q.priority) return p.priority < q.priority;
  if (p.at !== q.at) return p.at < q.at;
  if (p.seq !== q.seq) return p.seq < q.seq; // 0 (in turn at its first job's time) first
  return p.name < q.name;
}

/** A type's pending jobs as the server's indexes order them: priority, scheduled time, id. */
function firstBefore(a: Stored, b: Stored): boolean {
  if (a.job.priority !== b.job.priority) return a.job.priority < b.job.priority;
  if (a.job.scheduled_time !== b.job.scheduled_time) return a.job.scheduled_time < b.job.scheduled_time;
  return a.job.id < b.job.id;
}

function turnKey(type: string, group: string | null): string {
  return group === null ? `${type}\u0000` : `${type}\u0000${group}\u0000`;
}

function matches(j: Job, state: ListState | undefined, now: number): boolean {
  switch (state) {
    case undefined:
      return true;
    case 'pending':
    case 'running':
    case 'finished':
      return j.state === state;
    case 'scheduled':
      return j.state === 'pending' && j.scheduled_time > now;
    case 'due':
      return j.state === 'pending' && j.scheduled_time <= now;
    default:
      return j.state === 'finished' && j.outcome === state;
  }
}
