// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

func TestCountsAndStats(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	for _, id := range []string{"a", "b"} {
		if _, err := c.Add(ctx, typ, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Add(ctx, typ, "later", nil, kvq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("accept: %v, %v", jobs, err)
	}
	if err := c.Finish(ctx, typ, jobs[0].ID, jobs[0].Lock, nil); err != nil {
		t.Fatal(err)
	}
	if jobs, err = c.Accept(ctx, typ, kvq.AcceptOptions{}); err != nil || len(jobs) != 1 {
		t.Fatalf("accept: %v, %v", jobs, err)
	}
	got, err := c.Counts(ctx, typ)
	if err != nil {
		t.Fatal(err)
	}
	want := kvq.Counts{Pending: 1, Scheduled: 1, Running: 1, Finished: 1}
	if *got != want {
		t.Errorf("Counts = %+v, want %+v", *got, want)
	}
	s, err := c.Stats(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s.Accepts < 2 || s.Time.Time().IsZero() || len(s.Types) == 0 {
		t.Errorf("Stats = %+v", s)
	}
	if _, err := c.Counts(ctx, uniq("missing")); !kvq.IsNotFound(err) {
		t.Errorf("Counts of a missing type: %v, want not_found", err)
	}
}

func TestBurstRunsTheDueJobsThenReturns(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	other := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	for _, id := range []string{"j0", "j1", "j2", "j3", "j4"} {
		if _, err := c.Add(ctx, typ, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.Add(ctx, other, "o", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "later", nil, kvq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	var mu sync.Mutex
	var ran []string
	handler := func(ctx context.Context, job *kvq.Job) (any, error) {
		mu.Lock()
		ran = append(ran, job.ID)
		mu.Unlock()
		return nil, nil
	}
	w := newWorker(t, c, kvq.WorkerOptions{Concurrency: 2, PollTimeout: 30 * time.Second, Burst: true})
	w.Handle(typ, handler)
	w.Handle(other, handler)
	started := time.Now()
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if d := time.Since(started); d > 10*time.Second {
		t.Errorf("Run with Burst took %v", d)
	}
	sort.Strings(ran)
	if want := "[j0 j1 j2 j3 j4 o]"; fmt.Sprint(ran) != want {
		t.Errorf("ran %v, want %s", ran, want)
	}
	got, err := c.Counts(ctx, typ)
	if err != nil {
		t.Fatal(err)
	}
	if want := (kvq.Counts{Pending: 1, Scheduled: 1, Finished: 5}); *got != want {
		t.Errorf("Counts = %+v, want %+v", *got, want)
	}
}

func TestTypedDecodesTheDataAndEndsUndecodableJobsDead(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	in := newInline(t)
	type email struct{ To string }
	in.Handle("email", kvq.Typed(func(ctx context.Context, job *kvq.Job, e email) (any, error) {
		return "sent to " + e.To, nil
	}))
	if _, err := in.SetType(ctx, "email", kvq.TypeConfig{Timeout: 30 * time.Second, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "email", "ok", map[string]string{"To": "ada"}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "email", "bad", map[string]int{"To": 3}); err != nil {
		t.Fatal(err)
	}
	if result, err := in.Result(ctx, "email", "ok"); err != nil || string(result) != `"sent to ada"` {
		t.Errorf("Result = %s, %v", result, err)
	}
	if _, err := in.Result(ctx, "email", "bad"); err == nil {
		t.Fatal("an undecodable job succeeded")
	}
	job, err := in.Get(ctx, "email", "bad")
	if err != nil || job.Outcome != "dead" || job.Attempts != 1 {
		t.Errorf("the undecodable job: %+v, %v; want dead after 1 attempt", job, err)
	}
}

// leveled is a LeveledLogger (as *slog.Logger is) that keeps its lines.
type leveled struct {
	mu    sync.Mutex
	lines []string
}

func (l *leveled) add(level, msg string, args []any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.lines = append(l.lines, fmt.Sprint(level, " ", msg, " ", args))
}
func (l *leveled) Info(msg string, args ...any)  { l.add("INFO", msg, args) }
func (l *leveled) Warn(msg string, args ...any)  { l.add("WARN", msg, args) }
func (l *leveled) Error(msg string, args ...any) { l.add("ERROR", msg, args) }

func TestALeveledLoggerGetsTheWorkersLinesWithTheirLevels(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	l := &leveled{}
	w := kvq.NewWorker(c, kvq.WorkerOptions{ID: uniq("w"), Burst: true, Log: l, NoRegister: true})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	want := fmt.Sprint("INFO burst: no job due and none running: stopping ", []any{"worker", w.ID()})
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, line := range l.lines {
		if line == want {
			return
		}
	}
	t.Errorf("lines %q, want one %q", l.lines, want)
}

func TestAttemptTellsWhichAttemptARunIs(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second, MaxAttempts: 5})
	var mu sync.Mutex
	var seen []int
	handler := func(ctx context.Context, job *kvq.Job) (any, error) {
		n, err := job.Attempt(ctx)
		if err != nil {
			return nil, err
		}
		mu.Lock()
		seen = append(seen, n)
		mu.Unlock()
		if n < 3 {
			return nil, kvq.RetryIn(errors.New("not yet"), time.Millisecond)
		}
		return n, nil
	}
	w := newWorker(t, c, kvq.WorkerOptions{})
	w.Handle(typ, handler)
	runWorker(t, w)
	if _, err := c.Add(ctx, typ, "j", nil); err != nil {
		t.Fatal(err)
	}
	if result, err := c.Result(ctx, typ, "j"); err != nil || string(result) != "3" {
		t.Fatalf("Result = %s, %v; want 3", result, err)
	}
	in := newInline(t)
	in.Handle("t", handler)
	if _, err := in.SetType(ctx, "t", kvq.TypeConfig{Timeout: 30 * time.Second, MaxAttempts: 5}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "t", "j", nil); err != nil {
		t.Fatal(err)
	}
	if result, err := in.Result(ctx, "t", "j"); err != nil || string(result) != "3" {
		t.Fatalf("inline Result = %s, %v; want 3", result, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(seen) != "[1 2 3 1 2 3]" {
		t.Errorf("attempts seen %v, want [1 2 3 1 2 3]", seen)
	}
}
