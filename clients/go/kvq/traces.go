// SPDX-License-Identifier: Apache-2.0

package kvq

import "context"

// Traces. A job may carry a W3C trace context, its traceparent
// ("00-<32 hex>-<16 hex>-<2 hex>"), from the add that made it to the worker that runs it, so a
// trace follows a request into its background jobs. The standard library has no OpenTelemetry,
// so this package takes hooks instead of importing it (the README shows the wiring):
//
//   - WithTraceparent(tp) on an Add, or NewJob.Traceparent, gives a job its traceparent (sent as
//     the job's field: a server refuses an invalid one with 400, and an older server refuses the
//     field with 400 `unknown_field`).
//   - WithTraceparentFrom(f), a Client option, sends f(ctx) as the `traceparent` header of every
//     Add and AddMany, for the jobs that carry none of their own: the context's current span,
//     with OpenTelemetry's propagator. The server ignores a header it cannot read, as W3C says.
//   - WorkerOptions.StartSpan runs around each handler, with the job (Job.Traceparent).

// WithTraceparent gives the job a W3C traceparent, kept with it and handed to its worker.
func WithTraceparent(tp string) AddOption { return func(j *NewJob) { j.Traceparent = tp } }

// WithTraceparentFrom makes the client send f(ctx) as the `traceparent` header of each Add and
// AddMany (none when it returns ""): the trace context of the call's ctx.
func WithTraceparentFrom(f func(ctx context.Context) string) Option {
	return func(c *Client) { c.traceparentFrom = f }
}

// traceHeader is the header an add sends: its ctx's traceparent, when the client has a hook.
func (c *Client) traceHeader(ctx context.Context) map[string]string {
	if c.traceparentFrom == nil {
		return nil
	}
	if tp := c.traceparentFrom(ctx); tp != "" {
		return map[string]string{"traceparent": tp}
	}
	return nil
}

// noSpan is what a run does without WorkerOptions.StartSpan.
func noSpan(ctx context.Context, _ *Job) (context.Context, func(error)) {
	return ctx, func(error) {}
}
