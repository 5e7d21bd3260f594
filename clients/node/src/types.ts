// SPDX-License-Identifier: Apache-2.0
/**
 * The JSON objects of the kvq HTTP API (docs/http-api.md), as the server sends them: field
 * names are the server's (snake_case), times are milliseconds since the Unix epoch unless a
 * field says seconds.
 *
 * @packageDocumentation
 */

import type { JobErrorRecord } from './errors';

/** A job's state. */
export type JobState = 'pending' | 'running' | 'finished' | 'waiting';

/** How a finished job ended. */
export type JobOutcome = 'succeeded' | 'dead' | 'cancelled';

/** A selection for {@link Client.list}: a state, part of one, or an outcome. */
export type ListState = JobState | 'scheduled' | 'due' | JobOutcome;

/** A type's retry backoff (seconds). */
export interface Backoff {
  /** Delay after the first failure, seconds. */
  base: number;
  /** Each further failure multiplies it. */
  factor: number;
  /** The longest delay, seconds. */
  cap: number;
  /** Spread: the delay is drawn in [d·(1−jitter), d]. */
  jitter: number;
}

/** A job type and its settings, as `GET /v1/types/{type}` shows it. */
export interface TypeInfo {
  /** The type's name. */
  type: string;
  /** Seconds a running job may go without an update before its run is lost. */
  timeout: number;
  /** Seconds finished jobs are kept, or null for ever. */
  finished_retention: number | null;
  /** Lost runs in a row after which a job ends dead, or null for never. */
  max_lost_runs: number | null;
  /** Attempts before a job ends dead. */
  max_attempts: number;
  /** The retry backoff. */
  backoff: Backoff;
  /** Whether accepts of the type get nothing ({@link Client.pauseType}). */
  paused: boolean;
  /** When a pause given `forMs` ends by itself (ms), else null. */
  paused_until: number | null;
  /** The most jobs of the type that run at once across every server, or null for no limit. */
  max_running: number | null;
  /** At most `limit` accepts in any window of `period_ms` milliseconds, or null for no limit. */
  rate: { limit: number; period_ms: number } | null;
  /**
   * The most jobs of any one group that run at once, or null for no limit (absent from a server
   * without groups).
   */
  max_running_per_group?: number | null;
}

/** A type's rate limit, as {@link Client.putType} sends it. */
export interface RateLimit {
  /** At most this many accepts (1..1000) ... */
  limit: number;
  /** ... in any window of this many milliseconds (1..86400000, a day). */
  periodMs: number;
}

/** The settings {@link Client.putType} sends; absent fields are left as they are. */
export interface TypeSettings {
  /** Seconds a running job may go without an update (required for a new type). */
  timeout?: number;
  /** Seconds finished jobs are kept, or null to keep them until removed. */
  finishedRetention?: number | null;
  /** Lost runs in a row after which a job ends dead, or null for never. */
  maxLostRuns?: number | null;
  /** Attempts before a job ends dead (1: never retried). */
  maxAttempts?: number;
  /** Retry backoff fields to change. */
  backoff?: Partial<Backoff>;
  /** At most this many of the type's jobs run at once across every server (1..1000000), or null for no limit. */
  maxRunning?: number | null;
  /** At most `limit` accepts per window of `periodMs`, across every server, or null for no limit. */
  rate?: RateLimit | null;
  /** At most this many jobs of any one group run at once (1..1000000), or null for no limit. */
  maxRunningPerGroup?: number | null;
}

/** A group of a type, as {@link Client.groups} lists it. */
export interface GroupInfo {
  /** The group key. */
  group: string;
  /** Its running jobs. */
  running: number;
  /** Its pending jobs, due or not. */
  pending: number;
  /** Whether it holds its type's `max_running_per_group` running jobs. */
  full: boolean;
  /** When it is next in turn (ms), while it has pending jobs and is not full; else null. */
  in_turn_at: number | null;
}

/** What {@link Client.putSchedule} sets. */
export interface ScheduleSettings {
  /** The jobs' type (it must exist). */
  type: string;
  /** Five crontab fields, six with seconds first, or `@yearly`, `@monthly`, `@weekly`, `@daily`, `@hourly`. */
  cron: string;
  /** An IANA zone the cron's times are wall times in (default `UTC`). */
  timezone?: string;
  /** Each job's data (an object; default `{}`). */
  data?: Record<string, unknown>;
  /** Each job's priority (default 0). */
  priority?: number;
  /** What becomes of occurrences found late: `one` (the default), `all` or `none`. */
  catchUp?: 'one' | 'all' | 'none';
}

