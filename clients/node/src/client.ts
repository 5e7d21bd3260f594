// SPDX-License-Identifier: Apache-2.0
/**
 * The kvq HTTP client: every route of docs/http-api.md as a Promise-returning method.
 *
 * @packageDocumentation
 */

import { JobFailedError, KvqError } from './errors';
import type {
  AcceptedJob,
  Batch,
  BatchCallback,
  BatchOn,
  Counts,
  Dependency,
  GroupInfo,
  Job,
  JobEvent,
  ListState,
  NewJob,
  Schedule,
  ScheduleSettings,
  Stats,
  TypeInfo,
  TypeSettings,
  WorkerInfo,
  WorkflowOptions,
} from './types';
import { traceHeaders } from './otel';
import { abortReason, anySignal, backoffMs, sleep } from './util';

/** How a call retries `503` answers and network errors: jittered exponential backoff. */
export interface RetryOptions {
  /** Tries in all, the first included (default 5; `Infinity` to retry until aborted; 1: never retry). */
  attempts?: number;
  /** First delay, ms (default 100); each retry doubles it, jittered down by up to half. */
  baseMs?: number;
  /** Longest delay, ms (default 5000). */
  capMs?: number;
}

/** Options of every call. */
export interface CallOptions {
  /** Aborts the call (and its retries): it rejects with the signal's reason. */
  signal?: AbortSignal;
  /** This call's retry policy, instead of the client's. */
  retry?: RetryOptions;
  /** Give up on one try after this many ms without an answer (default: the client's). */
  timeoutMs?: number;
}

/** A call's options as the client sends it: with headers of its own (an add's trace context). */
type SendOptions = CallOptions & { headers?: Record<string, string> };

/** How to build a {@link Client}. */
export interface ClientOptions {
  /** The server's base URL (default `KVQ_URL` from the environment, else `http://127.0.0.1:7411`). */
  url?: string;
  /** Bearer token (default `KVQ_TOKEN` from the environment, if set). */
  token?: string;
  /** Default retry policy of every call. */
  retry?: RetryOptions;
  /** Default per-try timeout in ms for calls that do not long-poll (default 30000). */
  timeoutMs?: number;
  /** The fetch to use (default the global one, Node 18+). */
  fetch?: typeof fetch;
}

/** Options of {@link Client.add}. */
export interface AddOptions extends CallOptions, WorkflowOptions {
  /** Priority (lower runs first; default 0). */
  priority?: number;
  /** When it becomes due, ms since the epoch or a Date (default now). */
  scheduledTime?: number | Date;
  /** `update` (the default: add, replace or resubmit) or `keep` (leave an existing job alone). */
  ifExists?: 'update' | 'keep';
  /**
   * The job's group key (a tenant, a customer: 1–128 bytes, no control characters); absent for
   * none. Accepts take turns between a type's groups, and the type's `maxRunningPerGroup` caps
   * each group's running jobs.
   */
  group?: string;
  /**
   * The job's own activity timeout in seconds (more than 0, at most 7 days), replacing its
   * type's for this job: a run with no heartbeat for that long is lost.
   */
  jobTimeout?: number;
  /**
   * Bytes data instead of `data` (a string goes as its UTF-8 bytes): the job's `data_format`
   * is then `bytes`, its `data` null; {@link jobBytes} gives the bytes back.
   */
  body?: Uint8Array | string;
  /**
   * A W3C trace context (`00-<32 hex>-<16 hex>-<2 hex>`) to keep with the job and hand to its
   * worker; an invalid one is `400 invalid_argument`. Without it, when `@opentelemetry/api` is
   * installed, the active context goes as the request's `traceparent` header instead (which a
   * server ignores if it cannot read it).
   */
  traceparent?: string;
}

/** The accept half of {@link Client.finish} with `next`. */
export interface NextOptions {
  /** The types to take the next job from (default: the finished job's type). */
  types?: string[];
  /** Seconds to wait for a next job after the finish has committed (0..300, default 0). */
  timeout?: number;
  /** The worker the next job is recorded on, and its worker type. */
  worker?: string;
  workerType?: string;
  maxPriority?: number;
  maxScheduledTime?: number;
}

/** `body` / `body_base64` of a request, from bytes data. */
function bodyFields(body: Uint8Array | string | undefined): Record<string, string> {
  if (body === undefined) return {};
  if (typeof body === 'string') return { body };
  return { body_base64: Buffer.from(body).toString('base64') };
}

/**
 * The bytes of a job whose `data_format` is `bytes` (as get, list or accept show it: `body` or
 * `body_base64`); undefined for a job of JSON data.
 */
export function jobBytes(job: { data_format?: string; body?: string; body_base64?: string }): Uint8Array | undefined {
  if (job.data_format !== 'bytes') return undefined;
  if (job.body !== undefined) return new Uint8Array(Buffer.from(job.body, 'utf8'));
  return new Uint8Array(Buffer.from(job.body_base64 ?? '', 'base64'));
}

