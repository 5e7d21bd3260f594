// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"math/rand"
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
// attempt recorded in the job's Errors and retried after its type's backoff until its
// MaxAttempts (default 25), NoRetry ends a job dead, SnoozeFor hands it back for later without
// counting an attempt, and a returned value becomes the job's result. The handler's context is
// Drain's.
//
// Time is the Inline's own clock (Now): the real time plus what Advance, Drain and Result moved
// it. A job is run only once that clock reaches its scheduled time (At, After, a retry's
// backoff, a snooze). Drain runs every due job, then moves the clock to the next job's time and
// goes on until nothing is left to run, so jobs run in the order of their times and a test
// never sleeps; DrainDue runs only what is due now and leaves the clock alone, so a test can
// see that a job scheduled later has not run yet (Advance, then DrainDue again, runs it).
// Within a type, due jobs run in the server's order: by priority first; within a priority each
// group with due jobs stands in line as one entry at its in_turn_at, the later of its first
// pending job's time (its best by priority, then time) and its last run's start, so a group
// just served goes to the back; jobs without a group are not one more group: each stands at
// its own scheduled time, and a group goes before it only if its in_turn_at is strictly earlier
// (a tie goes to the job without a group). A group whose first job is not due yet is not in
// line, even if a worse-priority job of it is due. Between types, the lower priority runs
// first, then the earlier place in line (scheduled time or in_turn_at), then the earlier add.
//
// Flow control holds as on a server: a paused type's jobs are not run (PauseType; a pause for a
// while ends by the Inline's clock), and with SetConcurrency(n) up to n handlers run at once,
// never more of a type than its TypeConfig.MaxRunning nor of a group than its
// MaxRunningPerGroup; a type's Rate counts runs started per window of the Inline's clock.
// Schedules are not run inline.
//
// The zero value is not usable; make one with NewInline. It is safe for concurrent use.
type Inline struct {
	mu          sync.Mutex
	handlers    map[string]HandlerFunc
	types       map[string]*inlineType
	jobs        map[[2]string]*inlineJob
	added       int64         // order of adds
	offset      time.Duration // the clock: real time plus this
	concurrency int
	turnSeq     int64
	turns       map[[2]string]inlineTurn // (type, group) -> its last run's start
}

type inlineJob struct {
	info  JobInfo
	order int64
}

type inlineType struct {
	cfg         TypeConfig // as SetType merged it
	paused      bool
	pausedUntil Millis   // 0: until resumed
	starts      []Millis // runs started within the rate window
}

type inlineTurn struct {
	seq int64
	at  Millis
}

// NewInline returns an empty in-process job system whose clock is the real time, running one
// handler at a time.
func NewInline() *Inline {
	return &Inline{handlers: map[string]HandlerFunc{}, types: map[string]*inlineType{},
		jobs: map[[2]string]*inlineJob{}, concurrency: 1, turns: map[[2]string]inlineTurn{}}
}

// Now returns the Inline's clock: the real time plus what Advance, Drain and Result moved it.
func (in *Inline) Now() time.Time {
	in.mu.Lock()
	defer in.mu.Unlock()
	return time.Now().Add(in.offset)
}

func (in *Inline) nowLocked() Millis { return Millis(time.Now().Add(in.offset).UnixMilli()) }

// Advance moves the Inline's clock forward by d, so jobs scheduled up to then are due (DrainDue
// runs them).
func (in *Inline) Advance(d time.Duration) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if d > 0 {
		in.offset += d
	}
}

// SetConcurrency makes Drain, DrainDue and Result run up to n handlers at once, each in its own
// goroutine (default 1: one at a time, in order), never more of a type than its MaxRunning nor
// of a group than its type's MaxRunningPerGroup.
func (in *Inline) SetConcurrency(n int) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if n < 1 {
		n = 1
	}
	in.concurrency = n
}

// Handle sets the handler of jobs of type typ.
func (in *Inline) Handle(typ string, h HandlerFunc) {
	in.mu.Lock()
	defer in.mu.Unlock()
	in.handlers[typ] = h
}

