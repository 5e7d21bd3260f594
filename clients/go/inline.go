package kvq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"
)

// Producer is what code that adds jobs and awaits their results needs: a *Client, or an
// *Inline in that code's unit tests.
type Producer interface {
	Add(ctx context.Context, typ, id string, data any, opts ...AddOption) (bool, error)
	Get(ctx context.Context, typ, id string) (*JobInfo, error)
	Result(ctx context.Context, typ, id string) (json.RawMessage, error)
}

var (
	_ Producer  = (*Client)(nil)
	_ Producer  = (*Inline)(nil)
	_ Registrar = (*Inline)(nil)
)

// Inline runs handlers in process, without a server, for unit tests of the code that adds jobs
// and of the handlers themselves. Jobs are kept in memory with the server's semantics where it
// matters to a test: data round-trips through JSON, a handler's error or panic is a failed
// attempt recorded in the job's Errors and retried until its type's MaxAttempts (default 25),
// NoRetry ends a job dead, SnoozeFor hands it back without counting an attempt, and a
// returned value becomes the job's result. Jobs run only when Drain (or Result) is called,
// one at a time, by priority then in the order they were added; scheduled times and backoff
// delays are not waited for. The handler's context is Drain's.
//
// The zero value is not usable; make one with NewInline. It is safe for concurrent use, but
// Drain runs one job at a time.
type Inline struct {
	mu       sync.Mutex
	handlers map[string]HandlerFunc
	types    map[string]TypeConfig
	jobs     map[[2]string]*inlineJob
	added    int64 // order of adds
}

type inlineJob struct {
	info  JobInfo
	order int64
}

// NewInline returns an empty in-process job system.
func NewInline() *Inline {
	return &Inline{handlers: map[string]HandlerFunc{}, types: map[string]TypeConfig{},
		jobs: map[[2]string]*inlineJob{}}
}

// Handle sets the handler of jobs of type typ.
func (in *Inline) Handle(typ string, h HandlerFunc) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.handlers[typ] = h
}

// SetType sets a type's settings; only MaxAttempts matters inline. Types need not be set.
func (in *Inline) SetType(typ string, cfg TypeConfig) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.types[typ] = cfg
}

// Add adds a job as Client.Add does (IfExistsUpdate by default, IfExistsKeep leaves an
// existing job alone and reports false). Data must encode as a JSON object (or be nil).
func (in *Inline) Add(ctx context.Context, typ, id string, data any, opts ...AddOption) (bool, error) {
	job := NewJob{ID: id, Data: data}
	for _, opt := range opts {
		opt(&job)
	}
	in.mu.Lock()
	defer in.mu.Unlock()
	return in.addLocked(typ, job, "")
}

// AddMany adds jobs as Client.AddMany does: all of them, or none if one is invalid.
func (in *Inline) AddMany(ctx context.Context, typ string, jobs []NewJob, ifExists IfExists) (*AddManyResult, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, j := range jobs {
		if _, err := inlineData(j.Data); err != nil {
			return nil, err
		}
	}
	out := &AddManyResult{}
	for _, j := range jobs {
		added, _ := in.addLocked(typ, j, ifExists)
		if added {
			out.Added++
		} else {
			out.Kept = append(out.Kept, j.ID)
		}
	}
	return out, nil
}

func inlineData(data any) (json.RawMessage, error) {
	if data == nil {
		return json.RawMessage("{}"), nil
	}
	raw, err := json.Marshal(data)
	if err != nil {
		return nil, &APIError{Status: 400, Code: "invalid_argument", Message: "field 'data': " + err.Error()}
	}
	if !bytes.HasPrefix(bytes.TrimSpace(raw), []byte("{")) {
		return nil, &APIError{Status: 400, Code: "invalid_argument", Message: "field 'data' must be an object"}
	}
	return raw, nil
}

func (in *Inline) addLocked(typ string, j NewJob, defaultIfExists IfExists) (bool, error) {
	if j.ID == "" {
		return false, &APIError{Status: 400, Code: "invalid_argument", Message: "field 'id' is required"}
	}
	data, err := inlineData(j.Data)
	if err != nil {
		return false, err
	}
	mode := j.IfExists
	if mode == "" {
		mode = defaultIfExists
	}
	key := [2]string{typ, j.ID}
	old := in.jobs[key]
	if old != nil && mode == IfExistsKeep {
		return false, nil
	}
	now := Millis(time.Now().UnixMilli())
	at := now
	if !j.At.IsZero() {
		at = Millis(j.At.UnixMilli())
	}
	if old != nil && old.info.State == StateRunning {
		old.info.Data, old.info.Resubmitted, old.info.ScheduledTime = data, true, at
		return true, nil
	}
	in.added++
	nj := &inlineJob{order: in.added, info: JobInfo{Type: typ, ID: j.ID, State: StatePending, Data: data,
		ScheduledTime: at, Priority: j.Priority, CreatedAt: now, UpdatedAt: now}}
	if old != nil {
		nj.info.CreatedAt = old.info.CreatedAt
	}
	in.jobs[key] = nj
	return true, nil
}