/** Options of {@link Client.groups}. */
export interface GroupsOptions extends CallOptions {
  /** At most this many groups (1..1000, default 100). */
  limit?: number;
  /** Start after this group (exclusive): a previous page's `nextAfter`. */
  after?: string;
}

/** A page of {@link Client.groups}. */
export interface GroupPage {
  /** The groups, by name. */
  groups: GroupInfo[];
  /** Pass as `after` for the next page; `""` at the end. */
  nextAfter: string;
}

/** Options of {@link Client.list}. */
export interface ListOptions extends CallOptions {
  /** Only jobs in this state, part of a state, or outcome. */
  state?: ListState;
  /** Only jobs of this worker. */
  worker?: string;
  /** Only jobs of this worker type. */
  workerType?: string;
  /** At most this many (1..10000, default 100). */
  limit?: number;
  /** Where to go on: a previous page's `nextCursor`. */
  cursor?: string;
}

/** A page of {@link Client.list}. */
export interface JobPage {
  /** The jobs, in id order. */
  jobs: Job[];
  /** Pass as `cursor` for the next page; `""` at the end. */
  nextCursor: string;
}

/** Options of {@link Client.accept}. */
export interface AcceptOptions extends CallOptions {
  /** Seconds to long-poll for the first job (0..300, default 0). */
  timeout?: number;
  /** At most this many jobs (1..100, default 1). */
  count?: number;
  /** The accepting worker's id (registered, so its jobs come back at once if it dies). */
  worker?: string;
  /** Its worker type (needs `worker`). */
  workerType?: string;
  /** Only jobs of at most this priority. */
  maxPriority?: number;
  /** Only jobs due by this time (ms). */
  maxScheduledTime?: number;
}

/** The error a `fail` records. */
export interface FailError {
  /** Required, not empty. */
  message: string;
  /** 1–64 bytes (default `error`). */
  kind?: string;
  /** Any JSON value. */
  details?: unknown;
}

/** What `fail` decided. */
export interface FailAnswer {
  /** Whether the job ended dead. */
  dead: boolean;
  /** When it runs again (ms), or null if dead. */
  retry_at: number | null;
  /** The attempt that failed. */
  attempt: number;
}

const DEFAULT_URL = 'http://127.0.0.1:7411';

/** The most jobs one batch add takes. */
const MAX_ADD_MANY = 1000;

function seg(s: string): string {
  return encodeURIComponent(s);
}

function ms(t: number | Date | undefined): number | undefined {
  return t instanceof Date ? t.getTime() : t;
}

/** An add's `depends_on`, `on_dependency_failure` and `batch`, as the wire names them. */
function workflowFields(o: WorkflowOptions): Record<string, unknown> {
  return {
    depends_on: o.dependsOn?.map((d) => ({ type: d.type, id: d.id })),
    on_dependency_failure: o.onDependencyFailure,
    batch: o.batch,
  };
}

/** Drops undefined fields, so absent options are absent on the wire. */
function compact(o: Record<string, unknown>): Record<string, unknown> {
  const out: Record<string, unknown> = {};
  for (const [k, v] of Object.entries(o)) if (v !== undefined) out[k] = v;
  return out;
}

/** The answer of {@link Client.request}: status and parsed JSON body (null when empty). */
export interface RawAnswer {
  /** The HTTP status (2xx; errors reject). */
  status: number;
  /** The parsed body, or null for none (`204`). */
  body: any;
}

/**
 * A client of one kvq server (or of several behind one URL: any `kvq serve` sharing the store
 * answers alike). Stateless and safe to share; every method returns a Promise and takes an
 * optional `AbortSignal`. Error answers reject with {@link KvqError}; `503` answers and network
 * errors are retried with jittered backoff first (see {@link RetryOptions}).
 *
 * @example
 * ```ts
 * const kvq = new Client({ url: 'http://127.0.0.1:7411' });
 * await kvq.putType('email', { timeout: 30, maxAttempts: 5 });
 * await kvq.add('email', 'welcome-42', { to: 'ada@example.com' });
 * console.log(await kvq.result('email', 'welcome-42'));
 * ```
 */
export class Client {
  /** The server's base URL, without a trailing slash. */
  readonly url: string;
  private readonly token: string | undefined;
  private readonly retryDefaults: Required<RetryOptions>;
  private readonly timeoutMs: number;
  private readonly fetchFn: typeof fetch;

  /**
   * @param options - the server's URL and token, or just the URL
   */
  constructor(options: ClientOptions | string = {}) {
    const o: ClientOptions = typeof options === 'string' ? { url: options } : options;
    this.url = (o.url ?? process.env.KVQ_URL ?? DEFAULT_URL).replace(/\/+$/, '');
    this.token = o.token ?? (process.env.KVQ_TOKEN || undefined);
    this.retryDefaults = { attempts: 5, baseMs: 100, capMs: 5000, ...o.retry };
    this.timeoutMs = o.timeoutMs ?? 30000;
    this.fetchFn = o.fetch ?? globalThis.fetch;
    if (typeof this.fetchFn !== 'function') throw new Error('kvq: no fetch (Node 18 or later is needed)');
  }