/** A schedule, as `GET /v1/schedules/{name}` shows it. */
export interface Schedule {
  /** Its name. */
  name: string;
  /** Its jobs' type. */
  type: string;
  /** Its cron expression. */
  cron: string;
  /** The zone of its cron's wall times. */
  timezone: string;
  /** Each job's data. */
  data: unknown;
  /** Each job's priority. */
  priority: number;
  /** `one`, `all` or `none`. */
  catch_up: 'one' | 'all' | 'none';
  /** The next occurrence to enqueue (ms), or null once the cron names no later time. */
  next_run: number | null;
  /** The latest occurrence enqueued (ms), or null. */
  last_run: number | null;
  /** The latest occurrence's job id, or null. */
  last_job_id: string | null;
  /** Occurrences enqueued since it was created. */
  enqueued: number;
  /** Occurrences left out (catch-up, or a failed add: see `last_error`). */
  skipped: number;
  /** Why the latest occurrence could not be enqueued, or null. */
  last_error: string | null;
  /** When it was created (ms). */
  created_at: number;
  /** When it was last changed (ms). */
  updated_at: number;
  /** The next five times its cron names after now (get and put only). */
  next_runs?: number[];
}

/** A job, as `GET /v1/jobs/{type}/{id}` returns it. */
export interface Job {
  /** Its type. */
  type: string;
  /** Its id. */
  id: string;
  /** `json`, or `bytes`: its data is then null and `body` or `body_base64` hold it (see jobBytes). */
  data_format?: 'json' | 'bytes';
  body?: string;
  body_base64?: string;
  /** The W3C trace context it was added with, when it has one. */
  traceparent?: string;
  /** Its own activity timeout in seconds; null for its type's. */
  timeout?: number | null;
  /** Its state. */
  state: JobState;
  /** How it ended, or null while not finished. */
  outcome: JobOutcome | null;
  /** Its input, as the producer added it. */
  data: unknown;
  /** What the worker's finish returned, or null. */
  result: unknown;
  /** The current run's latest progress, or null. */
  progress: unknown;
  /** When it is (or was) due. */
  scheduled_time: number;
  /** Its priority (lower runs first). */
  priority: number;
  /** Whether an add resubmitted it while it ran. */
  resubmitted: boolean;
  /** The worker of its current or last run. */
  worker: string;
  /** That worker's worker type. */
  worker_type: string;
  /** Attempts made since it was last added anew or rerun. */
  attempts: number;
  /** Runs lost in a row. */
  lost_runs: number;
  /** Its last 10 failed or lost attempts, oldest first. */
  errors: JobErrorRecord[];
  /** Deprecated: read `outcome`. */
  gave_up: boolean;
  /** When it was created. */
  created_at: number;
  /** When it last changed. */
  updated_at: number;
  /** When its current or last run was accepted, or null. */
  started_at: number | null;
  /** When it finished, or null. */
  ended_at: number | null;
  /** Its group, or null (or absent, from a server without groups) for none. */
  group?: string | null;
  /** Only on a job added with `dependsOn`: how many dependencies it was added with. */
  dependencies?: number;
  /** Only on a job added with `dependsOn`: how many it still waits on (`waiting` while not 0). */
  waiting_on?: number;
  /** Only on a job added with `dependsOn`: its policy. */
  on_dependency_failure?: DependencyFailure;
  /** True only on a job another was added depending on while it had not ended. */
  has_dependents?: boolean;
  /** The batch it is a member of, until it ends (absent for none). */
  batch?: string;
}

/** A job event (`wait`, the event stream): the job's state at one moment, or its removal. */
export interface JobEvent {
  /** Its type. */
  type: string;
  /** Its id. */
  id: string;
  /** False once the job is removed (the other fields are then absent). */
  found: boolean;
  /** Its state. */
  state?: JobState;
  /** How it ended, or null. */
  outcome?: JobOutcome | null;
  /** Its data. */
  data?: unknown;
  /** Its result, or null. */
  result?: unknown;
  /** Its attempts. */
  attempts?: number;
  /** A sequence number that grows with every change. */
  seq?: number;
  /** Deprecated. */
  gave_up?: boolean;
}

/** A job handed to a worker by accept: what a handler receives. */
export interface AcceptedJob<Data = unknown> {
  /** Its type. */
  type: string;
  /** Its id. */
  id: string;
  /** The lock of this run; whoever holds it can change the job: keep it secret. */
  lock: string;
  /** Its data (null for a job of bytes data); `Data` is what the caller says it is, unchecked. */
  data: Data;
  /** `json`, or `bytes`: then `body` (UTF-8 text) or `body_base64` hold it (see jobBytes). */
  data_format?: 'json' | 'bytes';
  body?: string;
  body_base64?: string;
  /** The W3C trace context it was added with, when it has one. */
  traceparent?: string;
  /** Which attempt this run is, 1 for the first (absent from a server before 0.2.0). */
  attempt?: number;
}

