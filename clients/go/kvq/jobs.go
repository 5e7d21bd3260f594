// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Job states and outcomes, as the server names them.
const (
	StatePending  = "pending"
	StateRunning  = "running"
	StateFinished = "finished"

	OutcomeSucceeded = "succeeded"
	OutcomeDead      = "dead"
	OutcomeCancelled = "cancelled"
)

// Millis is a time as the server sends it: milliseconds since the Unix epoch.
type Millis int64

// Time returns m as a time.Time (the zero time for 0).
func (m Millis) Time() time.Time {
	if m == 0 {
		return time.Time{}
	}
	return time.UnixMilli(int64(m))
}

// JobInfo is a stored job, as Get, List, Cancel and Rerun return it (docs/http-api.md, Jobs).
type JobInfo struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	State string `json:"state"`
	// Outcome is "" while the job is not finished.
	Outcome string `json:"outcome"`
	// Data is the job's input; Result what its worker's finish returned; Progress the latest
	// update's progress of the current run. Each is nil when the server has null.
	Data          json.RawMessage `json:"data"`
	Result        json.RawMessage `json:"result"`
	Progress      json.RawMessage `json:"progress"`
	ScheduledTime Millis          `json:"scheduled_time"`
	Priority      int64           `json:"priority"`
	Resubmitted   bool            `json:"resubmitted"`
	Worker        string          `json:"worker"`
	WorkerType    string          `json:"worker_type"`
	// Attempts counts the attempts since the job was last added anew or rerun.
	Attempts int `json:"attempts"`
	// LostRuns counts the runs lost in a row since it was last added or finished.
	LostRuns int `json:"lost_runs"`
	// Errors keeps the last 10 failed or lost attempts, oldest first.
	Errors    []AttemptError `json:"errors"`
	GaveUp    bool           `json:"gave_up"`
	CreatedAt Millis         `json:"created_at"`
	UpdatedAt Millis         `json:"updated_at"`
	StartedAt Millis         `json:"started_at"`
	EndedAt   Millis         `json:"ended_at"`
	// Group is the job's group (WithGroup), "" for none.
	Group string `json:"group"`
	// DataFormat is "json" (Data is the job's object) or "bytes" (Data is null: see Bytes).
	DataFormat string  `json:"data_format"`
	Body       *string `json:"body,omitempty"`
	BodyBase64 *string `json:"body_base64,omitempty"`
	// Timeout is the job's own activity timeout in seconds (WithTimeout); nil: its type's.
	Timeout *float64 `json:"timeout"`
	// Traceparent is the W3C trace context the job was added with, "" for none.
	Traceparent string `json:"traceparent,omitempty"`
	// Dependencies and WaitingOn, on a job added with WithDependsOn: how many it was added
	// with, and how many it still waits on (State is StateWaiting while not 0);
	// OnDependencyFailure its policy. All zero for a job added without.
	Dependencies        int    `json:"dependencies,omitempty"`
	WaitingOn           int    `json:"waiting_on,omitempty"`
	OnDependencyFailure string `json:"on_dependency_failure,omitempty"`
	// HasDependents is true on a job another was added depending on while it had not ended.
	HasDependents bool `json:"has_dependents,omitempty"`
	// Batch is the id of the batch the job is a member of until it ends, "" for none.
	Batch string `json:"batch,omitempty"`
}

// Bytes is the job's data when its DataFormat is "bytes" (nil for JSON data).
func (j *JobInfo) Bytes() ([]byte, error) { return decodeBody(j.DataFormat, j.Body, j.BodyBase64) }

// AttemptError is one failed or lost attempt of a job.
type AttemptError struct {
	Attempt int    `json:"attempt"`
	At      Millis `json:"at"`
	Worker  string `json:"worker"`
	// Kind is the worker's ("error" by default, "panic" for a Worker's panicking handler), or
	// "timeout" / "worker_lost" for a lost run.
	Kind    string          `json:"kind"`
	Message string          `json:"message"`
	Details json.RawMessage `json:"details"`
}

// LastError returns the job's latest failed or lost attempt, or nil if it has none.
func (j *JobInfo) LastError() *AttemptError {
	if len(j.Errors) == 0 {
		return nil
	}
	return &j.Errors[len(j.Errors)-1]
}

