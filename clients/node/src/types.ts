/**
 * The JSON objects of the kvq HTTP API (docs/http-api.md), as the server sends them: field
 * names are the server's (snake_case), times are milliseconds since the Unix epoch unless a
 * field says seconds.
 *
 * @packageDocumentation
 */

import type { JobErrorRecord } from './errors';

/** A job's state. */
export type JobState = 'pending' | 'running' | 'finished';

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
}

/** A job, as `GET /v1/jobs/{type}/{id}` returns it. */
export interface Job {
  /** Its type. */
  type: string;
  /** Its id. */
  id: string;
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
export interface AcceptedJob {
  /** Its type. */
  type: string;
  /** Its id. */
  id: string;
  /** The lock of this run; whoever holds it can change the job: keep it secret. */
  lock: string;
  /** Its data. */
  data: unknown;
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
