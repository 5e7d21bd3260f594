// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime/debug"
	"time"
)

// HandlerFunc runs one job. Its ctx is cancelled when the job is fenced (the server answered
// 409 `halted`: the job was cancelled, removed or re-enqueued, or this worker was declared
// dead) and when the worker stops and its grace has run out; a handler should then return
// soon, and whatever it returns is dropped. The returned value becomes the job's result (any
// value encoding/json renders); a returned error, or a panic, fails the attempt, which is
// retried per the type's policy (see JobError, NoRetry, RetryIn and SnoozeFor to say more).
type HandlerFunc func(ctx context.Context, job *Job) (result any, err error)

// Job is one run of a job, as a handler receives it.
type Job struct {
	Type string
	ID   string
	// Data is the job's input, as its producer added it (null for a job of bytes data).
	Data json.RawMessage
	// Body is the data of a job added with WithBody (its bytes), else nil.
	Body []byte
	// Traceparent is the W3C trace context the job was added with ("" for none), for
	// WorkerOptions.StartSpan to continue the producer's trace.
	Traceparent string

	progress func(ctx context.Context, v any) error
	attempt  func(ctx context.Context) (int, error)
}

// Attempt returns which attempt this run is: 1 for the first, counting every accept since the
// job was last added anew or rerun, less the runs handed back with snooze (River's
// job.Attempt). The accept's answer carries it; from a server before 0.2.0, whose answer does
// not, it costs one request (a GET of the job).
func (j *Job) Attempt(ctx context.Context) (int, error) {
	if j.attempt == nil {
		return 0, errors.New("kvq: job.Attempt: not a job a worker runs")
	}
	return j.attempt(ctx)
}

// Decode unmarshals the job's data into v.
func (j *Job) Decode(v any) error {
	data := j.Data
	if len(data) == 0 {
		data = json.RawMessage("{}")
	}
	if err := json.Unmarshal(data, v); err != nil {
		return fmt.Errorf("kvq: job %s/%s: cannot decode its data: %w", j.Type, j.ID, err)
	}
	return nil
}

// Progress records v (any JSON value) as the job's progress, visible to Get, and is also a
// heartbeat. An error IsHalted means the job was fenced; the handler's ctx is then cancelled.
func (j *Job) Progress(ctx context.Context, v any) error {
	if j.progress == nil {
		return nil
	}
	return j.progress(ctx, v)
}

// JobError is an error a handler returns to say how its attempt failed. Any other error fails
// the attempt with its message, kind "error" and the type's retry policy.
type JobError struct {
	// Err is the failure; its message is recorded.
	Err error
	// Kind classifies it (1..64 bytes; "" for "error").
	Kind string
	// Details is any JSON value recorded with it.
	Details any
	// RetryIn, when not nil, retries after that long instead of the type's backoff.
	RetryIn *time.Duration
	// NoRetry ends the job dead now.
	NoRetry bool
}

// Error returns Err's message, which is what the failure records.
func (e *JobError) Error() string {
	if e.Err == nil {
		return "job failed"
	}
	return e.Err.Error()
}

// Unwrap returns the failure.
func (e *JobError) Unwrap() error { return e.Err }

// NoRetry wraps err so that the job ends dead at once rather than being retried.
func NoRetry(err error) error { return &JobError{Err: err, NoRetry: true} }

// RetryIn wraps err so that the job is retried after d instead of its type's backoff (its
// attempts still count).
func RetryIn(err error, d time.Duration) error { return &JobError{Err: err, RetryIn: &d} }

// SnoozeFor, returned by a handler, hands the job back to be run again after d, without
// counting this run as an attempt or recording an error ("not now").
func SnoozeFor(d time.Duration) error { return &snoozeError{delay: d} }

type snoozeError struct{ delay time.Duration }

func (e *snoozeError) Error() string { return fmt.Sprintf("kvq: snoozed for %v", e.delay) }

// PanicError is how a handler's panic is reported: the failure recorded has kind "panic",
// its message, and details {"panic": value, "stack": the goroutine's stack}.
type PanicError struct {
	Value any
	Stack string
}

// Error returns "panic: VALUE", the failure's message.
func (e *PanicError) Error() string { return fmt.Sprintf("panic: %v", e.Value) }

// call runs h, turning a panic into a *PanicError.
func call(ctx context.Context, h HandlerFunc, job *Job) (result any, err error) {
	defer func() {
		if v := recover(); v != nil {
			result, err = nil, &PanicError{Value: v, Stack: string(debug.Stack())}
		}
	}()
	result, err = h(ctx, job)
	if err == nil {
		if _, merr := json.Marshal(result); merr != nil {
			err = fmt.Errorf("kvq: the handler's result cannot be encoded as JSON: %w", merr)
		}
	}
	return result, err
}

// failureOf is what a handler's error records.
func failureOf(err error) Failure {
	var p *PanicError
	if errors.As(err, &p) {
		return Failure{Message: p.Error(), Kind: "panic",
			Details: map[string]any{"panic": fmt.Sprint(p.Value), "stack": p.Stack}}
	}
	f := Failure{Message: err.Error(), Kind: "error"}
	var je *JobError
	if errors.As(err, &je) {
		if je.Kind != "" {
			f.Kind = je.Kind
		}
		f.Details, f.RetryIn, f.NoRetry = je.Details, je.RetryIn, je.NoRetry
	} else {
		f.Details = map[string]any{"go_type": fmt.Sprintf("%T", err)}
	}
	if f.Message == "" {
		f.Message = f.Kind
	}
	return f
}

// Typed returns a HandlerFunc that decodes each job's data into a T and calls fn with it, so
// a handler states the data it takes (River's Worker[T], BullMQ's Worker<Data>):
//
//	w.Handle("email", kvq.Typed(func(ctx context.Context, job *kvq.Job, in Email) (any, error) {
//		return nil, send(ctx, in.To)
//	}))
//
// Data that does not decode into a T fails the job with NoRetry: retrying would not help.
func Typed[T any](fn func(ctx context.Context, job *Job, data T) (any, error)) HandlerFunc {
	return func(ctx context.Context, job *Job) (any, error) {
		var data T
		if err := job.Decode(&data); err != nil {
			return nil, NoRetry(err)
		}
		return fn(ctx, job, data)
	}
}
