// SPDX-License-Identifier: Apache-2.0
// OpenTelemetry, when the application has it: `@opentelemetry/api` is an optional peer
// dependency, loaded on first use with require() in a try, so the client runs without it.
// With it, an add sends the active context as its `traceparent` header, and the worker runs
// each handler in a consumer span whose parent is the job's traceparent; with the API but no
// SDK registered, its no-op implementation makes both do nothing. Only the few calls below are
// used, so the shapes are declared here rather than imported (the API's types are not a
// dependency either).

interface Span {
  setAttribute(key: string, value: string): unknown;
  setStatus(status: { code: number; message?: string }): unknown;
  recordException(exception: unknown): unknown;
  end(): void;
}

interface OtelApi {
  ROOT_CONTEXT: unknown;
  SpanKind: { CONSUMER: number };
  SpanStatusCode: { ERROR: number };
  context: { active(): unknown; with<T>(ctx: unknown, fn: () => T): T };
  propagation: {
    inject(ctx: unknown, carrier: Record<string, string>): void;
    extract(ctx: unknown, carrier: Record<string, string>): unknown;
  };
  trace: {
    getTracer(name: string): {
      startSpan(name: string, options: { kind?: number; attributes?: Record<string, string> }, ctx?: unknown): Span;
    };
    setSpan(ctx: unknown, span: Span): unknown;
  };
}

let api: OtelApi | null | undefined; // undefined: not tried yet

/** The OpenTelemetry API, or null when it cannot be loaded. */
function otel(): OtelApi | null {
  if (api === undefined) {
    try {
      // eslint-disable-next-line @typescript-eslint/no-var-requires
      api = require('@opentelemetry/api') as OtelApi;
    } catch {
      api = null;
    }
  }
  return api;
}

/** Try loading the API again on next use (for tests that make it appear or go). */
export function forgetOtel(): void {
  api = undefined;
}

/** The active context as W3C headers (`traceparent`, `tracestate`), or none. */
export function traceHeaders(): Record<string, string> {
  const o = otel();
  if (!o) return {};
  const carrier: Record<string, string> = {};
  o.propagation.inject(o.context.active(), carrier);
  const out: Record<string, string> = {};
  for (const k of ['traceparent', 'tracestate']) if (carrier[k]) out[k] = carrier[k]!;
  return out;
}

/** A handler's span: `run` calls the handler with it active; `end` records the outcome. */
export interface ConsumerSpan {
  run<T>(fn: () => T): T;
  end(outcome: string, error?: unknown): void;
}

const noSpan: ConsumerSpan = { run: (fn) => fn(), end: () => {} };

/** Starts the consumer span of a job's run, a child of its traceparent (none: a new trace). */
export function consumerSpan(type: string, id: string, traceparent: string | undefined): ConsumerSpan {
  const o = otel();
  if (!o) return noSpan;
  const parent = traceparent ? o.propagation.extract(o.ROOT_CONTEXT, { traceparent }) : o.ROOT_CONTEXT;
  const span = o.trace.getTracer('kvq').startSpan(
    `${type} process`,
    {
      kind: o.SpanKind.CONSUMER,
      attributes: {
        'messaging.system': 'kvq',
        'messaging.operation': 'process',
        'messaging.destination.name': type,
        'messaging.message.id': id,
      },
    },
    parent,
  );
  const active = o.trace.setSpan(parent, span);
  return {
    run: (fn) => o.context.with(active, fn),
    end: (outcome, error) => {
      span.setAttribute('kvq.outcome', outcome);
      if (error !== undefined) {
        span.recordException(error);
        span.setStatus({ code: o.SpanStatusCode.ERROR, message: error instanceof Error ? error.message : String(error) });
      }
      span.end();
    },
  };
}
