// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log"
	"os"
	"sync"
	"sync/atomic"
	"time"
)

// WorkerOptions configures a Worker. Zero fields take the defaults given.
type WorkerOptions struct {
	// ID names this worker (default: hostname-pid-random). It is the registered worker id and
	// the `worker` its accepts name.
	ID string
	// WorkerType is the worker type it registers as (default "go").
	WorkerType string
	// Concurrency is how many handlers run at once (default 1); one accept takes up to as many
	// jobs as there are free slots (at most 100).
	Concurrency int
	// TypeConcurrency caps, per job type, how many of that type's handlers run at once within
	// Concurrency: {"email": 8, "video": 1} runs at most one video job while emails use the
	// other slots. A type not in it is capped by Concurrency alone. Run refuses a type without
	// a handler and a cap below 1.
	TypeConcurrency map[string]int
	// PollTimeout is how long one accept waits for a job (default 10 s, at most 5 minutes). With
	// several types, each accept waits at most 1 s before the next type's turn.
	PollTimeout time.Duration
	// Grace is how long a stopping worker lets running handlers finish before it cancels them
	// and hands their jobs back (default 10 s; negative: hand back at once).
	Grace time.Duration
	// HealthTimeout is the registration's health timeout (default 10 s): the server declares the
	// worker dead, and its jobs come back at once, after this long without a heartbeat. The
	// worker heartbeats every third of it.
	HealthTimeout time.Duration
	// NoRegister skips registration with the workers layer: jobs of a worker that dies then
	// come back only after their type's timeout.
	NoRegister bool
	// HeartbeatInterval is how often a running job is heartbeated (default: a third of its
	// type's timeout, read when Run starts).
	HeartbeatInterval time.Duration
	// Info is the registration's info (default: host, pid, types and "client": "go").
	Info any
	// Burst makes Run return, draining as on a cancel, once no job of its types is due and
	// none is running (RQ's --burst): for scripts and tests. Jobs scheduled later (a retry's
	// backoff) are left for another run.
	Burst bool
	// Logger receives what the worker does on its own: errors it survives, fencing, shutdown
	// (default: standard error, prefixed "kvq worker: "). Log, when set, receives it instead.
	Logger *log.Logger
	// StartSpan, when set, runs as each handler starts: it returns the handler's context
	// (derived from ctx: a span started as a child of job.Traceparent, say) and the function
	// that ends the span, called with what the handler returned as its error (nil when it
	// succeeded; a SnoozeFor, a NoRetry or any other error otherwise). The README wires
	// OpenTelemetry to it. Nil: no span.
	StartSpan func(ctx context.Context, job *Job) (context.Context, func(err error))
	// Log, when set, receives each line with its level: a *slog.Logger (log/slog, Go 1.21)
	// is one, as are most leveled loggers; this module builds with Go 1.19 so it does not
	// import log/slog itself.
	Log LeveledLogger
}

// LeveledLogger is a logger with levels, as *slog.Logger is: WorkerOptions.Log.
type LeveledLogger interface {
	Info(msg string, args ...any)
	Warn(msg string, args ...any)
	Error(msg string, args ...any)
}

type logLevel int

const (
	levelInfo logLevel = iota
	levelWarn
	levelError
)

// logf logs one line of the worker: to o.Log at its level, else to o.Logger.
func (w *Worker) logf(level logLevel, format string, args ...any) {
	if w.o.Log == nil {
		w.o.Logger.Printf(format, args...)
		return
	}
	msg := fmt.Sprintf(format, args...)
	switch level {
	case levelInfo:
		w.o.Log.Info(msg, "worker", w.o.ID)
	case levelWarn:
		w.o.Log.Warn(msg, "worker", w.o.ID)
	default:
		w.o.Log.Error(msg, "worker", w.o.ID)
	}
}

// Worker runs handlers for jobs of one or more types until its Run's context is cancelled.
//
// It long-polls accept for up to its free slots' worth of jobs at once, runs each in its
// handler in its own goroutine, heartbeats each job (update) at a third of its type's timeout,
// registers with the workers layer and heartbeats that registration, cancels a handler's
// context when its job is fenced, finishes a job with the handler's result or fails it with
// its error (or panic, with the stack), and retries 503 answers and network errors with
// jittered backoff. Stopping (cancelling Run's context) drains: no more accepts, running
// handlers get Grace to finish, the rest are cancelled and their jobs handed back with snooze,
// so no attempt or lost run is counted for them; then it deregisters.
type Worker struct {
	c *Client
	o WorkerOptions

	mu       sync.Mutex
	handlers map[string]HandlerFunc
	types    []string // in Handle order
	running  bool
	runs     map[*run]struct{}
}