  // ---- the one way to the server ------------------------------------------------------

  /**
   * Sends one request and parses its JSON answer, retrying `503` and network errors per the
   * retry policy. A non-2xx answer rejects with {@link KvqError}; an aborted `signal` rejects
   * with its reason. The methods below are all built on it.
   *
   * @param method - HTTP method
   * @param path - the path and query, starting with `/`
   * @param body - a JSON value to send, or undefined for none
   * @param options - signal, retry policy, per-try timeout
   */
  async request(method: string, path: string, body?: unknown, options: SendOptions = {}): Promise<RawAnswer> {
    const retry = { ...this.retryDefaults, ...options.retry };
    for (let attempt = 1; ; attempt++) {
      try {
        return await this.once(method, path, body, options);
      } catch (err) {
        if (options.signal?.aborted) throw abortReason(options.signal);
        if (!(err instanceof KvqError) || !err.retryable || attempt >= retry.attempts) throw err;
        await sleep(backoffMs(attempt, retry.baseMs, retry.capMs), options.signal);
      }
    }
  }

  private async once(method: string, path: string, body: unknown, options: SendOptions): Promise<RawAnswer> {
    const res = await this.send(method, path, body, options, false);
    try {
      const text = await res.response.text();
      return { status: res.response.status, body: text ? JSON.parse(text) : null };
    } catch (err) {
      throw this.noAnswer(err, options.signal, res.timedOut());
    } finally {
      res.dispose();
    }
  }

  /** Starts a request; resolves once a 2xx answer's header is in (errors reject). */
  private async send(
    method: string,
    path: string,
    body: unknown,
    options: SendOptions,
    stream: boolean,
  ): Promise<{ response: Response; dispose: () => void; timedOut: () => boolean }> {
    const timeout = new AbortController();
    const limit = options.timeoutMs ?? this.timeoutMs;
    let timedOut = false;
    const timer =
      !stream && limit > 0 && Number.isFinite(limit)
        ? setTimeout(() => {
            timedOut = true;
            timeout.abort(new KvqError(0, 'network', `no answer from ${this.url} within ${limit} ms`));
          }, limit)
        : undefined;
    const combined = anySignal([options.signal, timeout.signal]);
    const dispose = () => {
      if (timer) clearTimeout(timer);
      combined.dispose();
    };
    const headers: Record<string, string> = { ...options.headers };
    if (this.token) headers['Authorization'] = `Bearer ${this.token}`;
    if (body !== undefined) headers['Content-Type'] = 'application/json';
    if (stream) headers['Accept'] = 'text/event-stream';
    let response: Response;
    try {
      response = await this.fetchFn(this.url + path, {
        method,
        headers,
        body: body === undefined ? undefined : JSON.stringify(body),
        signal: combined.signal,
      });
    } catch (err) {
      dispose();
      throw this.noAnswer(err, options.signal, timedOut);
    }
    if (response.status >= 200 && response.status < 300) {
      return { response, dispose, timedOut: () => timedOut };
    }
    let text = '';
    try {
      text = await response.text();
    } catch {
      // the status says enough
    } finally {
      dispose();
    }
    let code = `http_${response.status}`;
    let message = text || response.statusText;
    try {
      const parsed = JSON.parse(text) as { error?: unknown; message?: unknown };
      if (typeof parsed.error === 'string') code = parsed.error;
      if (typeof parsed.message === 'string') message = parsed.message;
    } catch {
      // not JSON: keep the text
    }
    throw new KvqError(response.status, code, `${method} ${path}: ${response.status} ${code}: ${message}`);
  }

  private noAnswer(err: unknown, signal: AbortSignal | undefined, timedOut: boolean): Error {
    if (signal?.aborted) return abortReason(signal);
    if (err instanceof KvqError) return err;
    const why = timedOut ? 'timed out' : err instanceof Error ? (err.cause as Error)?.message ?? err.message : String(err);
    return new KvqError(0, 'network', `cannot reach ${this.url}: ${why}`, { cause: err });
  }

  // ---- types --------------------------------------------------------------------------

  /**
   * Creates a type or changes its settings (`PUT /v1/types/{type}`). A new type needs a
   * `timeout`; absent settings are left as they are.
   * @returns the type as it now is
   */
  async putType(type: string, settings: TypeSettings, options?: CallOptions): Promise<TypeInfo> {
    const body = compact({
      timeout: settings.timeout,
      finished_retention: settings.finishedRetention,
      max_lost_runs: settings.maxLostRuns,
      max_attempts: settings.maxAttempts,
      backoff: settings.backoff ? compact({ ...settings.backoff }) : undefined,
      max_running: settings.maxRunning,
      rate: settings.rate === null ? null : settings.rate ? { limit: settings.rate.limit, period_ms: settings.rate.periodMs } : undefined,
      max_running_per_group: settings.maxRunningPerGroup,
    });
    return (await this.request('PUT', `/v1/types/${seg(type)}`, body, options)).body;
  }