func (in *Inline) typeLocked(typ string) *inlineType {
	t := in.types[typ]
	if t == nil {
		t = &inlineType{}
		in.types[typ] = t
	}
	return t
}

// SetType changes a type's settings as Client.SetType does (a zero field leaves a setting as
// it is, NoLimit clears a limit). What matters inline: MaxAttempts, Backoff, MaxRunning,
// MaxRunningPerGroup and Rate. Types need not be set.
func (in *Inline) SetType(typ string, cfg TypeConfig) {
	in.mu.Lock()
	defer in.mu.Unlock()
	c := &in.typeLocked(typ).cfg
	if cfg.Timeout > 0 {
		c.Timeout = cfg.Timeout
	}
	if cfg.FinishedRetention > 0 {
		c.FinishedRetention = cfg.FinishedRetention
	}
	if cfg.MaxLostRuns > 0 {
		c.MaxLostRuns = cfg.MaxLostRuns
	}
	if cfg.MaxAttempts > 0 {
		c.MaxAttempts = cfg.MaxAttempts
	}
	if b := cfg.Backoff; b != nil {
		merged := BackoffConfig{}
		if c.Backoff != nil {
			merged = *c.Backoff
		}
		merged = merged.overlaid(*b)
		c.Backoff = &merged
	}
	if cfg.MaxRunning == NoLimit {
		c.MaxRunning = 0
	} else if cfg.MaxRunning > 0 {
		c.MaxRunning = cfg.MaxRunning
	}
	if cfg.MaxRunningPerGroup == NoLimit {
		c.MaxRunningPerGroup = 0
	} else if cfg.MaxRunningPerGroup > 0 {
		c.MaxRunningPerGroup = cfg.MaxRunningPerGroup
	}
	if r := cfg.Rate; r != nil {
		if r.Limit <= 0 {
			c.Rate = nil
		} else {
			rate := *r
			c.Rate = &rate
		}
	}
}

func (in *Inline) typeInfoLocked(typ string) *Type {
	t := in.typeLocked(typ)
	in.pausedLocked(t, in.nowLocked())
	c := t.cfg
	out := &Type{Name: typ, Timeout: c.Timeout, FinishedRetention: c.FinishedRetention,
		MaxLostRuns: c.MaxLostRuns, MaxAttempts: c.MaxAttempts, Backoff: t.backoff(),
		Paused: t.paused, PausedUntil: t.pausedUntil, MaxRunning: c.MaxRunning,
		MaxRunningPerGroup: c.MaxRunningPerGroup}
	if out.MaxAttempts <= 0 {
		out.MaxAttempts = 25
	}
	if c.Rate != nil {
		rate := *c.Rate
		out.Rate = &rate
	}
	return out
}

// backoff is the type's backoff with the server's defaults where it sets none.
func (t *inlineType) backoff() BackoffConfig {
	b := BackoffConfig{Base: time.Second, Factor: 2, Cap: time.Hour, Jitter: 0.2}
	if c := t.cfg.Backoff; c != nil {
		b = b.overlaid(*c)
	}
	return b
}

// overlaid is b with the fields o sets (above zero) taken from o, as the server merges a
// type's backoff: a zero field leaves the setting alone.
func (b BackoffConfig) overlaid(o BackoffConfig) BackoffConfig {
	if o.Base > 0 {
		b.Base = o.Base
	}
	if o.Factor > 0 {
		b.Factor = o.Factor
	}
	if o.Cap > 0 {
		b.Cap = o.Cap
	}
	if o.Jitter > 0 {
		b.Jitter = o.Jitter
	}
	return b
}

// GetType returns the type's settings as Client.GetType does (with the server's defaults for
// what was never set); 404 `not_found` for a type with no handler, settings or jobs.
func (in *Inline) GetType(ctx context.Context, typ string) (*Type, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.existsLocked(typ); err != nil {
		return nil, err
	}
	return in.typeInfoLocked(typ), nil
}