// The defaults of WorkerOptions, the same in the Python and TypeScript clients (the table in
// docs/clients.md). A running job is heartbeated every third of its type's timeout.
const (
	DefaultConcurrency   = 1
	DefaultPollTimeout   = 10 * time.Second
	DefaultGrace         = 10 * time.Second
	DefaultHealthTimeout = 10 * time.Second
)

// NewWorker returns a worker that uses c. Add handlers with Handle, then call Run.
func NewWorker(c *Client, o WorkerOptions) *Worker {
	if o.ID == "" {
		o.ID = defaultWorkerID()
	}
	if o.WorkerType == "" {
		o.WorkerType = "go"
	}
	if o.Concurrency <= 0 {
		o.Concurrency = DefaultConcurrency
	}
	if o.PollTimeout <= 0 {
		o.PollTimeout = DefaultPollTimeout
	}
	if o.PollTimeout > 300*time.Second {
		o.PollTimeout = 300 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = DefaultGrace
	}
	if o.HealthTimeout <= 0 {
		o.HealthTimeout = DefaultHealthTimeout
	}
	if o.Logger == nil {
		o.Logger = log.New(os.Stderr, "kvq worker: ", log.LstdFlags)
	}
	return &Worker{c: c, o: o, handlers: map[string]HandlerFunc{}, runs: map[*run]struct{}{}}
}

// ID returns the worker's id.
func (w *Worker) ID() string { return w.o.ID }

// Handle sets the handler of jobs of type typ (replacing any earlier one). Call it before Run.
func (w *Worker) Handle(typ string, h HandlerFunc) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if _, ok := w.handlers[typ]; !ok {
		w.types = append(w.types, typ)
	}
	w.handlers[typ] = h
}

// Registrar is what takes handlers: a Worker, or an Inline for tests. Write the code that
// sets up handlers against it to run the same handlers in both.
type Registrar interface {
	Handle(typ string, h HandlerFunc)
}

var _ Registrar = (*Worker)(nil)

// Run works until ctx is cancelled, then drains (see Worker) and returns nil. It returns an
// error at once if it has no handler, a type does not exist, or it cannot register; it
// survives every later error. Run may be called once at a time.
func (w *Worker) Run(ctx context.Context) error {
	w.mu.Lock()
	if w.running {
		w.mu.Unlock()
		return errors.New("kvq: worker: Run is already running")
	}
	if len(w.types) == 0 {
		w.mu.Unlock()
		return errors.New("kvq: worker: no handler: call Handle first")
	}
	types := append([]string(nil), w.types...)
	handlers := make(map[string]HandlerFunc, len(w.handlers))
	for k, v := range w.handlers {
		handlers[k] = v
	}
	slots, err := newTypeSlots(w.o.TypeConcurrency, handlers)
	if err != nil {
		w.mu.Unlock()
		return err
	}
	w.running = true
	w.mu.Unlock()
	defer func() {
		w.mu.Lock()
		w.running = false
		w.mu.Unlock()
	}()

	settings := map[string]typeSettings{}
	for _, typ := range types {
		t, err := w.c.GetType(ctx, typ)
		if err != nil {
			return fmt.Errorf("kvq: worker: job type %q: %w", typ, err)
		}
		s := typeSettings{handler: handlers[typ], timeout: t.Timeout, every: w.o.HeartbeatInterval}
		if s.every <= 0 {
			s.every = t.Timeout / 3
		}
		if s.every < 10*time.Millisecond {
			s.every = 10 * time.Millisecond
		}
		settings[typ] = s
	}

	var reg *registration
	if !w.o.NoRegister {
		info := w.o.Info
		if info == nil {
			host, _ := os.Hostname()
			info = map[string]any{"client": "go", "host": host, "pid": os.Getpid(), "types": types}
		}
		reg = &registration{w: w, info: info}
		if err := reg.register(ctx); err != nil {
			return fmt.Errorf("kvq: worker: cannot register %s/%s: %w", w.o.WorkerType, w.o.ID, err)
		}
		stop := reg.keepAlive()
		defer func() {
			stop()
			reg.deregister()
		}()
	}

	var handlersRunning sync.WaitGroup
	var held sync.WaitGroup // one per job this worker holds
	w.acceptLoop(ctx, types, settings, slots, &handlersRunning, &held)
	w.drain(&held)
	waitFor(&handlersRunning, time.Second) // cancelled handlers usually return at once
	return nil
}