  /**
   * Pauses a type (`POST /v1/types/{type}/pause`): its accepts get nothing, waiting long-polls
   * included, until {@link Client.resumeType} — or, with `forMs`, for that many milliseconds
   * (`paused_until`). Adds are still taken and running jobs go on.
   *
   * @example
   * ```ts
   * await kvq.pauseType('email', { forMs: 60_000 }); // a minute; without forMs until resumed
   * ```
   * @returns the type as it now is (`paused: true`); rejects `404 not_found`
   */
  async pauseType(type: string, options: CallOptions & { forMs?: number } = {}): Promise<TypeInfo> {
    const body = compact({ for_ms: options.forMs });
    return (await this.request('POST', `/v1/types/${seg(type)}/pause`, body, options)).body;
  }

  /**
   * Ends a type's pause (nothing if it is not paused): waiting accepts get its jobs at once.
   * @returns the type as it now is
   */
  async resumeType(type: string, options?: CallOptions): Promise<TypeInfo> {
    return (await this.request('POST', `/v1/types/${seg(type)}/resume`, undefined, options)).body;
  }

  /**
   * A page of a type's groups that have pending or running jobs, by name
   * (`GET /v1/types/{type}/groups`): each with its running and pending jobs, whether it is
   * `full` (at `max_running_per_group`), and `in_turn_at`.
   *
   * @example
   * ```ts
   * const { groups, nextAfter } = await kvq.groups('report', { limit: 50 });
   * ```
   */
  async groups(type: string, options: GroupsOptions = {}): Promise<GroupPage> {
    const q = new URLSearchParams();
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.after) q.set('after', options.after);
    const qs = q.toString();
    const body = (await this.request('GET', `/v1/types/${seg(type)}/groups${qs ? '?' + qs : ''}`, undefined, options)).body;
    const groups: GroupInfo[] = body.groups;
    let nextAfter: string;
    if (typeof body.next_after === 'string') nextAfter = body.next_after;
    else nextAfter = groups.length > 0 && groups.length === (options.limit ?? 100) ? groups[groups.length - 1]!.group : '';
    return { groups, nextAfter };
  }

  /** Every group {@link Client.groups} lists, page after page. */
  async *listAllGroups(type: string, options: Omit<GroupsOptions, 'after'> = {}): AsyncGenerator<GroupInfo, void, undefined> {
    let after = '';
    do {
      const page = await this.groups(type, { ...options, after });
      yield* page.groups;
      after = page.nextAfter;
    } while (after);
  }

  // ---- schedules ----------------------------------------------------------------------

  /**
   * Creates or replaces a schedule (`PUT /v1/schedules/{name}`): a job of `settings.type` is
   * added at every time `settings.cron` names, with the id `NAME@YYYY-MM-DDTHH:MM:SSZ`. Rejects
   * `400 invalid_argument` naming a bad cron, timezone or catch-up, `404 not_found` if the type
   * does not exist.
   *
   * @example
   * ```ts
   * await kvq.putSchedule('nightly-report', { type: 'report', cron: '0 3 * * *', timezone: 'Europe/Paris', data: { kind: 'daily' } });
   * ```
   * @returns the schedule, with `next_runs`
   */
  async putSchedule(name: string, settings: ScheduleSettings, options?: CallOptions): Promise<Schedule> {
    const body = compact({
      type: settings.type,
      cron: settings.cron,
      timezone: settings.timezone,
      data: settings.data,
      priority: settings.priority,
      catch_up: settings.catchUp,
    });
    return (await this.request('PUT', `/v1/schedules/${seg(name)}`, body, options)).body;
  }

  /** A schedule, with its next five times (`next_runs`); rejects `404 not_found`. */
  async getSchedule(name: string, options?: CallOptions): Promise<Schedule> {
    return (await this.request('GET', `/v1/schedules/${seg(name)}`, undefined, options)).body;
  }

  /** Every schedule, by name (without `next_runs`). */
  async listSchedules(options?: CallOptions): Promise<Schedule[]> {
    return (await this.request('GET', '/v1/schedules', undefined, options)).body.schedules;
  }

  /** Deletes a schedule (the jobs it enqueued stay); rejects `404 not_found`. */
  async deleteSchedule(name: string, options?: CallOptions): Promise<void> {
    await this.request('DELETE', `/v1/schedules/${seg(name)}`, undefined, options);
  }

  /** A type's settings; rejects `404 not_found` if it does not exist. */
  async getType(type: string, options?: CallOptions): Promise<TypeInfo> {
    return (await this.request('GET', `/v1/types/${seg(type)}`, undefined, options)).body;
  }

  /** Every type that has a timeout. */
  async listTypes(options?: CallOptions): Promise<TypeInfo[]> {
    return (await this.request('GET', '/v1/types', undefined, options)).body.types;
  }

  /** Deletes a type; rejects `409 type_has_jobs` while it has jobs. */
  async deleteType(type: string, options?: CallOptions): Promise<void> {
    await this.request('DELETE', `/v1/types/${seg(type)}`, undefined, options);
  }

  /** Removes every job of a type, in any state. @returns how many were removed */
  async removeAllJobs(type: string, options?: CallOptions): Promise<number> {
    return (await this.request('DELETE', `/v1/types/${seg(type)}/jobs`, undefined, options)).body.removed;
  }

  /** Reruns every job of a type that ended `dead` (default) or `cancelled`. @returns how many */
  async rerunAll(type: string, outcome: 'dead' | 'cancelled' = 'dead', options?: CallOptions): Promise<number> {
    return (await this.request('POST', `/v1/types/${seg(type)}/rerun`, { outcome }, options)).body.rerun;
  }

  /** Due pending jobs of a type, counted up to `limit`. */
  async pendingCount(type: string, options: CallOptions & { maxScheduledTime?: number; limit?: number } = {}): Promise<number> {
    const q = new URLSearchParams();
    if (options.maxScheduledTime !== undefined) q.set('max_scheduled_time', String(options.maxScheduledTime));
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    const qs = q.toString();
    return (await this.request('GET', `/v1/types/${seg(type)}/pending${qs ? '?' + qs : ''}`, undefined, options)).body.pending;
  }

  /** The server's counters and every type's counts, in one read-only call (`GET /v1/stats`). */
  async stats(options: CallOptions = {}): Promise<Stats> {
    return (await this.request('GET', '/v1/stats', undefined, options)).body;
  }

  /**
   * How many jobs of `type` are in each state (from {@link Client.stats}); rejects with a
   * `not_found` {@link KvqError} for a type that does not exist.
   */
  async counts(type: string, options: CallOptions = {}): Promise<Counts> {
    const t = (await this.stats(options)).types.find((x) => x.type === type);
    if (!t) throw new KvqError(404, 'not_found', `type '${type}' does not exist`);
    const { pending, scheduled, running, finished, dead, cancelled } = t;
    return { pending, scheduled, running, finished, dead, cancelled };
  }

  // ---- jobs ---------------------------------------------------------------------------

  /**
   * Adds a job (`POST /v1/jobs/{type}`). With `ifExists: 'update'` (the default) an existing
   * job is replaced (pending), resubmitted (running) or started over (finished); with
   * `'keep'` it is left alone and `added` is false.
   * @returns whether the job was added or changed
   */
  async add(type: string, id: string, data: unknown = {}, options: AddOptions = {}): Promise<{ id: string; added: boolean }> {
    const body = compact({
      id,
      data: options.body === undefined ? data : undefined,
      ...bodyFields(options.body),
      timeout: options.jobTimeout,
      priority: options.priority,
      scheduled_time: ms(options.scheduledTime),
      if_exists: options.ifExists,
      group: options.group,
      traceparent: options.traceparent,
      ...workflowFields(options),
    });
    return (await this.request('POST', `/v1/jobs/${seg(type)}`, body, { ...options, headers: traceHeaders() })).body;
  }

  /**
   * Adds up to 1,000 jobs in one transaction: all or none.
   * @returns how many were added or changed, and the ids `keep` left alone
   */
  async addMany(
    type: string,
    jobs: NewJob[],
    options: CallOptions & { ifExists?: 'update' | 'keep' } = {},
  ): Promise<{ added: number; kept: string[] }> {
    const body = compact({
      jobs: jobs.map((j) =>
        compact({
          id: j.id,
          data: j.data ?? {},
          priority: j.priority,
          scheduled_time: ms(j.scheduledTime),
          if_exists: j.ifExists,
          group: j.group,
          traceparent: j.traceparent,
          ...workflowFields(j),
        }),
      ),
      if_exists: options.ifExists,
    });
    return (await this.request('POST', `/v1/jobs/${seg(type)}/batch`, body, { ...options, headers: traceHeaders() })).body;
  }

  /** A job; rejects `404 not_found` if it does not exist. */
  async get(type: string, id: string, options?: CallOptions): Promise<Job> {
    return (await this.request('GET', `/v1/jobs/${seg(type)}/${seg(id)}`, undefined, options)).body;
  }

  /**
   * The dependencies the job was added with (`GET /v1/jobs/{type}/{id}/dependencies`), in
   * (type, id) order, each with how it resolved and the dependency's job now (its `result`);
   * `[]` for a job added without any. Rejects `404 not_found`.
   */
  async dependencies(type: string, id: string, options?: CallOptions): Promise<Dependency[]> {
    return (await this.request('GET', `/v1/jobs/${seg(type)}/${seg(id)}/dependencies`, undefined, options)).body
      .dependencies;
  }

  // ---- batches ------------------------------------------------------------------------

  /**
   * Creates the batch `id`, open, or changes the callback of an open one (`PUT
   * /v1/batches/{id}`). Once it is sealed and every member has ended, the server adds
   * `callback` once. On a sealed batch another callback rejects `409 wrong_state`; `404
   * not_found` if the callback's type does not exist.
   */
  async putBatch(id: string, callback: BatchCallback, options: CallOptions & { on?: BatchOn } = {}): Promise<Batch> {
    const body = compact({ callback: compact({ type: callback.type, id: callback.id, data: callback.data }), on: options.on });
    return (await this.request('PUT', `/v1/batches/${seg(id)}`, body, options)).body;
  }

  /**
   * Seals the batch: no more jobs may join it; if every member has ended (or it has none) its
   * callback is added now. Sealing a sealed batch changes nothing. Rejects `404 not_found`.
   */
  async sealBatch(id: string, options?: CallOptions): Promise<Batch> {
    return (await this.request('POST', `/v1/batches/${seg(id)}/seal`, {}, options)).body;
  }

  /** The batch; rejects `404 not_found`. */
  async getBatch(id: string, options?: CallOptions): Promise<Batch> {
    return (await this.request('GET', `/v1/batches/${seg(id)}`, undefined, options)).body;
  }

  /**
   * Fan out and in: puts the batch `batchId` with `callback`, adds `jobs` of `type` with
   * `batch` set in batch adds of at most 1,000, then seals it.
   * Each step is its own request: should one fail, the batch is left unsealed, and an
   * unsealed batch never fires.
   * @returns the batch as the seal left it
   */
  async fanOut(
    batchId: string,
    type: string,
    jobs: NewJob[],
    options: CallOptions & { callback: BatchCallback; on?: BatchOn; ifExists?: 'update' | 'keep' },
  ): Promise<Batch> {
    const { callback, on, ifExists, ...call } = options;
    await this.putBatch(batchId, callback, { ...call, on });
    const members = jobs.map((j) => ({ ...j, batch: batchId }));
    for (let i = 0; i < members.length; i += MAX_ADD_MANY) {
      await this.addMany(type, members.slice(i, i + MAX_ADD_MANY), { ...call, ifExists });
    }
    return this.sealBatch(batchId, call);
  }

  /** A page of a type's jobs in id order, filtered by state, worker or worker type. */
  async list(type: string, options: ListOptions = {}): Promise<JobPage> {
    const q = new URLSearchParams();
    if (options.state) q.set('state', options.state);
    if (options.worker !== undefined) q.set('worker', options.worker);
    if (options.workerType !== undefined) q.set('worker_type', options.workerType);
    if (options.limit !== undefined) q.set('limit', String(options.limit));
    if (options.cursor) q.set('cursor', options.cursor);
    const qs = q.toString();
    const body = (await this.request('GET', `/v1/jobs/${seg(type)}${qs ? '?' + qs : ''}`, undefined, options)).body;
    return { jobs: body.jobs, nextCursor: body.next_cursor };
  }

  /** Every job {@link Client.list} selects, page after page. */
  async *listAll(type: string, options: Omit<ListOptions, 'cursor'> = {}): AsyncGenerator<Job, void, undefined> {
    let cursor = '';
    do {
      const page = await this.list(type, { ...options, cursor });
      yield* page.jobs;
      cursor = page.nextCursor;
    } while (cursor);
  }

  /** Removes a job (a running job's worker is halted at its next call). */
  async remove(type: string, id: string, options?: CallOptions): Promise<void> {
    await this.request('DELETE', `/v1/jobs/${seg(type)}/${seg(id)}`, undefined, options);
  }

  /** Cancels a pending or running job; rejects `409 wrong_state` if it is finished. */
  async cancel(type: string, id: string, options?: CallOptions): Promise<Job> {
    return (await this.request('POST', `/v1/jobs/${seg(type)}/${seg(id)}/cancel`, undefined, options)).body;
  }

  /** Runs a finished job again, its attempts starting over; `409 wrong_state` if not finished. */
  async rerun(
    type: string,
    id: string,
    options: CallOptions & { scheduledTime?: number | Date; priority?: number } = {},
  ): Promise<Job> {
    const body = compact({ scheduled_time: ms(options.scheduledTime), priority: options.priority });
    return (await this.request('POST', `/v1/jobs/${seg(type)}/${seg(id)}/rerun`, body, options)).body;
  }

  /**
   * Long-polls until the job is in `state` (default `finished`) or removed.
   * @returns the job event, or null if `timeout` seconds (default 30, at most 300) passed first
   */
  async wait(
    type: string,
    id: string,
    options: CallOptions & { state?: 'pending' | 'running' | 'finished'; timeout?: number } = {},
  ): Promise<JobEvent | null> {
    const timeout = options.timeout ?? 30;
    const q = new URLSearchParams({ state: options.state ?? 'finished', timeout: String(timeout) });
    const r = await this.request('GET', `/v1/jobs/${seg(type)}/${seg(id)}/wait?${q}`, undefined, {
      timeoutMs: timeout * 1000 + 15000,
      ...options,
    });
    return r.status === 204 ? null : r.body;
  }

  /**
   * Follows a job's events (server-sent events): its state now, then each change. Ends after
   * `finished` or removal (`found: false`); with `follow: true` only at removal. Break out of
   * the loop or abort the signal to stop early.
   *
   * @example
   * ```ts
   * for await (const ev of kvq.events('email', 'welcome-42')) console.log(ev.state);
   * ```
   */
  async *events(
    type: string,
    id: string,
    options: CallOptions & { follow?: boolean } = {},
  ): AsyncGenerator<JobEvent, void, undefined> {
    const path = `/v1/jobs/${seg(type)}/${seg(id)}/events${options.follow ? '?follow=true' : ''}`;
    const res = await this.send('GET', path, undefined, options, true);
    const reader = res.response.body!.getReader();
    const decoder = new TextDecoder();
    let buffer = '';
    let name = '';
    let data: string[] = [];
    try {
      for (;;) {
        let chunk: Awaited<ReturnType<typeof reader.read>>;
        try {
          chunk = await reader.read();
        } catch (err) {
          throw this.noAnswer(err, options.signal, false);
        }
        if (chunk.done) return;
        buffer += decoder.decode(chunk.value, { stream: true });
        let nl: number;
        while ((nl = buffer.indexOf('\n')) >= 0) {
          const line = buffer.slice(0, nl).replace(/\r$/, '');
          buffer = buffer.slice(nl + 1);
          if (line === '') {
            if (data.length && (name === '' || name === 'job')) yield JSON.parse(data.join('\n')) as JobEvent;
            name = '';
            data = [];
          } else if (!line.startsWith(':')) {
            const colon = line.indexOf(':');
            const field = colon < 0 ? line : line.slice(0, colon);
            const value = colon < 0 ? '' : line.slice(colon + 1).replace(/^ /, '');
            if (field === 'event') name = value;
            else if (field === 'data') data.push(value);
          }
        }
      }
    } finally {
      reader.cancel().catch(() => undefined);
      res.dispose();
    }
  }

  /**
   * Awaits a job's end. Resolves with its result when it succeeds; rejects with
   * {@link JobFailedError} (the job's last error: message, kind, details) when it ends dead or
   * cancelled, and with `KvqError` `not_found` if it is (or gets) removed.
   */
  async result<T = unknown>(type: string, id: string, options: CallOptions = {}): Promise<T> {
    for (;;) {
      const job = await this.get(type, id, options);
      if (job.state === 'finished') {
        if (job.outcome === 'succeeded') return job.result as T;
        const last = job.errors.length ? job.errors[job.errors.length - 1]! : null;
        throw new JobFailedError(type, id, job.outcome ?? 'dead', last);
      }
      const ev = await this.wait(type, id, { ...options, state: 'finished', timeout: 30 });
      if (ev && !ev.found) throw new KvqError(404, 'not_found', `job ${type}/${id} was removed`);
    }
  }

  // ---- workers' job calls -------------------------------------------------------------

  /** Long-polls for up to `count` due jobs of a type. @returns them, or `[]` if none came in time */
  async accept(type: string, options: AcceptOptions = {}): Promise<AcceptedJob[]> {
    const body = compact({
      timeout: options.timeout,
      count: options.count,
      worker: options.worker,
      worker_type: options.workerType,
      max_priority: options.maxPriority,
      max_scheduled_time: options.maxScheduledTime,
    });
    const r = await this.request('POST', `/v1/accept/${seg(type)}`, body, {
      timeoutMs: (options.timeout ?? 0) * 1000 + 15000,
      ...options,
    });
    return r.status === 204 || !r.body ? [] : r.body.jobs;
  }

  /**
   * Long-polls for one due job of any of `types` (1..64): the best priority across them, then
   * the earliest scheduled time. @returns `[job]` (its `type` says which), or `[]` if none came
   */
  async acceptAny(types: string[], options: Omit<AcceptOptions, 'count'> = {}): Promise<AcceptedJob[]> {
    const body = compact({
      types,
      timeout: options.timeout,
      worker: options.worker,
      worker_type: options.workerType,
      max_priority: options.maxPriority,
      max_scheduled_time: options.maxScheduledTime,
    });
    const r = await this.request('POST', '/v1/accept', body, {
      timeoutMs: (options.timeout ?? 0) * 1000 + 15000,
      ...options,
    });
    return r.status === 204 || !r.body ? [] : r.body.jobs;
  }

  /** A heartbeat for a running job, with its progress; rejects `409 halted` if it is not ours. */
  async update(job: AcceptedJob, options: CallOptions & { progress?: unknown; data?: unknown } = {}): Promise<{ resubmitted: boolean }> {
    const body = compact({ lock: job.lock, progress: options.progress, data: options.data });
    return (await this.request('POST', `${jobPath(job)}/update`, body, options)).body;
  }

  /**
   * Ends a run with success and `result` (any JSON value). With `next`, also accepts the
   * worker's next job in the same request and transaction (one commit where accept and finish
   * spend two). @returns that next job, or null (none due within `next.timeout`, or no `next`)
   */
  async finish(
    job: AcceptedJob,
    result: unknown = null,
    options: CallOptions & { data?: unknown; body?: Uint8Array | string; next?: NextOptions } = {},
  ): Promise<AcceptedJob | null> {
    const n = options.next;
    const next =
      n === undefined
        ? undefined
        : compact({
            types: n.types,
            timeout: n.timeout,
            worker: n.worker,
            worker_type: n.workerType,
            max_priority: n.maxPriority,
            max_scheduled_time: n.maxScheduledTime,
          });
    const body = compact({ lock: job.lock, result, data: options.data, ...bodyFields(options.body), next });
    const r = await this.request('POST', `${jobPath(job)}/finish`, body, {
      timeoutMs: (n?.timeout ?? 0) * 1000 + 15000,
      ...options,
    });
    return r.body?.next ?? null;
  }

  /**
   * Fails this attempt: the error is recorded, then the type's retry policy decides what next
   * (`retryIn` seconds instead of its backoff; `noRetry: true` ends the job dead now).
   */
  async fail(
    job: AcceptedJob,
    error: FailError,
    options: CallOptions & { retryIn?: number; noRetry?: boolean } = {},
  ): Promise<FailAnswer> {
    const body = compact({
      lock: job.lock,
      error: compact({ ...error }),
      retry_in: options.retryIn,
      retry: options.noRetry ? false : undefined,
    });
    return (await this.request('POST', `${jobPath(job)}/fail`, body, options)).body;
  }

  /** Hands a job back for later (after `delay` seconds, default 0), not counting the attempt. */
  async snooze(job: AcceptedJob, options: CallOptions & { delay?: number; scheduledTime?: number | Date } = {}): Promise<void> {
    const body = compact({ lock: job.lock, delay: options.delay, scheduled_time: ms(options.scheduledTime) });
    await this.request('POST', `${jobPath(job)}/snooze`, body, options);
  }

  /** Resubmits a running job (it runs again after this run ends). */
  async resubmit(job: AcceptedJob, options: CallOptions & { scheduledTime?: number | Date; data?: unknown } = {}): Promise<void> {
    const body = compact({ lock: job.lock, scheduled_time: ms(options.scheduledTime), data: options.data });
    await this.request('POST', `${jobPath(job)}/resubmit`, body, options);
  }

  // ---- workers (membership) -----------------------------------------------------------

  /** Registers a worker; rejects `409 already_exists` if the id is alive (without `takeOver`). */
  async registerWorker(
    workerType: string,
    id: string,
    options: CallOptions & { info?: unknown; healthTimeout?: number; takeOver?: boolean } = {},
  ): Promise<{ id: string; token: string }> {
    const body = compact({ id, info: options.info, health_timeout: options.healthTimeout, take_over: options.takeOver });
    return (await this.request('POST', `/v1/workers/${seg(workerType)}`, body, options)).body;
  }

  /** A worker's heartbeat; rejects `409 halted` once it was declared dead or replaced. */
  async heartbeatWorker(workerType: string, id: string, token: string, options?: CallOptions): Promise<void> {
    await this.request('POST', `/v1/workers/${seg(workerType)}/${seg(id)}/heartbeat`, { token }, options);
  }

  /** Unregisters a worker: jobs it still holds go back to pending at once (as lost runs). */
  async deregisterWorker(workerType: string, id: string, token: string, options?: CallOptions): Promise<void> {
    await this.request('DELETE', `/v1/workers/${seg(workerType)}/${seg(id)}?token=${seg(token)}`, undefined, options);
  }

  /** A worker type's live workers and its membership version. */
  async listWorkers(workerType: string, options?: CallOptions): Promise<{ version: number; workers: WorkerInfo[] }> {
    return (await this.request('GET', `/v1/workers/${seg(workerType)}`, undefined, options)).body;
  }

  /** `GET /healthz`: `{status, store?, message?}`; a 503 rejects once the retries are used up. */
  async health(options?: CallOptions): Promise<{ status: string; store?: string; message?: string }> {
    return (await this.request('GET', '/healthz', undefined, options)).body;
  }
}

function jobPath(job: { type: string; id: string }): string {
  return `/v1/jobs/${seg(job.type)}/${seg(job.id)}`;
}