// Get returns a copy of the job; an *APIError `not_found` if there is none.
func (in *Inline) Get(ctx context.Context, typ, id string) (*JobInfo, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	j := in.jobs[[2]string{typ, id}]
	if j == nil {
		return nil, &APIError{Status: 404, Code: "not_found", Message: fmt.Sprintf("job %s/%s not found", typ, id)}
	}
	return j.copy(), nil
}

func (j *inlineJob) copy() *JobInfo {
	info := j.info
	info.Errors = append([]AttemptError(nil), j.info.Errors...)
	return &info
}

// Jobs returns copies of the type's jobs, in id order.
func (in *Inline) Jobs(typ string) []*JobInfo {
	in.mu.Lock()
	defer in.mu.Unlock()
	var out []*JobInfo
	for key, j := range in.jobs {
		if key[0] == typ {
			out = append(out, j.copy())
		}
	}
	sort.Slice(out, func(a, b int) bool { return out[a].ID < out[b].ID })
	return out
}

// Drain runs pending jobs, retries included, until none is left that can run now: every job
// has finished, or was snoozed during this Drain. It returns the number of runs, and an
// error if a pending job's type has no handler or ctx ends.
func (in *Inline) Drain(ctx context.Context) (int, error) {
	snoozed := map[*inlineJob]bool{}
	runs := 0
	for {
		if err := ctx.Err(); err != nil {
			return runs, err
		}
		j, h, err := in.next(snoozed)
		if err != nil || j == nil {
			return runs, err
		}
		runs++
		in.runOne(ctx, j, h, snoozed)
	}
}

// next takes the next job to run and marks it running.
func (in *Inline) next(skip map[*inlineJob]bool) (*inlineJob, HandlerFunc, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	var best *inlineJob
	for _, j := range in.jobs {
		if j.info.State != StatePending || skip[j] {
			continue
		}
		if best == nil || j.info.Priority < best.info.Priority ||
			(j.info.Priority == best.info.Priority && j.order < best.order) {
			best = j
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	h := in.handlers[best.info.Type]
	if h == nil {
		return nil, nil, fmt.Errorf("kvq: inline: no handler for job type %q (job %q)", best.info.Type, best.info.ID)
	}
	now := Millis(time.Now().UnixMilli())
	best.info.State, best.info.Worker, best.info.Progress = StateRunning, "inline", nil
	best.info.Attempts++
	best.info.StartedAt, best.info.UpdatedAt = now, now
	return best, h, nil
}

func (in *Inline) runOne(ctx context.Context, j *inlineJob, h HandlerFunc, snoozed map[*inlineJob]bool) {
	job := &Job{Type: j.info.Type, ID: j.info.ID, Data: append(json.RawMessage(nil), j.info.Data...)}
	job.progress = func(ctx context.Context, v any) error {
		raw, err := json.Marshal(v)
		if err != nil {
			return &APIError{Status: 400, Code: "invalid_argument", Message: "field 'progress': " + err.Error()}
		}
		in.mu.Lock()
		defer in.mu.Unlock()
		j.info.Progress = raw
		return nil
	}
	result, err := call(ctx, h, job)

	in.mu.Lock()
	defer in.mu.Unlock()
	now := Millis(time.Now().UnixMilli())
	info := &j.info
	info.UpdatedAt = now
	var snooze *snoozeError
	switch {
	case info.Resubmitted: // an add changed it while it ran: it runs again
		info.State, info.Resubmitted = StatePending, false
	case err == nil:
		raw, _ := json.Marshal(result) // call checked that it encodes
		info.State, info.Outcome, info.Result, info.EndedAt = StateFinished, OutcomeSucceeded, rawOrNull(raw), now
		info.LostRuns = 0
	case errors.As(err, &snooze):
		info.State = StatePending
		info.Attempts--
		snoozed[j] = true
	default:
		f := failureOf(err)
		details, _ := json.Marshal(f.Details)
		info.Errors = append(info.Errors, AttemptError{Attempt: info.Attempts, At: now, Worker: "inline",
			Kind: f.Kind, Message: f.Message, Details: rawOrNull(details)})
		if len(info.Errors) > 10 {
			info.Errors = info.Errors[len(info.Errors)-10:]
		}
		limit := in.types[info.Type].MaxAttempts
		if limit <= 0 {
			limit = 25
		}
		if f.NoRetry || info.Attempts >= limit {
			info.State, info.Outcome, info.EndedAt = StateFinished, OutcomeDead, now
		} else {
			info.State = StatePending
		}
	}
}

// Result drains (see Drain), then returns the job's result as Client.Result does: its result
// if it succeeded, a *JobFailedError if it ended dead, 404 `not_found` if there is no such
// job. A job still not finished after the drain (snoozed) is an error.
func (in *Inline) Result(ctx context.Context, typ, id string) (json.RawMessage, error) {
	if _, err := in.Drain(ctx); err != nil {
		return nil, err
	}
	job, err := in.Get(ctx, typ, id)
	if err != nil {
		return nil, err
	}
	if job.State != StateFinished {
		return nil, fmt.Errorf("kvq: inline: job %s/%s is %s after Drain (snoozed?)", typ, id, job.State)
	}
	if job.Outcome != OutcomeSucceeded {
		return nil, &JobFailedError{Job: job}
	}
	return job.Result, nil
}