// typeSettings is what a job's run needs from its type.
type typeSettings struct {
	handler HandlerFunc
	timeout time.Duration
	every   time.Duration // heartbeat interval
}

// acceptLoop accepts and starts jobs until ctx is done.
func (w *Worker) acceptLoop(ctx context.Context, types []string, settings map[string]typeSettings,
	perType *typeSlots, handlersRunning, held *sync.WaitGroup) {
	slots := make(chan struct{}, w.o.Concurrency) // a token per busy slot
	failures := 0
	empty := map[string]bool{} // Burst: the types whose last accept, with none running, was empty
	for turn := 0; ; turn++ {
		select {
		case slots <- struct{}{}:
		case <-ctx.Done():
			return
		}
		n := 1
	more:
		for n < w.o.Concurrency && n < 100 {
			select {
			case slots <- struct{}{}:
				n++
			default:
				break more
			}
		}
		idle := len(slots) == n // no run holds a slot
		if w.o.Burst && idle && len(empty) == len(types) {
			w.logf(levelInfo, "burst: no job due and none running: stopping")
			return
		}
		typ := perType.firstFree(types, turn%len(types))
		if typ == "" { // every type is at its TypeConcurrency: wait until one has a free slot
			for i := 0; i < n; i++ {
				<-slots
			}
			select {
			case <-perType.freed:
			case <-ctx.Done():
				return
			}
			continue
		}
		if m := perType.reserve(typ, n); m < n {
			for i := m; i < n; i++ {
				<-slots
			}
			n = m
		}
		poll := w.o.PollTimeout
		if len(types) > 1 && poll > time.Second {
			poll = time.Second
		}
		if w.o.Burst && idle {
			poll = 0
		} else if w.o.Burst && poll > 200*time.Millisecond {
			poll = 200 * time.Millisecond
		}
		jobs, err := w.c.Accept(ctx, typ, AcceptOptions{Timeout: poll, Count: n, Worker: w.o.ID,
			WorkerType: w.o.WorkerType})
		for i := len(jobs); i < n; i++ {
			<-slots
		}
		perType.release(typ, n-len(jobs))
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			w.logf(levelWarn, "accept %s: %v (retrying)", typ, err)
			_ = sleep(ctx, backoff(failures, 100*time.Millisecond, 10*time.Second))
			failures++
			continue
		}
		failures = 0
		if w.o.Burst && (len(jobs) > 0 || !idle) {
			empty = map[string]bool{}
		} else if w.o.Burst {
			empty[typ] = true
		}
		more := &moreJobs{ctx: ctx, types: types, settings: settings, held: held, slots: perType}
		for i := range jobs {
			w.start(jobs[i], more, slots, handlersRunning)
		}
	}
}

// runState is where a run is; it moves only from running to one of the others.
type runState int

const (
	stateRunning    runState = iota
	stateEnding              // the handler returned; finish, fail or snooze is being sent
	stateFenced              // the server said halted: the job is not ours any more
	stateHandedBack          // the worker stopped and snoozed it
)

// run is one job this worker holds.
type run struct {
	w      *Worker
	job    *Job
	lock   string
	s      typeSettings
	ctx    context.Context // the handler's
	cancel context.CancelFunc

	hbCtx  context.Context // the heartbeats'; cancelled once the job is no longer held
	hbStop context.CancelFunc

	mu      sync.Mutex
	state   runState
	settled func() // once the job is no longer held
	more    *moreJobs
}

// moreJobs is what a run needs to take the worker's next job with its finish (FinishNext).
type moreJobs struct {
	ctx      context.Context // Run's: once done, no next job is asked for
	types    []string
	settings map[string]typeSettings
	held     *sync.WaitGroup
	slots    *typeSlots
	old      atomic.Bool // the server's finish takes no "next": finish alone
}

// start runs the job in a slot of its own, and then in that slot each next job its finish
// took: a busy worker spends one request per job.
func (w *Worker) start(a AcceptedJob, more *moreJobs, slots chan struct{}, handlersRunning *sync.WaitGroup) {
	r := w.begin(a, more)
	handlersRunning.Add(1)
	go func() {
		defer handlersRunning.Done()
		defer func() { <-slots }()
		typ := r.job.Type // whose slot of TypeConcurrency this goroutine holds
		for r != nil {
			if r = r.execute(); r != nil {
				typ = r.job.Type
			}
		}
		more.slots.release(typ, 1)
	}()
}

