// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"errors"
)

// StateWaiting is the state of a job added with dependencies (WithDependsOn) that have not
// all ended: listed and counted, never accepted.
const StateWaiting = "waiting"

// JobRef names a job by its type and id: a dependency (WithDependsOn), a batch's dead member.
type JobRef struct {
	Type string `json:"type"`
	ID   string `json:"id"`
}

// DependencyFailure says what becomes of a job when one of its dependencies ends dead or
// cancelled (or is removed before it ended).
type DependencyFailure string

const (
	// DependencyFailureCancel (the server's default) cancels the job, its last error of kind
	// "dependency_failed", and the jobs waiting on it follow.
	DependencyFailureCancel DependencyFailure = "cancel"
	// DependencyFailureRun counts the failed dependency as resolved: the job runs once its
	// other dependencies have ended.
	DependencyFailureRun DependencyFailure = "run"
)

// WithDependsOn makes the job wait for these jobs (at most 100, of any types, each existing,
// or added by the same AddMany): it is added StateWaiting and becomes pending once they have
// succeeded (see WithOnDependencyFailure for one that does not). Only a new job, or a finished
// one added anew, takes dependencies: on another the add is 409 `wrong_state`.
//
//	c.Add(ctx, "report", "weekly", nil, kvq.WithDependsOn(kvq.JobRef{Type: "fetch", ID: "eu"}))
func WithDependsOn(deps ...JobRef) AddOption {
	return func(j *NewJob) { j.DependsOn = append(j.DependsOn, deps...) }
}

// WithOnDependencyFailure sets what a dependency that ends dead or cancelled does to the job
// (DependencyFailureCancel by default).
func WithOnDependencyFailure(p DependencyFailure) AddOption {
	return func(j *NewJob) { j.OnDependencyFailure = p }
}

// WithBatch makes the job join the open batch id (PutBatch): 404 `not_found` if it does not
// exist, 409 `wrong_state` (IsWrongState) if it is sealed.
func WithBatch(id string) AddOption { return func(j *NewJob) { j.Batch = id } }

// workflowFields adds a NewJob's dependencies and batch to an add's body.
func (j *NewJob) workflowFields(b map[string]any) {
	if j.DependsOn != nil {
		b["depends_on"] = j.DependsOn
	}
	if j.OnDependencyFailure != "" {
		b["on_dependency_failure"] = string(j.OnDependencyFailure)
	}
	if j.Batch != "" {
		b["batch"] = j.Batch
	}
}

// Dependency is one dependency of a job, as Dependencies returns it.
type Dependency struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	// Resolved is how the dependency had ended when it resolved (OutcomeSucceeded, OutcomeDead,
	// OutcomeCancelled: also for one removed before it ended), "" while it has not.
	Resolved string `json:"resolved"`
	// Job is the dependency as Get shows it now (its Result), nil once removed.
	Job *JobInfo `json:"job"`
}