func (in *Inline) existsLocked(typ string) error {
	if in.types[typ] != nil || in.handlers[typ] != nil {
		return nil
	}
	for key := range in.jobs {
		if key[0] == typ {
			return nil
		}
	}
	return &APIError{Status: 404, Code: "not_found", Message: fmt.Sprintf("type '%s' does not exist", typ)}
}

// PauseType pauses the type as Client.PauseType does: its jobs are not run until ResumeType,
// or, when d > 0, until the Inline's clock has moved d on (Drain moves it there when nothing
// else is left to run).
func (in *Inline) PauseType(ctx context.Context, typ string, d time.Duration) (*Type, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.existsLocked(typ); err != nil {
		return nil, err
	}
	t := in.typeLocked(typ)
	t.paused, t.pausedUntil = true, 0
	if d > 0 {
		ms := d.Milliseconds()
		if ms < 1 {
			ms = 1
		}
		t.pausedUntil = in.nowLocked() + Millis(ms)
	}
	return in.typeInfoLocked(typ), nil
}

// ResumeType ends the type's pause, as Client.ResumeType does.
func (in *Inline) ResumeType(ctx context.Context, typ string) (*Type, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.existsLocked(typ); err != nil {
		return nil, err
	}
	t := in.typeLocked(typ)
	t.paused, t.pausedUntil = false, 0
	return in.typeInfoLocked(typ), nil
}

// pausedLocked reports whether t is paused now, ending a pause whose time has come.
func (in *Inline) pausedLocked(t *inlineType, now Millis) bool {
	if t.paused && t.pausedUntil != 0 && now >= t.pausedUntil {
		t.paused, t.pausedUntil = false, 0
	}
	return t.paused
}