// begin holds the job (heartbeats, and the drain sees it) until it is settled.
func (w *Worker) begin(a AcceptedJob, more *moreJobs) *run {
	held := more.held
	r := &run{w: w, lock: a.Lock, s: more.settings[a.Type], more: more}
	body, _ := a.Bytes() // a body the server sent malformed reads as none
	r.job = &Job{Type: a.Type, ID: a.ID, Data: rawOrNull(a.Data), Body: body, Traceparent: a.Traceparent,
		progress: r.progress}
	typ, id, c, accepted := a.Type, a.ID, r.w.c, a.Attempt
	r.job.attempt = func(ctx context.Context) (int, error) {
		if accepted > 0 {
			return accepted, nil
		}
		info, err := c.Get(ctx, typ, id)
		if err != nil {
			return 0, err
		}
		return info.Attempts, nil
	}
	r.ctx, r.cancel = context.WithCancel(context.Background())
	r.hbCtx, r.hbStop = context.WithCancel(context.Background())
	var once sync.Once
	held.Add(1)
	r.settled = func() {
		once.Do(func() {
			r.hbStop()
			w.mu.Lock()
			delete(w.runs, r)
			w.mu.Unlock()
			held.Done()
		})
	}
	w.mu.Lock()
	w.runs[r] = struct{}{}
	w.mu.Unlock()
	go r.heartbeat()
	return r
}

// execute runs the handler and reports how it ended; it returns the next job its finish took,
// already held (begun), or nil.
func (r *run) execute() *run {
	start := r.w.o.StartSpan
	if start == nil {
		start = noSpan
	}
	spanCtx, endSpan := start(r.ctx, r.job)
	result, err := call(spanCtx, r.s.handler, r.job)
	endSpan(err)
	if !r.leaveRunning(stateEnding) { // fenced or handed back: the job is not ours to end
		return nil
	}
	defer r.settled()
	defer r.cancel()

	wait := r.s.timeout
	if wait < 5*time.Second {
		wait = 5 * time.Second
	}
	ctx, cancel := context.WithTimeout(context.Background(), wait)
	defer cancel()
	c, typ, id := r.w.c, r.job.Type, r.job.ID
	var snooze *snoozeError
	var end error
	var next *run
	switch {
	case err == nil:
		next, end = r.finish(ctx, result)
	case errors.As(err, &snooze):
		end = c.Snooze(ctx, typ, id, r.lock, snooze.delay)
	default:
		_, end = c.Fail(ctx, typ, id, r.lock, failureOf(err))
	}
	if IsHalted(end) {
		r.w.logf(levelInfo, "job %s/%s was fenced before it ended (halted): its outcome is dropped", typ, id)
	} else if end != nil {
		r.w.logf(levelError, "job %s/%s: cannot report its end: %v", typ, id, end)
	}
	return next
}

// finish ends the job, and while the worker runs takes its next job in the same request
// (without waiting: an idle worker waits in the accept loop), holding it before this one is
// settled, so the drain never sees the worker hold nothing in between.
func (r *run) finish(ctx context.Context, result any) (*run, error) {
	c, typ, id, more := r.w.c, r.job.Type, r.job.ID, r.more
	if more.ctx.Err() != nil || more.old.Load() {
		return nil, c.Finish(ctx, typ, id, r.lock, result)
	}
	types, reserved := more.slots.forNext(typ, more.types)
	a, err := c.FinishNext(ctx, typ, id, r.lock, result,
		NextOptions{Types: types, Worker: r.w.o.ID, WorkerType: r.w.o.WorkerType})
	if ErrorCode(err) == "unknown_field" {
		more.slots.settleNext(typ, "", reserved)
		more.old.Store(true) // a server older than finish's "next"
		return nil, c.Finish(ctx, typ, id, r.lock, result)
	}
	if err != nil || a == nil {
		more.slots.settleNext(typ, "", reserved)
		return nil, err
	}
	next := r.w.begin(*a, more)
	if more.ctx.Err() != nil { // taken as the worker stopped: not started
		more.slots.settleNext(typ, "", reserved)
		next.handBack()
		return nil, nil
	}
	more.slots.settleNext(typ, a.Type, reserved)
	return next, nil
}

