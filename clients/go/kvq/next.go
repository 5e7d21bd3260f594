// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"time"
)

// The calls of this file take jobs more cheaply than Accept then Finish: FinishNext finishes a
// job and accepts the worker's next in one request and one transaction, AcceptAny takes from
// several types at once. Jobs of bytes data (WithBody) are read back with AcceptedJob.Bytes.

// MaxAcceptTypes is the most types AcceptAny and FinishNext take.
const MaxAcceptTypes = 64

// NextOptions configures the accept half of FinishNext.
type NextOptions struct {
	// Types are the types to take the next job from (nil: the finished job's own type).
	Types []string
	// Timeout is how long to wait for a next job after the finish has committed (0: take one
	// only if it is due at once; at most 5 minutes).
	Timeout time.Duration
	// Worker and WorkerType name the worker the next job is recorded on, as AcceptOptions.
	Worker     string
	WorkerType string
}

func acceptBody(types []string, timeout time.Duration, worker, workerType string) map[string]any {
	body := map[string]any{}
	if types != nil {
		body["types"] = types
	}
	if timeout > 0 {
		body["timeout"] = seconds(timeout)
	}
	if worker != "" {
		body["worker"] = worker
		if workerType != "" {
			body["worker_type"] = workerType
		}
	}
	return body
}

// FinishNext ends a running job as succeeded with result, as Finish does, and in the same
// transaction accepts the next due job of n.Types: one request and one commit where Accept and
// Finish spend two. It returns that job, or nil when none was due within n.Timeout (the finish
// stands either way). On an error (409 `halted` when fenced, 404 `not_found` naming a type of
// n.Types) nothing was finished or accepted.
func (c *Client) FinishNext(ctx context.Context, typ, id, lock string, result any, n NextOptions) (*AcceptedJob, error) {
	body := map[string]any{"lock": lock, "result": result,
		"next": acceptBody(n.Types, n.Timeout, n.Worker, n.WorkerType)}
	var out struct {
		Next *AcceptedJob `json:"next"`
	}
	r := request{method: "POST", path: jobPath(typ, id) + "/finish", body: body,
		retryBody: map[string]any{"lock": lock, "result": result}}
	if _, err := c.do(ctx, r, &out); err != nil {
		return nil, err
	}
	return out.Next, nil
}

// AcceptAny takes one due job of any of types (1..MaxAcceptTypes distinct names): of the jobs
// due in any of them the best priority, then the earliest scheduled time. It waits up to
// o.Timeout for one (o.Count is not used: it takes one), and returns no job and no error when
// none became due in time; 404 `not_found` names the first type that does not exist.
func (c *Client) AcceptAny(ctx context.Context, types []string, o AcceptOptions) ([]AcceptedJob, error) {
	if len(types) == 0 || len(types) > MaxAcceptTypes {
		return nil, fmt.Errorf("kvq: AcceptAny takes 1 to %d types, not %d", MaxAcceptTypes, len(types))
	}
	var out struct {
		Jobs []AcceptedJob `json:"jobs"`
	}
	body := acceptBody(types, o.Timeout, o.Worker, o.WorkerType)
	if _, err := c.do(ctx, request{method: "POST", path: "/v1/accept", body: body}, &out); err != nil {
		return nil, err
	}
	return out.Jobs, nil
}

// WithTimeout gives the job its own activity timeout (more than 0, at most 7 days): a run of
// it with no heartbeat for d is lost, whatever its type's timeout.
func WithTimeout(d time.Duration) AddOption { return func(j *NewJob) { j.Timeout = d } }

// WithBody makes the job's data bytes, kept exactly as given, instead of a JSON object (Add's
// data must then be nil): the job shows DataFormat "bytes", and AcceptedJob.Bytes and
// JobInfo.Bytes give them back.
func WithBody(b []byte) AddOption {
	return func(j *NewJob) { j.Body = append([]byte{}, b...) }
}

// decodeBody is the bytes of a job of data format "bytes" (body or body_base64), or nil.
func decodeBody(format string, body *string, body64 *string) ([]byte, error) {
	if format != "bytes" {
		return nil, nil
	}
	if body != nil {
		return []byte(*body), nil
	}
	if body64 == nil {
		return nil, errors.New("kvq: a job of bytes data without body or body_base64")
	}
	return base64.StdEncoding.DecodeString(*body64)
}

// Bytes is the job's data when its DataFormat is "bytes" (nil for JSON data).
func (a *AcceptedJob) Bytes() ([]byte, error) {
	return decodeBody(a.DataFormat, a.Body, a.BodyBase64)
}

// bodyFields adds a NewJob's bytes data to an add's body.
func (j *NewJob) bodyFields(b map[string]any) {
	if j.Body != nil {
		delete(b, "data")
		b["body_base64"] = base64.StdEncoding.EncodeToString(j.Body)
	}
	if j.Timeout > 0 {
		b["timeout"] = seconds(j.Timeout)
	}
}