func (j *JobInfo) normalize() {
	j.Data, j.Result, j.Progress = rawOrNull(j.Data), rawOrNull(j.Result), rawOrNull(j.Progress)
	for i := range j.Errors {
		j.Errors[i].Details = rawOrNull(j.Errors[i].Details)
	}
}

// IfExists says what adding a job does when its id exists.
type IfExists string

const (
	// IfExistsUpdate (the server's default) replaces a pending job, resubmits a running one and
	// starts a finished one over.
	IfExistsUpdate IfExists = "update"
	// IfExistsKeep leaves an existing job exactly as it is: a producer that retries an add
	// never runs a job twice.
	IfExistsKeep IfExists = "keep"
)

// NewJob is one job to add with AddMany.
type NewJob struct {
	ID string
	// Data is the job's input: anything encoding/json renders as an object (nil: {}).
	Data any
	// Priority orders due jobs, lower first (default 0).
	Priority int64
	// At schedules the job for later; the zero time means now.
	At time.Time
	// IfExists overrides AddMany's default for this job when not "".
	IfExists IfExists
	// Group is the job's group key ("" for none; see WithGroup).
	Group string
	// Timeout is the job's own activity timeout (0: its type's; see WithTimeout).
	Timeout time.Duration
	// Body, when not nil, is the job's data as bytes instead of Data (see WithBody).
	Body []byte
	// Traceparent is the job's W3C trace context ("" for none; see WithTraceparent).
	Traceparent string
	// DependsOn lists the jobs this one waits for (see WithDependsOn); nil for none.
	DependsOn []JobRef
	// OnDependencyFailure is its policy ("" for the server's default, cancel; see
	// WithOnDependencyFailure).
	OnDependencyFailure DependencyFailure
	// Batch is the id of the open batch the job joins ("" for none; see WithBatch).
	Batch string
}

// AddOption changes one Add.
type AddOption func(*NewJob)

// WithPriority sets the job's priority: due jobs are taken lowest first (default 0).
func WithPriority(p int64) AddOption { return func(j *NewJob) { j.Priority = p } }

// At schedules the job to be due at t.
func At(t time.Time) AddOption { return func(j *NewJob) { j.At = t } }

// After schedules the job to be due d from now.
func After(d time.Duration) AddOption {
	return func(j *NewJob) { j.At = time.Now().Add(d) }
}

// WithIfExists says what to do if the id exists (IfExistsUpdate by default).
func WithIfExists(mode IfExists) AddOption { return func(j *NewJob) { j.IfExists = mode } }

// WithGroup puts the job in a group: a tenant, a customer, an account (1..128 bytes, no
// control characters). Accepts take turns between a type's groups, so one group with many
// pending jobs does not starve another, and TypeConfig.MaxRunningPerGroup caps each group's
// running jobs.
//
//	c.Add(ctx, "report", "r-1", data, kvq.WithGroup("tenant-42"))
func WithGroup(group string) AddOption { return func(j *NewJob) { j.Group = group } }

func (j *NewJob) body() map[string]any {
	b := map[string]any{"id": j.ID}
	if j.Data != nil {
		b["data"] = j.Data
	}
	if j.Priority != 0 {
		b["priority"] = j.Priority
	}
	if !j.At.IsZero() {
		b["scheduled_time"] = j.At.UnixMilli()
	}
	if j.IfExists != "" {
		b["if_exists"] = string(j.IfExists)
	}
	if j.Group != "" {
		b["group"] = j.Group
	}
	if j.Traceparent != "" {
		b["traceparent"] = j.Traceparent
	}
	j.bodyFields(b)
	j.workflowFields(b)
	return b
}

// Add adds the job typ/id with data (anything encoding/json renders as an object; nil for
// {}). It reports whether the job was added or changed: false only with
// WithIfExists(IfExistsKeep) when the job already existed. The type must exist (409
// `no_timeout` otherwise).
func (c *Client) Add(ctx context.Context, typ, id string, data any, opts ...AddOption) (bool, error) {
	job := NewJob{ID: id, Data: data}
	for _, opt := range opts {
		opt(&job)
	}
	var out struct {
		Added bool `json:"added"`
	}
	_, err := c.do(ctx, request{method: "POST", path: "/v1/jobs/" + seg(typ), body: job.body(),
		header: c.traceHeader(ctx)}, &out)
	return out.Added, err
}

