// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

func newWorker(t *testing.T, c *kvq.Client, o kvq.WorkerOptions) *kvq.Worker {
	if o.Logger == nil {
		o.Logger = logger()
	}
	if o.WorkerType == "" {
		o.WorkerType = uniq("wt")
	}
	if o.PollTimeout == 0 {
		o.PollTimeout = 2 * time.Second
	}
	if o.Grace == 0 {
		o.Grace = 2 * time.Second
	}
	return kvq.NewWorker(c, o)
}

func TestWorkerHeartbeatKeepsAJobPastItsTypeTimeout(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 1200 * time.Millisecond})
	var cancelled int32
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		select {
		case <-time.After(3 * time.Second): // 2.5 timeouts
			return map[string]any{"slept": true}, nil
		case <-ctx.Done():
			atomic.StoreInt32(&cancelled, 1)
			return nil, ctx.Err()
		}
	})
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	if _, err := c.Add(ctx, typ, "long", nil); err != nil {
		t.Fatal(err)
	}
	result, err := c.Result(ctx, typ, "long")
	if err != nil {
		t.Fatal(err)
	}
	if string(result) != `{"slept":true}` {
		t.Errorf("result %s, want {\"slept\":true}", result)
	}
	job, err := c.Get(ctx, typ, "long")
	if err != nil {
		t.Fatal(err)
	}
	if job.Outcome != kvq.OutcomeSucceeded || job.Attempts != 1 || job.LostRuns != 0 || len(job.Errors) != 0 {
		t.Errorf("a 3 s job of a 1.2 s type: outcome %q, attempts %d, lost runs %d, errors %+v; want succeeded in one attempt",
			job.Outcome, job.Attempts, job.LostRuns, job.Errors)
	}
	if atomic.LoadInt32(&cancelled) != 0 {
		t.Error("the handler's context was cancelled")
	}
}

func TestWorkerFencingCancelsTheHandlersContext(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 900 * time.Millisecond})
	started := make(chan string, 2)
	cancelledAfter := make(chan time.Time, 2)
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		if job.ID == "after" {
			return "done", nil
		}
		started <- job.ID
		select {
		case <-ctx.Done():
			cancelledAfter <- time.Now()
			return "dropped", nil // a fenced job's result is dropped
		case <-time.After(15 * time.Second):
			return "not cancelled", nil
		}
	})
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	if _, err := c.Add(ctx, typ, "fenced", nil); err != nil {
		t.Fatal(err)
	}
	select {
	case <-started:
	case <-ctx.Done():
		t.Fatal("the job never started")
	}
	cancelAt := time.Now()
	if _, err := c.Cancel(ctx, typ, "fenced"); err != nil {
		t.Fatal(err)
	}
	select {
	case at := <-cancelledAfter:
		if d := at.Sub(cancelAt); d > 2*time.Second {
			t.Errorf("the handler's context was cancelled %v after the job, want within ~2 heartbeats", d)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("the handler's context was not cancelled within 5 s of its job being cancelled")
	}
	time.Sleep(200 * time.Millisecond) // the handler's return, which must not finish the job
	job, err := c.Get(ctx, typ, "fenced")
	if err != nil {
		t.Fatal(err)
	}
	if job.Outcome != kvq.OutcomeCancelled || job.Result != nil {
		t.Errorf("fenced job: outcome %q, result %s; want cancelled with no result", job.Outcome, job.Result)
	}
	// The slot is free again: the worker takes the next job.
	if _, err := c.Add(ctx, typ, "after", nil); err != nil {
		t.Fatal(err)
	}
	if result, err := c.Result(ctx, typ, "after"); err != nil || string(result) != `"done"` {
		t.Errorf("the next job: %s, %v", result, err)
	}
}

func TestWorkerErrorBecomesAFailureWithTheRetryPolicy(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{MaxAttempts: 3,
		Backoff: &kvq.BackoffConfig{Base: 50 * time.Millisecond, Cap: 100 * time.Millisecond}})
	var calls int32
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		n := atomic.AddInt32(&calls, 1)
		return nil, fmt.Errorf("boom %d", n)
	})
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	if _, err := c.Add(ctx, typ, "failing", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	_, err := c.Result(ctx, typ, "failing")
	var failed *kvq.JobFailedError
	if !errors.As(err, &failed) {
		t.Fatalf("Result of a failing job: %v, want a *JobFailedError", err)
	}
	if last := failed.LastError(); last == nil || last.Message != "boom 3" {
		t.Errorf("the last error: %+v, want boom 3", last)
	}
	if !strings.Contains(err.Error(), "dead after 3 attempt(s): error: boom 3") {
		t.Errorf("error text %q", err)
	}
	job := failed.Job
	if job.Outcome != kvq.OutcomeDead || job.Attempts != 3 || len(job.Errors) != 3 {
		t.Fatalf("job: outcome %q, attempts %d, %d errors; want dead after 3", job.Outcome, job.Attempts, len(job.Errors))
	}
	for i, e := range job.Errors {
		if e.Attempt != i+1 || e.Kind != "error" || e.Message != fmt.Sprintf("boom %d", i+1) || e.Worker != w.ID() {
			t.Errorf("error %d: %+v", i, e)
		}
	}
	if n := atomic.LoadInt32(&calls); n != 3 {
		t.Errorf("the handler ran %d times, want 3", n)
	}
}

