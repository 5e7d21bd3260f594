// SPDX-License-Identifier: Apache-2.0
/**
 * kvq's TypeScript client: a {@link Client} for the HTTP API of `kvq serve`, a {@link Worker}
 * runner that runs handlers on jobs correctly (heartbeats, fencing, failures, graceful
 * shutdown, retries), and an {@link InlineClient}, a client of a `kvq serve --ephemeral` it
 * starts, to run the same handlers in unit tests against the real server.
 *
 * @packageDocumentation
 */

export { Client, jobBytes } from './client';
export type {
  AcceptOptions,
  NextOptions,
  AddOptions,
  CallOptions,
  ClientOptions,
  FailAnswer,
  FailError,
  GroupPage,
  GroupsOptions,
  JobPage,
  ListOptions,
  RawAnswer,
  RetryOptions,
} from './client';
export { KvqError, JobFailedError } from './errors';
export type { JobErrorRecord } from './errors';
export { Worker, ShutdownError, workerDefaults } from './worker';
export type { Handler, JobContext, Logger, WorkerEvents, WorkerOptions } from './worker';
export { InlineClient, findKvq } from './inline';
export type { DrainOptions, InlineOptions } from './inline';
export type {
  AcceptedJob,
  Backoff,
  Batch,
  BatchCallback,
  BatchCounts,
  BatchOn,
  BatchState,
  Counts,
  Dependency,
  DependencyFailure,
  GroupInfo,
  Job,
  JobEvent,
  JobOutcome,
  JobRef,
  JobState,
  ListState,
  NewJob,
  RateLimit,
  Schedule,
  ScheduleSettings,
  Stats,
  TypeInfo,
  TypeStats,
  TypeSettings,
  WorkerInfo,
  WorkflowOptions,
} from './types';