// AddManyResult is what AddMany did.
type AddManyResult struct {
	// Added counts the jobs added or changed.
	Added int `json:"added"`
	// Kept lists, in order, the ids IfExistsKeep left alone.
	Kept []string `json:"kept"`
}

// AddManyOption changes one AddMany. An IfExists is one: AddMany(ctx, typ, jobs,
// kvq.IfExistsKeep) keeps every existing job that names no IfExists of its own.
type AddManyOption interface {
	applyToAddMany(*addManyOptions)
}

type addManyOptions struct {
	ifExists IfExists
}

func (m IfExists) applyToAddMany(o *addManyOptions) { o.ifExists = m }

func addManyOptionsOf(opts []AddManyOption) addManyOptions {
	var o addManyOptions
	for _, opt := range opts {
		opt.applyToAddMany(&o)
	}
	return o
}

// AddMany adds up to 1,000 jobs of one type in one transaction: all or none. Each job that
// names no IfExists of its own gets the one of opts (the server's default, update, without).
func (c *Client) AddMany(ctx context.Context, typ string, jobs []NewJob, opts ...AddManyOption) (*AddManyResult, error) {
	ifExists := addManyOptionsOf(opts).ifExists
	list := make([]map[string]any, 0, len(jobs))
	for i := range jobs {
		list = append(list, jobs[i].body())
	}
	body := map[string]any{"jobs": list}
	if ifExists != "" {
		body["if_exists"] = string(ifExists)
	}
	out := &AddManyResult{}
	r := request{method: "POST", path: "/v1/jobs/" + seg(typ) + "/batch", body: body, header: c.traceHeader(ctx)}
	if _, err := c.do(ctx, r, out); err != nil {
		return nil, err
	}
	return out, nil
}

func jobPath(typ, id string) string { return "/v1/jobs/" + seg(typ) + "/" + seg(id) }

func (c *Client) jobCall(ctx context.Context, r request) (*JobInfo, error) {
	job := &JobInfo{}
	if _, err := c.do(ctx, r, job); err != nil {
		return nil, err
	}
	job.normalize()
	return job, nil
}

// Get returns the job typ/id; an *APIError `not_found` (IsNotFound) if it does not exist.
func (c *Client) Get(ctx context.Context, typ, id string) (*JobInfo, error) {
	return c.jobCall(ctx, request{method: "GET", path: jobPath(typ, id)})
}

// Remove deletes the job typ/id in any state; a worker running it is halted at its next call.
func (c *Client) Remove(ctx context.Context, typ, id string) error {
	_, err := c.do(ctx, request{method: "DELETE", path: jobPath(typ, id)}, nil)
	return err
}

// Cancel finishes the job with outcome cancelled: a pending job will not run, a running job's
// worker is halted at its next call (its handler's context is cancelled). It returns the job;
// 409 `wrong_state` (IsWrongState) if it is already finished.
func (c *Client) Cancel(ctx context.Context, typ, id string) (*JobInfo, error) {
	return c.jobCall(ctx, request{method: "POST", path: jobPath(typ, id) + "/cancel"})
}

// Rerun makes a finished job (any outcome) pending again, its attempts starting over; opts may
// give it a priority or a time (WithPriority, At, After; IfExists is ignored). 409
// `wrong_state` if it is not finished.
func (c *Client) Rerun(ctx context.Context, typ, id string, opts ...AddOption) (*JobInfo, error) {
	var j NewJob
	for _, opt := range opts {
		opt(&j)
	}
	body := map[string]any{}
	if j.Priority != 0 {
		body["priority"] = j.Priority
	}
	if !j.At.IsZero() {
		body["scheduled_time"] = j.At.UnixMilli()
	}
	return c.jobCall(ctx, request{method: "POST", path: jobPath(typ, id) + "/rerun", body: body})
}