func TestWorkerPanicBecomesAFailureWithItsStack(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{MaxAttempts: 5})
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		if job.ID == "no-retry" {
			return nil, kvq.NoRetry(errors.New("bad input"))
		}
		panic("kaboom")
	})
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	// A panic is retried like any failure; max attempts 5 with 1 s backoff would be slow, so
	// look at the first failure only.
	if _, err := c.Add(ctx, typ, "panics", nil); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, c, typ, "panics", 10*time.Second, "a failed attempt", func(j *kvq.JobInfo) bool {
		return len(j.Errors) > 0
	})
	e := job.Errors[0]
	var details struct{ Panic, Stack string }
	_ = json.Unmarshal(e.Details, &details)
	if e.Kind != "panic" || e.Message != "panic: kaboom" || details.Panic != "kaboom" ||
		!strings.Contains(details.Stack, "worker_test.go") {
		t.Errorf("a panic's failure: kind %q, message %q, details %s", e.Kind, e.Message, e.Details)
	}
	if job.State != kvq.StatePending || job.Outcome != "" {
		t.Errorf("after one panic of 5 attempts: state %q outcome %q, want pending (a retry)", job.State, job.Outcome)
	}
	if _, err := c.Add(ctx, typ, "no-retry", nil); err != nil {
		t.Fatal(err)
	}
	_, err := c.Result(ctx, typ, "no-retry")
	var failed *kvq.JobFailedError
	if !errors.As(err, &failed) || failed.Job.Attempts != 1 || failed.Job.Outcome != kvq.OutcomeDead {
		t.Errorf("NoRetry: %v, want dead after one attempt", err)
	}
}

func TestWorkerRunsConcurrencyJobsAtOnce(t *testing.T) {
	const n, jobs = 4, 8
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{})
	var active, peak int32
	w := newWorker(t, c, kvq.WorkerOptions{Concurrency: n})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		now := atomic.AddInt32(&active, 1)
		defer atomic.AddInt32(&active, -1)
		for {
			p := atomic.LoadInt32(&peak)
			if now <= p || atomic.CompareAndSwapInt32(&peak, p, now) {
				break
			}
		}
		time.Sleep(400 * time.Millisecond)
		return job.ID, nil
	})
	ctx := testCtx(t, 30*time.Second)
	var batch []kvq.NewJob
	for i := 0; i < jobs; i++ {
		batch = append(batch, kvq.NewJob{ID: fmt.Sprintf("j%d", i)})
	}
	if _, err := c.AddMany(ctx, typ, batch); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	runWorker(t, w)
	for i := 0; i < jobs; i++ {
		if _, err := c.Result(ctx, typ, fmt.Sprintf("j%d", i)); err != nil {
			t.Fatal(err)
		}
	}
	took := time.Since(began)
	if p := atomic.LoadInt32(&peak); p != n {
		t.Errorf("at most %d handlers ran at once, want exactly %d", p, n)
	}
	if took > jobs*400*time.Millisecond*3/4 {
		t.Errorf("%d jobs of 400 ms took %v with concurrency %d", jobs, took, n)
	}
}

func TestWorkerProgressAndSnooze(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 600 * time.Millisecond}) // a heartbeat every 200 ms
	seen := make(chan struct{})
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		if job.ID == "snoozy" {
			return nil, kvq.SnoozeFor(time.Hour)
		}
		if err := job.Progress(ctx, map[string]int{"pct": 50}); err != nil {
			return nil, err
		}
		<-seen
		return nil, nil
	})
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	if _, err := c.Add(ctx, typ, "progress", nil); err != nil {
		t.Fatal(err)
	}
	waitJob(t, c, typ, "progress", 10*time.Second, "progress 50%", func(j *kvq.JobInfo) bool {
		return string(j.Progress) == `{"pct":50}`
	})
	time.Sleep(500 * time.Millisecond) // heartbeats keep the progress
	if j, err := c.Get(ctx, typ, "progress"); err != nil || string(j.Progress) != `{"pct":50}` {
		t.Errorf("progress after heartbeats: %+v, %v", j, err)
	}
	close(seen)
	if _, err := c.Result(ctx, typ, "progress"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "snoozy", nil); err != nil {
		t.Fatal(err)
	}
	job := waitJob(t, c, typ, "snoozy", 10*time.Second, "snoozed for an hour", func(j *kvq.JobInfo) bool {
		return j.State == kvq.StatePending && j.StartedAt != 0
	})
	if job.Attempts != 0 || len(job.Errors) != 0 || time.Until(job.ScheduledTime.Time()) < 50*time.Minute {
		t.Errorf("snoozed job: attempts %d, errors %v, due %v; want no attempt, due in an hour",
			job.Attempts, job.Errors, job.ScheduledTime.Time())
	}
}