// Dependencies returns the dependencies the job typ/id was added with, in (type, id) order
// (none for a job added without); 404 `not_found` if the job does not exist. A dependent's
// worker reads its dependencies' results with it.
func (c *Client) Dependencies(ctx context.Context, typ, id string) ([]Dependency, error) {
	var out struct {
		Dependencies []Dependency `json:"dependencies"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: jobPath(typ, id) + "/dependencies"}, &out); err != nil {
		return nil, err
	}
	for i := range out.Dependencies {
		if out.Dependencies[i].Job != nil {
			out.Dependencies[i].Job.normalize()
		}
	}
	if out.Dependencies == nil {
		out.Dependencies = []Dependency{}
	}
	return out.Dependencies, nil
}

// BatchOn says when a batch adds its callback.
type BatchOn string

const (
	// BatchOnComplete (the server's default): once every member has ended, however.
	BatchOnComplete BatchOn = "complete"
	// BatchOnSuccess: only if every member succeeded; otherwise the batch ends "skipped".
	BatchOnSuccess BatchOn = "success"
)

// Batch states, as the server names them.
const (
	BatchOpen    = "open"
	BatchSealed  = "sealed"
	BatchFired   = "fired"
	BatchSkipped = "skipped"
)

// BatchCallback is the job a batch adds once it is sealed and its members have ended. Its data
// (anything encoding/json renders as an object; nil for none) gets a field "batch" with the
// counts: {"id", "members", "succeeded", "dead", "cancelled", "dead_jobs"}. In a Batch the
// server returns, Data is what encoding/json decodes into an any (a map[string]any).
type BatchCallback struct {
	Type string `json:"type"`
	ID   string `json:"id"`
	Data any    `json:"data,omitempty"`
}

// BatchCounts counts a batch's members: every job that joined, those not yet ended, and those
// ended by outcome.
type BatchCounts struct {
	Members    int `json:"members"`
	Unfinished int `json:"unfinished"`
	Succeeded  int `json:"succeeded"`
	Dead       int `json:"dead"`
	Cancelled  int `json:"cancelled"`
}

// Batch is a batch, as PutBatch, SealBatch and GetBatch return it (docs/http-api.md, Batches).
type Batch struct {
	ID       string        `json:"id"`
	Callback BatchCallback `json:"callback"`
	On       BatchOn       `json:"on"`
	// State is BatchOpen, BatchSealed, BatchFired or BatchSkipped.
	State     string      `json:"state"`
	Sealed    bool        `json:"sealed"`
	Fired     bool        `json:"fired"`
	Counts    BatchCounts `json:"counts"`
	CreatedAt Millis      `json:"created_at"`
	// SettledAt is when it fired or was skipped, 0 before.
	SettledAt Millis `json:"settled_at"`
}

func batchPath(id string) string { return "/v1/batches/" + seg(id) }

func (c *Client) batchCall(ctx context.Context, r request) (*Batch, error) {
	b := &Batch{}
	if _, err := c.do(ctx, r, b); err != nil {
		return nil, err
	}
	return b, nil
}

// PutBatch creates the batch id, open, or changes the callback of an open one (its members
// stay); on is BatchOnComplete or BatchOnSuccess ("" for the server's default, complete). On a
// sealed batch the same callback changes nothing and another is 409 `wrong_state`; 404
// `not_found` if the callback's type does not exist.
func (c *Client) PutBatch(ctx context.Context, id string, callback BatchCallback, on BatchOn) (*Batch, error) {
	body := map[string]any{"callback": callback}
	if on != "" {
		body["on"] = string(on)
	}
	return c.batchCall(ctx, request{method: "PUT", path: batchPath(id), body: body})
}

// SealBatch seals the batch: no more jobs may join it, and if every member has ended (or it has
// none) its callback is added now. Sealing a sealed batch changes nothing; 404 `not_found`.
func (c *Client) SealBatch(ctx context.Context, id string) (*Batch, error) {
	return c.batchCall(ctx, request{method: "POST", path: batchPath(id) + "/seal", body: map[string]any{}})
}

// GetBatch returns the batch id; 404 `not_found` if it does not exist.
func (c *Client) GetBatch(ctx context.Context, id string) (*Batch, error) {
	return c.batchCall(ctx, request{method: "GET", path: batchPath(id)})
}

// FanOut puts the batch batchID with callback and on, adds jobs of type typ with Batch set to
// it, in AddMany calls of at most 1,000 (opts as AddMany takes them), then seals it, and
// returns the batch as the seal left it. Each step is its own request: should one fail, the
// batch is left unsealed, and an unsealed batch never fires.
//
//	b, err := c.FanOut(ctx, "nightly", "resize", jobs, kvq.BatchCallback{Type: "report", ID: "nightly"}, "")
func (c *Client) FanOut(ctx context.Context, batchID, typ string, jobs []NewJob, callback BatchCallback, on BatchOn, opts ...AddManyOption) (*Batch, error) {
	if batchID == "" {
		return nil, errors.New("kvq: FanOut needs a batch id")
	}
	if _, err := c.PutBatch(ctx, batchID, callback, on); err != nil {
		return nil, err
	}
	members := make([]NewJob, len(jobs))
	copy(members, jobs)
	for i := range members {
		members[i].Batch = batchID
	}
	for start := 0; start < len(members); start += maxAddMany {
		end := start + maxAddMany
		if end > len(members) {
			end = len(members)
		}
		if _, err := c.AddMany(ctx, typ, members[start:end], opts...); err != nil {
			return nil, err
		}
	}
	return c.SealBatch(ctx, batchID)
}

// maxAddMany is the most jobs one batch add takes.
const maxAddMany = 1000