// ListOptions selects the jobs List returns. Zero fields select everything.
type ListOptions struct {
	// State is a state (pending, running, finished), part of one (scheduled, due) or an outcome
	// (succeeded, dead, cancelled).
	State      string
	Worker     string
	WorkerType string
	// Limit is the page size, 1..10,000 (server default 100).
	Limit int
	// Cursor continues from a previous page's NextCursor.
	Cursor string
}

// JobPage is one page of List.
type JobPage struct {
	Jobs []*JobInfo `json:"jobs"`
	// NextCursor is "" on the last page; otherwise pass it as ListOptions.Cursor.
	NextCursor string `json:"next_cursor"`
}

// List returns one page of the type's jobs in id order; 404 `not_found` if the type does not
// exist.
func (c *Client) List(ctx context.Context, typ string, o ListOptions) (*JobPage, error) {
	q := url.Values{}
	for k, v := range map[string]string{"state": o.State, "worker": o.Worker,
		"worker_type": o.WorkerType, "cursor": o.Cursor} {
		if v != "" {
			q.Set(k, v)
		}
	}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	page := &JobPage{}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/jobs/" + seg(typ), query: q}, page); err != nil {
		return nil, err
	}
	for _, j := range page.Jobs {
		j.normalize()
	}
	return page, nil
}

// ListAll follows List's pages from o.Cursor to the end and returns every job they hold.
func (c *Client) ListAll(ctx context.Context, typ string, o ListOptions) ([]*JobInfo, error) {
	var all []*JobInfo
	for {
		page, err := c.List(ctx, typ, o)
		if err != nil {
			return all, err
		}
		all = append(all, page.Jobs...)
		if page.NextCursor == "" {
			return all, nil
		}
		o.Cursor = page.NextCursor
	}
}

// JobEvent is a job's state as Wait and Events report it. Once the job is removed, Found is
// false and only Type and ID are set.
type JobEvent struct {
	Type     string          `json:"type"`
	ID       string          `json:"id"`
	Found    bool            `json:"found"`
	State    string          `json:"state"`
	Outcome  string          `json:"outcome"`
	Data     json.RawMessage `json:"data"`
	Result   json.RawMessage `json:"result"`
	Attempts int             `json:"attempts"`
	Seq      int64           `json:"seq"`
	GaveUp   bool            `json:"gave_up"`
}

// Wait blocks until the job typ/id is in state (StatePending, StateRunning, StateFinished;
// "" for finished) or is removed (Found false), long-polling the server as long as ctx
// allows. It returns 404 `not_found` if the job does not exist when asked, and ctx's error if
// ctx ends first.
func (c *Client) Wait(ctx context.Context, typ, id, state string) (*JobEvent, error) {
	if state == "" {
		state = StateFinished
	}
	for {
		poll := 60 * time.Second
		if deadline, ok := ctx.Deadline(); ok {
			if left := time.Until(deadline); left < poll {
				poll = left
			}
		}
		if poll < time.Second {
			poll = time.Second // the context ends the request sooner if it must
		}
		q := url.Values{"state": {state}, "timeout": {strconv.Itoa(int(poll / time.Second))}}
		ev := &JobEvent{}
		status, err := c.do(ctx, request{method: "GET", path: jobPath(typ, id) + "/wait", query: q}, ev)
		if err != nil {
			return nil, err
		}
		if status == 200 {
			ev.Data, ev.Result = rawOrNull(ev.Data), rawOrNull(ev.Result)
			return ev, nil
		}
		if err := ctx.Err(); err != nil {
			return nil, err
		}
	}
}

// JobFailedError is Result's error for a job that ended dead or cancelled.
type JobFailedError struct {
	// Job is the job as it ended.
	Job *JobInfo
}

// Error names the job, how it ended, its attempts and its last error.
func (e *JobFailedError) Error() string {
	msg := fmt.Sprintf("kvq: job %s/%s %s after %d attempt(s)", e.Job.Type, e.Job.ID, e.Job.Outcome, e.Job.Attempts)
	if last := e.Job.LastError(); last != nil {
		msg += fmt.Sprintf(": %s: %s", last.Kind, last.Message)
	}
	return msg
}