/** One entry of {@link Client.addMany}. */
export interface NewJob {
  /** The job's id. */
  id: string;
  /** Its data (any JSON object; default `{}`). */
  data?: unknown;
  /** Priority (lower runs first). */
  priority?: number;
  /** When it becomes due, ms since the epoch (a Date is accepted). */
  scheduledTime?: number | Date;
  /** What to do if it exists (default the batch's, else `update`). */
  ifExists?: 'update' | 'keep';
  /** Its group key (absent for none). */
  group?: string;
  /** Its W3C trace context (see {@link AddOptions.traceparent}). */
  traceparent?: string;
  /** Jobs it waits for (see {@link WorkflowOptions.dependsOn}); may name jobs of the same batch add. */
  dependsOn?: JobRef[];
  /** What a dependency that ends dead or cancelled does to it (default `cancel`). */
  onDependencyFailure?: DependencyFailure;
  /** The open batch it joins (see {@link WorkflowOptions.batch}). */
  batch?: string;
}

/** A job named by its type and id: a dependency, a batch's dead member. */
export interface JobRef {
  type: string;
  id: string;
}

/**
 * What becomes of a job when a dependency ends dead or cancelled (or is removed before it
 * ended): `cancel` (the default) cancels it, and the jobs waiting on it, transitively; `run`
 * counts the dependency as resolved.
 */
export type DependencyFailure = 'cancel' | 'run';

/** The workflow fields of an add (single or batch): docs/http-api.md, Dependencies and Batches. */
export interface WorkflowOptions {
  /**
   * Jobs this one waits for (at most 100, of any types, each existing or added by the same
   * batch add): it is added `waiting` and becomes pending once they have succeeded. Only a new
   * job, or a finished one added anew, takes dependencies (else `409 wrong_state`).
   */
  dependsOn?: JobRef[];
  /** What a dependency that ends dead or cancelled does to the job (default `cancel`). */
  onDependencyFailure?: DependencyFailure;
  /** The open batch the job joins: `404 not_found` if none, `409 wrong_state` if it is sealed. */
  batch?: string;
}

/** One dependency of a job, as {@link Client.dependencies} lists it. */
export interface Dependency {
  type: string;
  id: string;
  /** How it had ended when it resolved, or null while it has not. */
  resolved: JobOutcome | null;
  /** The dependency as `get` shows it now (its `result`), or null once removed. */
  job: Job | null;
}

/** When a batch adds its callback: once every member ended (`complete`), or only if all succeeded. */
export type BatchOn = 'complete' | 'success';

/** A batch's state: `open` (jobs may join), `sealed`, `fired` (the callback was added), `skipped`. */
export type BatchState = 'open' | 'sealed' | 'fired' | 'skipped';

/**
 * The job a batch adds once it is sealed and every member has ended. Its data gets a field
 * `batch`: `{id, members, succeeded, dead, cancelled, dead_jobs}`.
 */
export interface BatchCallback {
  type: string;
  id: string;
  /** Its data (a JSON object; absent for none). */
  data?: Record<string, unknown>;
}

/** A batch's counts: every job that joined, those not yet ended, and those ended by outcome. */
export interface BatchCounts {
  members: number;
  unfinished: number;
  succeeded: number;
  dead: number;
  cancelled: number;
}

/** A batch, as `putBatch`, `sealBatch` and `getBatch` return it. */
export interface Batch {
  id: string;
  callback: BatchCallback;
  on: BatchOn;
  state: BatchState;
  sealed: boolean;
  fired: boolean;
  counts: BatchCounts;
  /** When it was created (ms). */
  created_at: number;
  /** When it fired or was skipped (ms), null before. */
  settled_at: number | null;
}

/** A registered worker, as `GET /v1/workers/{wtype}` lists it. */
export interface WorkerInfo {
  /** Its id. */
  id: string;
  /** What it registered with. */
  info: unknown;
  /** When it registered. */
  registered_at: number;
  /** Its last heartbeat. */
  last_heartbeat: number;
  /** Seconds without a heartbeat after which it is declared dead. */
  health_timeout: number;
}

/** How many jobs of a type are in each state ({@link Client.counts}), each counted up to 100,000. */
export interface Counts {
  /** Pending, due or not (includes `scheduled`). */
  pending: number;
  /** Pending and not yet due. */
  scheduled: number;
  running: number;
  /** Finished in any outcome (includes `dead` and `cancelled`). */
  finished: number;
  dead: number;
  cancelled: number;
}

/** One type in {@link Stats}: its settings, its counts, and this server's counters for it. */
export interface TypeStats extends TypeInfo, Counts {
  /** Jobs of it handed out, and finished, through this server since it started. */
  accepts: number;
  finishes: number;
}

/** `GET /v1/stats` ({@link Client.stats}). */
export interface Stats {
  /** The server's clock (ms since the epoch), read with the counters. */
  time: number;
  /** Jobs handed out, and finished, through this server since it started. */
  accepts: number;
  finishes: number;
  /** Every type that has a timeout, by name. */
  types: TypeStats[];
  /** Every worker type that ever had a worker: its live workers and membership version. */
  worker_types: { type: string; version: number; workers: number }[];
}