// heartbeat updates the job every interval until it is no longer held.
func (r *run) heartbeat() {
	t := time.NewTicker(r.s.every)
	defer t.Stop()
	for {
		select {
		case <-r.hbCtx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(r.hbCtx, r.s.timeout)
		_, err := r.w.c.Update(ctx, r.job.Type, r.job.ID, r.lock, nil)
		cancel()
		if IsHalted(err) {
			r.fence()
			return
		}
		if err != nil && r.hbCtx.Err() == nil {
			r.w.logf(levelWarn, "heartbeat of job %s/%s: %v", r.job.Type, r.job.ID, err)
		}
	}
}

// progress is Job.Progress of a worker's job.
func (r *run) progress(ctx context.Context, v any) error {
	_, err := r.w.c.Update(ctx, r.job.Type, r.job.ID, r.lock, v)
	if IsHalted(err) {
		r.fence()
	}
	return err
}

// leaveRunning moves a running job to state and reports whether it was running: only the first
// of fence, handBack and the handler's own end settles a run.
func (r *run) leaveRunning(state runState) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.state != stateRunning {
		return false
	}
	r.state = state
	return true
}

// fence gives up a job the server says is no longer ours: its handler's context is cancelled.
func (r *run) fence() {
	if !r.leaveRunning(stateFenced) {
		return
	}
	r.w.logf(levelInfo, "job %s/%s is halted (cancelled, removed or lost): cancelling its handler", r.job.Type, r.job.ID)
	r.cancel()
	r.settled()
}

// handBack cancels a job's handler and snoozes the job, if it is still running.
func (r *run) handBack() {
	if !r.leaveRunning(stateHandedBack) {
		return
	}
	defer r.settled()
	r.cancel()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	err := r.w.c.Snooze(ctx, r.job.Type, r.job.ID, r.lock, 0)
	if err != nil && !IsHalted(err) {
		r.w.logf(levelError, "cannot hand job %s/%s back: %v", r.job.Type, r.job.ID, err)
	}
}

// drain waits up to the grace for the held jobs to end, then hands the rest back.
func (w *Worker) drain(held *sync.WaitGroup) {
	w.mu.Lock()
	n := len(w.runs)
	w.mu.Unlock()
	if n > 0 && w.o.Grace > 0 {
		w.logf(levelInfo, "stopping: letting %d running job(s) finish for up to %v", n, w.o.Grace)
	}
	if w.o.Grace > 0 && waitFor(held, w.o.Grace) {
		return
	}
	w.mu.Lock()
	var left []*run
	for r := range w.runs {
		left = append(left, r)
	}
	w.mu.Unlock()
	if len(left) > 0 {
		w.logf(levelWarn, "stopping: handing %d job(s) back", len(left))
	}
	for _, r := range left {
		go r.handBack()
	}
	held.Wait()
}

// waitFor waits for wg for up to d and reports whether it is done.
func waitFor(wg *sync.WaitGroup, d time.Duration) bool {
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-done:
		return true
	case <-t.C:
		return false
	}
}

// registration is the worker's membership in the workers layer.
type registration struct {
	w    *Worker
	info any

	mu    sync.Mutex
	token string
}

func (g *registration) register(ctx context.Context) error {
	o := g.w.o
	token, err := g.w.c.Register(ctx, o.WorkerType, o.ID, o.HealthTimeout, g.info, false)
	if err != nil {
		return err
	}
	g.mu.Lock()
	g.token = token
	g.mu.Unlock()
	return nil
}

func (g *registration) currentToken() string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.token
}

// keepAlive heartbeats the registration every third of the health timeout, registering again
// if the server declared the worker dead; the function it returns stops it.
func (g *registration) keepAlive() (stop func()) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	o := g.w.o
	go func() {
		defer close(done)
		t := time.NewTicker(o.HealthTimeout / 3)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			hctx, hcancel := context.WithTimeout(ctx, o.HealthTimeout)
			err := g.w.c.Heartbeat(hctx, o.WorkerType, o.ID, g.currentToken())
			if IsHalted(err) {
				g.w.logf(levelWarn, "worker %s/%s was declared dead: registering again", o.WorkerType, o.ID)
				err = g.register(hctx)
			}
			hcancel()
			if err != nil && ctx.Err() == nil {
				g.w.logf(levelWarn, "worker heartbeat: %v", err)
			}
		}
	}()
	return func() {
		cancel()
		<-done
	}
}

func (g *registration) deregister() {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	o := g.w.o
	if err := g.w.c.Deregister(ctx, o.WorkerType, o.ID, g.currentToken()); err != nil {
		g.w.logf(levelWarn, "cannot deregister %s/%s: %v", o.WorkerType, o.ID, err)
	}
}

func defaultWorkerID() string {
	host, err := os.Hostname()
	if err != nil || host == "" {
		host = "worker"
	}
	var b [3]byte
	_, _ = rand.Read(b[:])
	return fmt.Sprintf("%s-%d-%s", host, os.Getpid(), hex.EncodeToString(b[:]))
}
