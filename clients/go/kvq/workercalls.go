// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"encoding/json"
	"net/url"
	"time"
)

// The calls of this file are what a worker sends. Most programs use Worker, which makes them;
// they are here for a worker with needs of its own.

// AcceptOptions configures Accept.
type AcceptOptions struct {
	// Timeout is how long to wait for a first job (0: answer at once; at most 5 minutes).
	Timeout time.Duration
	// Count is the most jobs to take at once, 1..100 (0: 1).
	Count int
	// Worker and WorkerType name the registered worker taking the jobs, so they come back at
	// once if it dies or deregisters.
	Worker     string
	WorkerType string
}

// AcceptedJob is a job an Accept handed to this caller: Lock proves it holds the job.
type AcceptedJob struct {
	Type string          `json:"type"`
	ID   string          `json:"id"`
	Lock string          `json:"lock"`
	Data json.RawMessage `json:"data"`
	// DataFormat is "json" (Data is the job's object) or "bytes" (Data is null: see Bytes).
	DataFormat string  `json:"data_format"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
	// Traceparent is the W3C trace context the job was added with, "" for none.
	Traceparent string `json:"traceparent,omitempty"`
	// Attempt is which attempt this run is, 1 for the first; 0 from a server before 0.2.0,
	// whose accept does not say.
	Attempt int `json:"attempt,omitempty"`
}

// Accept takes up to o.Count due jobs of typ, waiting up to o.Timeout for the first. It returns
// no jobs and no error when none became due in time, and 404 `not_found` at once if the type
// does not exist.
func (c *Client) Accept(ctx context.Context, typ string, o AcceptOptions) ([]AcceptedJob, error) {
	body := map[string]any{}
	if o.Timeout > 0 {
		body["timeout"] = seconds(o.Timeout)
	}
	if o.Count > 1 {
		body["count"] = o.Count
	}
	if o.Worker != "" {
		body["worker"] = o.Worker
		if o.WorkerType != "" {
			body["worker_type"] = o.WorkerType
		}
	}
	var out struct {
		Jobs []AcceptedJob `json:"jobs"`
	}
	if _, err := c.do(ctx, request{method: "POST", path: "/v1/accept/" + seg(typ), body: body}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// Update is a running job's heartbeat: it keeps the job for another type timeout and, when
// progress is not nil, sets the job's progress. It reports whether an add resubmitted the job
// while it ran; 409 `halted` (IsHalted) means the caller no longer holds it.
func (c *Client) Update(ctx context.Context, typ, id, lock string, progress any) (bool, error) {
	body := map[string]any{"lock": lock}
	if progress != nil {
		body["progress"] = progress
	}
	var out struct {
		Resubmitted bool `json:"resubmitted"`
	}
	_, err := c.do(ctx, request{method: "POST", path: jobPath(typ, id) + "/update", body: body}, &out)
	return out.Resubmitted, err
}

// Finish ends a running job as succeeded with result (any JSON value; nil for null).
// Finishing again with the same lock changes nothing, so it is safe to retry.
func (c *Client) Finish(ctx context.Context, typ, id, lock string, result any) error {
	body := map[string]any{"lock": lock, "result": result}
	_, err := c.do(ctx, request{method: "POST", path: jobPath(typ, id) + "/finish", body: body}, nil)
	return err
}

// Failure is what Fail records about a failed attempt.
type Failure struct {
	// Message is required; the server cuts it past 4 KiB.
	Message string
	// Kind classifies the error (1..64 bytes; "" for "error").
	Kind string
	// Details is any JSON value (cut past 8 KiB).
	Details any
	// RetryIn, when not nil, retries after that long instead of the type's backoff.
	RetryIn *time.Duration
	// NoRetry ends the job dead now, whatever attempts are left.
	NoRetry bool
}

// FailResult is what the server decided after a Fail.
type FailResult struct {
	// Dead is true when the job ended dead (attempts used up, or NoRetry).
	Dead bool `json:"dead"`
	// RetryAt is when the job is due again (0 when dead).
	RetryAt Millis `json:"retry_at"`
	// Attempt is the attempt that failed.
	Attempt int `json:"attempt"`
}

// Fail records a failed attempt of a running job: it is retried per its type's policy, or ends
// dead. Failing again with the same lock returns what the first call decided.
func (c *Client) Fail(ctx context.Context, typ, id, lock string, f Failure) (*FailResult, error) {
	e := map[string]any{"message": f.Message}
	if f.Kind != "" {
		e["kind"] = f.Kind
	}
	if f.Details != nil {
		e["details"] = f.Details
	}
	body := map[string]any{"lock": lock, "error": e}
	if f.RetryIn != nil {
		body["retry_in"] = seconds(*f.RetryIn)
	}
	if f.NoRetry {
		body["retry"] = false
	}
	out := &FailResult{}
	if _, err := c.do(ctx, request{method: "POST", path: jobPath(typ, id) + "/fail", body: body}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Snooze hands a running job back, pending again after delay, without counting this run as an
// attempt or recording an error: for "not now", and for a worker that stops.
func (c *Client) Snooze(ctx context.Context, typ, id, lock string, delay time.Duration) error {
	body := map[string]any{"lock": lock}
	if delay > 0 {
		body["delay"] = seconds(delay)
	}
	_, err := c.do(ctx, request{method: "POST", path: jobPath(typ, id) + "/snooze", body: body}, nil)
	return err
}

// Register registers the worker id of worker type wtype with the workers layer and returns its
// token. A worker that sends no Heartbeat for healthTimeout (0: the server's 10 s) is declared
// dead, and the jobs it accepted as this worker come back at once. 409 `already_exists` if
// the id is alive elsewhere, unless takeOver.
func (c *Client) Register(ctx context.Context, wtype, id string, healthTimeout time.Duration, info any, takeOver bool) (string, error) {
	body := map[string]any{"id": id}
	if healthTimeout > 0 {
		body["health_timeout"] = seconds(healthTimeout)
	}
	if info != nil {
		body["info"] = info
	}
	if takeOver {
		body["take_over"] = true
	}
	var out struct {
		Token string `json:"token"`
	}
	_, err := c.do(ctx, request{method: "POST", path: "/v1/workers/" + seg(wtype), body: body}, &out)
	return out.Token, err
}

// Heartbeat keeps a registered worker alive; 409 `halted` means it was declared dead,
// deregistered or taken over: register again.
func (c *Client) Heartbeat(ctx context.Context, wtype, id, token string) error {
	body := map[string]any{"token": token}
	_, err := c.do(ctx, request{method: "POST", path: "/v1/workers/" + seg(wtype) + "/" + seg(id) + "/heartbeat", body: body}, nil)
	return err
}

// Deregister ends a worker's registration. Jobs it still held come back as lost runs: hand
// them back first (Snooze).
func (c *Client) Deregister(ctx context.Context, wtype, id, token string) error {
	q := url.Values{"token": {token}}
	_, err := c.do(ctx, request{method: "DELETE", path: "/v1/workers/" + seg(wtype) + "/" + seg(id), query: q}, nil)
	return err
}

// WorkerInfo is one live registered worker.
type WorkerInfo struct {
	ID            string          `json:"id"`
	Info          json.RawMessage `json:"info"`
	RegisteredAt  Millis          `json:"registered_at"`
	LastHeartbeat Millis          `json:"last_heartbeat"`
	// HealthTimeout is in seconds.
	HealthTimeout float64 `json:"health_timeout"`
}

// Membership is a worker type's live workers and its membership version.
type Membership struct {
	Version int64        `json:"version"`
	Workers []WorkerInfo `json:"workers"`
}

// Workers returns the live workers of worker type wtype.
func (c *Client) Workers(ctx context.Context, wtype string) (*Membership, error) {
	out := &Membership{}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/workers/" + seg(wtype)}, out); err != nil {
		return nil, err
	}
	return out, nil
}