func TestWorkerRegistersAndDeregisters(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{})
	wtype := uniq("wt")
	w := newWorker(t, c, kvq.WorkerOptions{WorkerType: wtype, HealthTimeout: 600 * time.Millisecond})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	stop := runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	deadline := time.Now().Add(5 * time.Second)
	for {
		m, err := c.Workers(ctx, wtype)
		if err == nil && len(m.Workers) == 1 && m.Workers[0].ID == w.ID() {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the worker is not registered: %+v %v", m, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// It heartbeats: still alive after several health timeouts.
	time.Sleep(2 * time.Second)
	if m, err := c.Workers(ctx, wtype); err != nil || len(m.Workers) != 1 {
		t.Fatalf("after 2 s with a 0.6 s health timeout: %+v %v", m, err)
	}
	stop()
	if m, err := c.Workers(ctx, wtype); err != nil || len(m.Workers) != 0 {
		t.Errorf("after Run returned: %+v %v, want no worker", m, err)
	}
}

func TestWorkerRunFailsOnAMissingType(t *testing.T) {
	c := newClient(t)
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(uniq("missing"), func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	err := w.Run(testCtx(t, 10*time.Second))
	if !kvq.IsNotFound(err) {
		t.Errorf("Run on a type that does not exist: %v, want not_found", err)
	}
	if err := newWorker(t, c, kvq.WorkerOptions{}).Run(context.Background()); err == nil {
		t.Error("Run without a handler did not fail")
	}
}

// The worker survives its server going away: its accepts and heartbeats fail in the network,
// are retried with backoff, and it takes the job added once the server is back.
func TestWorkerRetriesNetworkErrors(t *testing.T) {
	addr := freePort(t)
	srv, err := startServer(addr, "")
	if err != nil {
		t.Fatal(err)
	}
	dir := srv.dataDir
	t.Cleanup(func() { srv.stop() })
	c, err := kvq.NewClient(srv.url)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 40*time.Second)
	typ := uniq("t")
	if _, err := c.SetType(ctx, typ, kvq.TypeConfig{Timeout: 10 * time.Second}); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	w := newWorker(t, c, kvq.WorkerOptions{PollTimeout: 5 * time.Second, HealthTimeout: 5 * time.Second})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		mu.Lock()
		ran = append(ran, job.ID)
		mu.Unlock()
		return "ok", nil
	})
	stop := runWorker(t, w)
	time.Sleep(300 * time.Millisecond) // the worker is in its accept
	srv.ownDir = false
	srv.stop()
	time.Sleep(time.Second) // its accepts fail meanwhile
	srv2, err := startServer(addr, dir)
	if err != nil {
		t.Fatal(err)
	}
	srv2.ownDir = true
	t.Cleanup(func() { srv2.stop() })
	if _, err := c.Add(ctx, typ, "after-restart", nil); err != nil {
		t.Fatal(err)
	}
	if result, err := c.Result(ctx, typ, "after-restart"); err != nil || string(result) != `"ok"` {
		t.Fatalf("after the restart: %s, %v", result, err)
	}
	stop() // while the server is up, so it deregisters at once
	mu.Lock()
	defer mu.Unlock()
	if len(ran) != 1 {
		t.Errorf("ran %v", ran)
	}
}

func TestWorkerServesSeveralTypes(t *testing.T) {
	c := newClient(t)
	a, b := newType(t, c, kvq.TypeConfig{}), newType(t, c, kvq.TypeConfig{})
	w := newWorker(t, c, kvq.WorkerOptions{Concurrency: 2})
	w.Handle(a, func(ctx context.Context, job *kvq.Job) (any, error) { return "a", nil })
	w.Handle(b, func(ctx context.Context, job *kvq.Job) (any, error) { return "b", nil })
	runWorker(t, w)
	ctx := testCtx(t, 20*time.Second)
	for _, typ := range []string{b, a, b} {
		id := uniq("j")
		if _, err := c.Add(ctx, typ, id, nil); err != nil {
			t.Fatal(err)
		}
		want := map[string]string{a: `"a"`, b: `"b"`}[typ]
		if result, err := c.Result(ctx, typ, id); err != nil || string(result) != want {
			t.Errorf("a job of %s: %s, %v; want %s", typ, result, err, want)
		}
	}
}
