// SPDX-License-Identifier: Apache-2.0
// Small helpers shared by the client and the worker. Not exported.

/** Jittered exponential backoff: a delay in ms for the n-th retry (n from 1). */
export function backoffMs(n: number, baseMs: number, capMs: number): number {
  const d = Math.min(capMs, baseMs * 2 ** Math.min(n - 1, 30));
  return d / 2 + Math.random() * (d / 2);
}

/** The reason an aborted signal carries, as an Error. */
export function abortReason(signal: AbortSignal): Error {
  const r: unknown = signal.reason;
  if (r instanceof Error) return r;
  const e = new Error(r === undefined ? 'aborted' : String(r));
  e.name = 'AbortError';
  return e;
}

/** Resolves after `ms`, or rejects with the signal's reason once it is aborted. */
export function sleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) return reject(abortReason(signal));
    const onAbort = () => {
      clearTimeout(t);
      reject(abortReason(signal!));
    };
    const t = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort);
      resolve();
    }, ms);
    signal?.addEventListener('abort', onAbort, { once: true });
  });
}

/**
 * A signal aborted when any of `signals` is (AbortSignal.any, which Node 18 lacks). `dispose`
 * removes its listeners from the inputs; call it once the combined signal is no longer needed.
 */
export function anySignal(signals: (AbortSignal | undefined)[]): {
  signal: AbortSignal;
  dispose: () => void;
} {
  const controller = new AbortController();
  const cleanups: (() => void)[] = [];
  for (const s of signals) {
    if (!s) continue;
    if (s.aborted) {
      controller.abort(s.reason);
      break;
    }
    const onAbort = () => controller.abort(s.reason);
    s.addEventListener('abort', onAbort, { once: true });
    cleanups.push(() => s.removeEventListener('abort', onAbort));
  }
  return { signal: controller.signal, dispose: () => cleanups.forEach((c) => c()) };
}

/** The error a failed attempt reports for what a handler threw: message, kind, stack. */
export function errorOf(err: unknown): { message: string; kind: string; details: unknown } {
  if (err instanceof Error) {
    const kind = (err.name || err.constructor?.name || 'Error').slice(0, 64);
    const extra = (err as { details?: unknown }).details;
    return {
      message: err.message || kind,
      kind,
      details: extra === undefined ? { stack: err.stack ?? null } : { stack: err.stack ?? null, details: extra },
    };
  }
  return { message: String(err) || 'error', kind: 'error', details: { thrown: safeJson(err) } };
}

function safeJson(v: unknown): unknown {
  try {
    return JSON.parse(JSON.stringify(v ?? null));
  } catch {
    return String(v);
  }
}

/** A handler error's own retry wishes (`retry: false`, `retryIn` seconds), if it has them. */
export function retryWishes(err: unknown): { noRetry?: boolean; retryIn?: number } {
  const out: { noRetry?: boolean; retryIn?: number } = {};
  if (err && typeof err === 'object') {
    const e = err as { retry?: unknown; retryIn?: unknown };
    if (e.retry === false) out.noRetry = true;
    if (typeof e.retryIn === 'number' && e.retryIn >= 0) out.retryIn = e.retryIn;
  }
  return out;
}