// Add adds a job as Client.Add does (IfExistsUpdate by default, IfExistsKeep leaves an
// existing job alone and reports false). Data must encode as a JSON object (or be nil). After
// counts from the Inline's clock.
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
func (in *Inline) AddMany(ctx context.Context, typ string, jobs []NewJob, opts ...AddManyOption) (*AddManyResult, error) {
	ifExists := addManyOptionsOf(opts).ifExists
	in.mu.Lock()
	defer in.mu.Unlock()
	for _, j := range jobs {
		if _, err := inlineData(j.Data); err != nil {
			return nil, err
		}
		if err := checkGroup(j.Group); err != nil {
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

func checkGroup(g string) error {
	bad := len(g) > 128
	for i := 0; i < len(g) && !bad; i++ {
		bad = g[i] < 0x20 || g[i] == 0x7f
	}
	if bad {
		return &APIError{Status: 400, Code: "invalid_argument",
			Message: "field 'group' must be 1..128 bytes without control characters"}
	}
	return nil
}

func (in *Inline) addLocked(typ string, j NewJob, defaultIfExists IfExists) (bool, error) {
	if j.ID == "" {
		return false, &APIError{Status: 400, Code: "invalid_argument", Message: "field 'id' is required"}
	}
	data, err := inlineData(j.Data)
	if err != nil {
		return false, err
	}
	if err := checkGroup(j.Group); err != nil {
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
	now := in.nowLocked()
	at := now
	if j.after != nil {
		at = now + Millis(j.after.Milliseconds())
	} else if !j.At.IsZero() {
		at = Millis(j.At.UnixMilli())
	}
	if old != nil && old.info.State == StateRunning {
		// Resubmitted: it runs again at `at` once this run ends, in the group it has.
		old.info.Data, old.info.Resubmitted, old.info.ScheduledTime = data, true, at
		return true, nil
	}
	in.forgetTurnLocked(typ, j.Group)
	in.added++
	nj := &inlineJob{order: in.added, info: JobInfo{Type: typ, ID: j.ID, State: StatePending, Data: data,
		ScheduledTime: at, Priority: j.Priority, CreatedAt: now, UpdatedAt: now, Group: j.Group}}
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

// Drain runs jobs until none is left to run: every due job, then, when nothing is due, it moves
// the Inline's clock to the next time a job is due (a scheduled job, a retry after its backoff,
// the end of a pause for a while) and goes on. A job snoozed during this Drain, and the jobs of
// a type paused until resumed, are left pending. It returns the number of runs, and an error if
// a job due to run has no handler for its type or ctx ends.
func (in *Inline) Drain(ctx context.Context) (int, error) {
	return in.run(ctx, true, nil)
}

// DrainDue runs the jobs due by the Inline's clock (and those that fall due as it runs, such as
// a retry with no delay) until none is, without moving the clock: a job scheduled later stays
// pending until Advance (or a Drain) brings the clock to it.
func (in *Inline) DrainDue(ctx context.Context) (int, error) {
	return in.run(ctx, false, nil)
}

// run starts jobs, up to the concurrency, until none can start; with advance, it then moves
// the clock to the next time one can and goes on. stop, called with in.mu held, ends it early.
func (in *Inline) run(ctx context.Context, advance bool, stop func() bool) (int, error) {
	snoozed := map[*inlineJob]bool{}
	ended := make(chan struct{})
	runs, active := 0, 0
	var failed error
	for {
		if failed == nil {
			failed = ctx.Err()
		}
		in.mu.Lock()
		started := 0
		for failed == nil && active < in.concurrency && (stop == nil || !stop()) {
			j, h, err := in.startLocked(snoozed)
			if err != nil {
				failed = err
			}
			if j == nil {
				break
			}
			started++
			active++
			runs++
			go func() {
				in.runOne(ctx, j, h, snoozed)
				ended <- struct{}{}
			}()
		}
		moved := false
		if started == 0 && active == 0 && failed == nil && advance && (stop == nil || !stop()) {
			moved = in.advanceLocked(snoozed)
		}
		in.mu.Unlock()
		switch {
		case started > 0 || moved:
			continue
		case active > 0:
			<-ended
			active--
			continue
		}
		return runs, failed
	}
}

// startLocked takes the next job to run and marks it running; nil if none can start now.
func (in *Inline) startLocked(skip map[*inlineJob]bool) (*inlineJob, HandlerFunc, error) {
	now := in.nowLocked()
	typeRunning := map[string]int{}
	groupRunning := map[[2]string]int{}
	for _, j := range in.jobs {
		if j.info.State == StateRunning {
			typeRunning[j.info.Type]++
			if j.info.Group != "" {
				groupRunning[[2]string{j.info.Type, j.info.Group}]++
			}
		}
	}
	// Each type's next job as the server's accept would give it, then the best of them.
	var best *inlineJob
	var bestAt Millis // where best stands: its scheduled time, or its group's in_turn_at
	for typ, h := range in.headsLocked(now, skip, groupRunning) {
		t := in.typeLocked(typ)
		if in.pausedLocked(t, now) {
			continue
		}
		if c := t.cfg; (c.MaxRunning > 0 && typeRunning[typ] >= c.MaxRunning) ||
			(c.Rate != nil && t.rateFullAt(now) > now) {
			continue
		}
		if best == nil || h.job.info.Priority < best.info.Priority ||
			(h.job.info.Priority == best.info.Priority && (h.at < bestAt ||
				(h.at == bestAt && h.job.order < best.order))) {
			best, bestAt = h.job, h.at
		}
	}
	if best == nil {
		return nil, nil, nil
	}
	h := in.handlers[best.info.Type]
	if h == nil {
		return nil, nil, fmt.Errorf("kvq: inline: no handler for job type %q (job %q)", best.info.Type, best.info.ID)
	}
	t := in.typeLocked(best.info.Type)
	if t.cfg.Rate != nil {
		t.starts = append(t.starts, now)
	}
	if best.info.Group != "" {
		in.turnSeq++
		in.turns[[2]string{best.info.Type, best.info.Group}] = inlineTurn{seq: in.turnSeq, at: now}
	}
	best.info.State, best.info.Worker, best.info.Progress = StateRunning, "inline", nil
	best.info.Attempts++
	best.info.StartedAt, best.info.UpdatedAt = now, now
	return best, h, nil
}

// inlineHead is a type's next job and where it stands in line.
type inlineHead struct {
	job *inlineJob
	at  Millis
}

// firstBefore orders a type's pending jobs as the server's indexes do: priority, then
// scheduled time, then id.
func firstBefore(a, b *inlineJob) bool {
	if a.info.Priority != b.info.Priority {
		return a.info.Priority < b.info.Priority
	}
	if a.info.ScheduledTime != b.info.ScheduledTime {
		return a.info.ScheduledTime < b.info.ScheduledTime
	}
	return a.info.ID < b.info.ID
}

// inlinePlace is where a group stands in line: (priority, in_turn_at), then, among groups in
// turn at the same millisecond, those whose turn is their first job's time by name before
// those whose turn is a last accept, in accept order (the server's microseconds).
type inlinePlace struct {
	priority int64
	at       Millis
	accepted bool
	seq      int64
	name     string
}

func (p inlinePlace) before(q inlinePlace) bool {
	switch {
	case p.priority != q.priority:
		return p.priority < q.priority
	case p.at != q.at:
		return p.at < q.at
	case p.accepted != q.accepted:
		return !p.accepted
	case p.seq != q.seq:
		return p.seq < q.seq
	}
	return p.name < q.name
}

// placeLocked is where the group whose first pending job is first stands in line: at its
// in_turn_at, that job's time or its last accept's if later.
func (in *Inline) placeLocked(typ, group string, first *inlineJob) inlinePlace {
	if tr, ok := in.turns[[2]string{typ, group}]; ok && tr.at >= first.info.ScheduledTime {
		return inlinePlace{priority: first.info.Priority, at: tr.at, accepted: true, seq: tr.seq}
	}
	return inlinePlace{priority: first.info.Priority, at: first.info.ScheduledTime, name: group}
}

// headsLocked returns, per type, the job an accept of it would take now, as the server picks
// it (its flow control aside, but for max_running_per_group): by priority first; within a
// priority each group stands in line once, at its in_turn_at, and each job without a group at
// its own scheduled time, a group going first only if its in_turn_at is strictly earlier. A
// group whose first job (by priority, then time) is not due is not in line, nor is a group at
// its type's MaxRunningPerGroup. Jobs in skip are left out.
func (in *Inline) headsLocked(now Millis, skip map[*inlineJob]bool, groupRunning map[[2]string]int) map[string]inlineHead {
	ungrouped := map[string]*inlineJob{}
	firsts := map[[2]string]*inlineJob{}
	for _, j := range in.jobs {
		if j.info.State != StatePending || skip[j] {
			continue
		}
		if j.info.Group == "" {
			if b := ungrouped[j.info.Type]; j.info.ScheduledTime <= now && (b == nil || firstBefore(j, b)) {
				ungrouped[j.info.Type] = j
			}
			continue
		}
		key := [2]string{j.info.Type, j.info.Group}
		if b := firsts[key]; b == nil || firstBefore(j, b) {
			firsts[key] = j
		}
	}
	turns := map[string]inlinePlace{}
	turnJobs := map[string]*inlineJob{}
	for key, first := range firsts {
		typ := key[0]
		if per := in.typeLocked(typ).cfg.MaxRunningPerGroup; per > 0 && groupRunning[key] >= per {
			continue // full: out of line until one of its runs ends
		}
		p := in.placeLocked(typ, key[1], first)
		if p.at > now {
			continue // its first job, or its turn, is not due
		}
		if b, ok := turns[typ]; !ok || p.before(b) {
			turns[typ], turnJobs[typ] = p, first
		}
	}
	heads := map[string]inlineHead{}
	for typ, j := range ungrouped {
		heads[typ] = inlineHead{j, j.info.ScheduledTime}
	}
	for typ, p := range turns {
		u, ok := heads[typ]
		if !ok || p.priority < u.job.info.Priority || (p.priority == u.job.info.Priority && p.at < u.at) {
			heads[typ] = inlineHead{turnJobs[typ], p.at}
		}
	}
	return heads
}

// forgetTurnLocked forgets a group's last accept if it has no pending or running job (the
// server then deletes the group's row), so a job added to it later stands at its own time.
func (in *Inline) forgetTurnLocked(typ, group string) {
	key := [2]string{typ, group}
	if _, ok := in.turns[key]; !ok || group == "" {
		return
	}
	for _, j := range in.jobs {
		if j.info.Type == typ && j.info.Group == group && j.info.State != StateFinished {
			return
		}
	}
	delete(in.turns, key)
}

// rateFullAt returns when the type's rate window next has room (now or earlier if it has).
func (t *inlineType) rateFullAt(now Millis) Millis {
	r := t.cfg.Rate
	if r == nil {
		return 0
	}
	period := Millis(r.Period.Milliseconds())
	if period < 1 {
		period = 1
	}
	for len(t.starts) > 0 && t.starts[0] <= now-period {
		t.starts = t.starts[1:]
	}
	if len(t.starts) < r.Limit {
		return 0
	}
	return t.starts[len(t.starts)-r.Limit] + period
}

// advanceLocked moves the clock to the earliest time after now that a pending job (not
// skipped) can start; false if there is none.
func (in *Inline) advanceLocked(skip map[*inlineJob]bool) bool {
	now := in.nowLocked()
	var next Millis
	for _, j := range in.jobs {
		if j.info.State != StatePending || skip[j] {
			continue
		}
		t := in.typeLocked(j.info.Type)
		at := j.info.ScheduledTime
		if in.pausedLocked(t, now) {
			if t.pausedUntil == 0 {
				continue
			}
			if t.pausedUntil > at {
				at = t.pausedUntil
			}
		}
		if r := t.rateFullAt(now); r > at {
			at = r
		}
		if at > now && (next == 0 || at < next) {
			next = at
		}
	}
	if next == 0 {
		return false
	}
	in.offset += time.Duration(next-now) * time.Millisecond
	return true
}

func (in *Inline) runOne(ctx context.Context, j *inlineJob, h HandlerFunc, snoozed map[*inlineJob]bool) {
	in.mu.Lock()
	job := &Job{Type: j.info.Type, ID: j.info.ID, Data: append(json.RawMessage(nil), j.info.Data...)}
	attempt := j.info.Attempts
	in.mu.Unlock()
	job.attempt = func(context.Context) (int, error) { return attempt, nil }
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
	now := in.nowLocked()
	info := &j.info
	info.UpdatedAt = now
	var snooze *snoozeError
	switch {
	case info.Resubmitted: // an add changed it while it ran: it runs again, at the add's time
		info.State, info.Resubmitted = StatePending, false
	case err == nil:
		raw, _ := json.Marshal(result) // call checked that it encodes
		info.State, info.Outcome, info.Result, info.EndedAt = StateFinished, OutcomeSucceeded, rawOrNull(raw), now
		info.LostRuns = 0
	case errors.As(err, &snooze):
		info.State = StatePending
		info.Attempts--
		info.ScheduledTime = now + Millis(snooze.delay.Milliseconds())
		snoozed[j] = true
	default:
		f := failureOf(err)
		details, _ := json.Marshal(f.Details)
		info.Errors = append(info.Errors, AttemptError{Attempt: info.Attempts, At: now, Worker: "inline",
			Kind: f.Kind, Message: f.Message, Details: rawOrNull(details)})
		if len(info.Errors) > 10 {
			info.Errors = info.Errors[len(info.Errors)-10:]
		}
		t := in.typeLocked(info.Type)
		limit := t.cfg.MaxAttempts
		if limit <= 0 {
			limit = 25
		}
		if f.NoRetry || info.Attempts >= limit {
			info.State, info.Outcome, info.EndedAt = StateFinished, OutcomeDead, now
			break
		}
		var delay time.Duration
		if f.RetryIn != nil {
			delay = *f.RetryIn
		} else {
			b := t.backoff()
			d := math.Min(float64(b.Cap), float64(b.Base)*math.Pow(b.Factor, float64(info.Attempts-1)))
			delay = time.Duration(d * (1 - b.Jitter*rand.Float64()))
		}
		info.State, info.ScheduledTime = StatePending, now+Millis(delay.Milliseconds())
	}
}

// Result runs jobs as Drain does until the job typ/id ends (moving the Inline's clock to
// scheduled jobs and retries as needed, so other jobs due before it run first), then returns
// its result as Client.Result does: its result if it succeeded, a *JobFailedError if it ended
// dead, 404 `not_found` if there is no such job. A job that cannot end (it snoozed during this
// call, or its type is paused until resumed) is an error.
func (in *Inline) Result(ctx context.Context, typ, id string) (json.RawMessage, error) {
	key := [2]string{typ, id}
	ended := func() bool {
		j := in.jobs[key]
		return j == nil || j.info.State == StateFinished
	}
	if _, err := in.run(ctx, true, ended); err != nil {
		return nil, err
	}
	job, err := in.Get(ctx, typ, id)
	if err != nil {
		return nil, err
	}
	if job.State != StateFinished {
		return nil, fmt.Errorf("kvq: inline: job %s/%s is %s after Drain (snoozed, or its type paused?)", typ, id, job.State)
	}
	if job.Outcome != OutcomeSucceeded {
		return nil, &JobFailedError{Job: job}
	}
	return job.Result, nil
}

// Groups lists the type's groups that have pending or running jobs, by name, as Client.Groups
// does (InTurnAt: its first pending job's time, by priority then time, or its last run's start
// if later, while it has pending jobs and is not full).
func (in *Inline) Groups(ctx context.Context, typ string, o GroupOptions) (*GroupPage, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.existsLocked(typ); err != nil {
		return nil, err
	}
	stats := map[string]*GroupInfo{}
	first := map[string]*inlineJob{}
	for key, j := range in.jobs {
		g := j.info.Group
		if key[0] != typ || g == "" || j.info.State == StateFinished {
			continue
		}
		s := stats[g]
		if s == nil {
			s = &GroupInfo{Group: g}
			stats[g] = s
		}
		if j.info.State == StateRunning {
			s.Running++
		} else {
			s.Pending++
			if f := first[g]; f == nil || firstBefore(j, f) {
				first[g] = j
			}
		}
	}
	names := make([]string, 0, len(stats))
	for g := range stats {
		if g > o.After {
			names = append(names, g)
		}
	}
	sort.Strings(names)
	limit := pageSize(o.Limit)
	page := &GroupPage{Groups: []GroupInfo{}}
	per := in.typeLocked(typ).cfg.MaxRunningPerGroup
	for _, g := range names {
		if len(page.Groups) == limit {
			page.NextAfter = page.Groups[limit-1].Group
			break
		}
		s := *stats[g]
		s.Full = per > 0 && s.Running >= per
		if s.Pending > 0 && !s.Full {
			s.InTurnAt = in.placeLocked(typ, g, first[g]).at
		}
		page.Groups = append(page.Groups, s)
	}
	return page, nil
}

// Counts returns how many of the type's jobs are in each state, as Client.Counts does, by
// the Inline's clock.
func (in *Inline) Counts(ctx context.Context, typ string) (*Counts, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if err := in.existsLocked(typ); err != nil {
		return nil, err
	}
	now := in.nowLocked()
	out := &Counts{}
	for key, j := range in.jobs {
		if key[0] != typ {
			continue
		}
		switch j.info.State {
		case "pending":
			out.Pending++
			if j.info.ScheduledTime > now {
				out.Scheduled++
			}
		case "running":
			out.Running++
		case "finished":
			out.Finished++
		}
		switch j.info.Outcome {
		case "dead":
			out.Dead++
		case "cancelled":
			out.Cancelled++
		}
	}
	return out, nil
}