// LastError returns the last failed or lost attempt of the job, or nil (a job cancelled
// before it failed).
func (e *JobFailedError) LastError() *AttemptError { return e.Job.LastError() }

// ErrRemoved is Result's error when the job was removed before it finished.
var ErrRemoved = errors.New("kvq: the job was removed")

// Result awaits the end of the job typ/id and returns its result (nil for null) when it
// succeeded; a *JobFailedError carrying the job (and its last error) when it ended dead or
// cancelled; ErrRemoved if it was removed; 404 `not_found` if it does not exist.
func (c *Client) Result(ctx context.Context, typ, id string) (json.RawMessage, error) {
	ev, err := c.Wait(ctx, typ, id, StateFinished)
	if err != nil {
		return nil, err
	}
	if !ev.Found {
		return nil, ErrRemoved
	}
	if ev.Outcome == OutcomeSucceeded || ev.Outcome == "" {
		return ev.Result, nil
	}
	job, err := c.Get(ctx, typ, id)
	if err != nil {
		if IsNotFound(err) {
			return nil, ErrRemoved
		}
		return nil, err
	}
	return nil, &JobFailedError{Job: job}
}

// EventStream is a job's server-sent events (Events). Read it like a bufio.Scanner:
//
//	for s.Next() { ev := s.Event(); ... }
//	if err := s.Err(); err != nil { ... }
//
// It is not safe for concurrent use. Close it when done early.
type EventStream struct {
	body    interface{ Close() error }
	scanner *bufio.Scanner
	ctxErr  func() error
	stop    chan struct{}
	once    sync.Once
	event   JobEvent
	err     error
	done    bool
}

// Events opens the job's event stream: its state now, then each change, ending after finished
// or once it is removed; with follow, it goes on through later runs and ends only when the
// job is removed. It returns 404 `not_found` at once if the job does not exist. The stream
// ends, with ctx's error, when ctx does.
func (c *Client) Events(ctx context.Context, typ, id string, follow bool) (*EventStream, error) {
	q := url.Values{"follow": {strconv.FormatBool(follow)}}
	resp, err := c.send(ctx, request{method: "GET", path: jobPath(typ, id) + "/events", query: q})
	if err != nil {
		return nil, err
	}
	s := &EventStream{body: resp.Body, scanner: bufio.NewScanner(resp.Body), ctxErr: ctx.Err,
		stop: make(chan struct{})}
	s.scanner.Buffer(make([]byte, 64*1024), 16<<20)
	go func() { // a blocked read ends when ctx does
		select {
		case <-ctx.Done():
			resp.Body.Close()
		case <-s.stop:
		}
	}()
	return s, nil
}

// Next reads the next event; it returns false at the end of the stream or on an error (Err).
func (s *EventStream) Next() bool {
	if s.done {
		return false
	}
	var data []string
	for s.scanner.Scan() {
		line := s.scanner.Text()
		switch {
		case line == "":
			if len(data) == 0 {
				continue
			}
			ev := JobEvent{}
			if err := json.Unmarshal([]byte(strings.Join(data, "\n")), &ev); err != nil {
				s.fail(fmt.Errorf("kvq: bad event: %w", err))
				return false
			}
			ev.Data, ev.Result = rawOrNull(ev.Data), rawOrNull(ev.Result)
			s.event = ev
			return true
		case strings.HasPrefix(line, "data:"):
			data = append(data, strings.TrimPrefix(strings.TrimPrefix(line, "data:"), " "))
		}
		// "event:", ": keep-alive" comments and other fields are skipped.
	}
	err := s.scanner.Err()
	if e := s.ctxErr(); e != nil {
		err = e
	}
	s.fail(err)
	return false
}

func (s *EventStream) fail(err error) {
	s.done, s.err = true, err
	s.close()
}

func (s *EventStream) close() error {
	var err error
	s.once.Do(func() {
		close(s.stop)
		err = s.body.Close()
	})
	return err
}

// Event returns the event the last Next read.
func (s *EventStream) Event() JobEvent { return s.event }

// Err returns the error that ended the stream, or nil if it ended normally.
func (s *EventStream) Err() error { return s.err }

// Close ends the stream.
func (s *EventStream) Close() error {
	s.done = true
	return s.close()
}
