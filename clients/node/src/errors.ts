// SPDX-License-Identifier: Apache-2.0
/**
 * The errors this package throws.
 *
 * @packageDocumentation
 */

/**
 * An error answer of the kvq server, or a failure to reach it.
 *
 * `status` is the HTTP status (0 when no answer arrived: a network error or a timeout) and
 * `code` the server's error name from docs/http-api.md (`not_found`, `halted`,
 * `invalid_argument`, `unavailable`, ...), or `network` / `aborted` for a call that got no
 * answer.
 */
export class KvqError extends Error {
  /** The HTTP status, or 0 if no answer arrived. */
  readonly status: number;
  /** The server's error name (`halted`, `not_found`, ...), or `network` or `aborted`. */
  readonly code: string;

  /**
   * @param status - the HTTP status, 0 for none
   * @param code - the error name
   * @param message - what went wrong, as the server said it
   * @param options - the underlying cause, if any
   */
  constructor(status: number, code: string, message: string, options?: { cause?: unknown }) {
    super(message, options);
    this.name = 'KvqError';
    this.status = status;
    this.code = code;
  }

  /**
   * Whether retrying the same call later may succeed: a 503 (`unavailable`,
   * `resource_exhausted`) or a network error. A 409 `halted` never is.
   */
  get retryable(): boolean {
    return this.status === 503 || this.code === 'network';
  }

  /** Whether this is a `409 halted`: the caller no longer holds the job or registration. */
  get halted(): boolean {
    return this.status === 409 && this.code === 'halted';
  }
}

/** One failed or lost attempt of a job, as the server keeps it in the job's `errors`. */
export interface JobErrorRecord {
  /** The attempt that failed (1 for the first). */
  attempt: number;
  /** When, in milliseconds since the Unix epoch. */
  at: number;
  /** The worker that ran it. */
  worker: string;
  /** The worker's kind (the error's name), or `timeout` / `worker_lost` for a lost run. */
  kind: string;
  /** The error's message. */
  message: string;
  /** Any JSON value the worker attached (this package sends `{stack}`), or null. */
  details: unknown;
}

/**
 * What {@link Client.result} rejects with when the job ended without succeeding: dead (its
 * attempts used up, failed with `retry: false`, or given up after lost runs) or cancelled.
 * `message`, `kind` and `details` come from the job's last recorded error, if it has one.
 */
export class JobFailedError extends Error {
  /** The job's type. */
  readonly type: string;
  /** The job's id. */
  readonly id: string;
  /** How the job ended: `dead` or `cancelled`. */
  readonly outcome: string;
  /** The last error the job recorded, or null if none (a cancelled job). */
  readonly lastError: JobErrorRecord | null;
  /** The last error's kind (the name of the error the handler threw), or the outcome. */
  readonly kind: string;
  /** The last error's details, or null. */
  readonly details: unknown;

  /**
   * @param type - the job's type
   * @param id - the job's id
   * @param outcome - `dead` or `cancelled`
   * @param lastError - the job's last recorded error, if any
   */
  constructor(type: string, id: string, outcome: string, lastError: JobErrorRecord | null) {
    super(lastError ? lastError.message : `job ${type}/${id} ended ${outcome}`);
    this.name = 'JobFailedError';
    this.type = type;
    this.id = id;
    this.outcome = outcome;
    this.lastError = lastError;
    this.kind = lastError ? lastError.kind : outcome;
    this.details = lastError ? lastError.details : null;
  }
}
