// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// setUp is what an application would share between its worker and its tests.
func setUp(r kvq.Registrar, flaky *int) {
	r.Handle("resize", func(ctx context.Context, job *kvq.Job) (any, error) {
		var in struct{ W, H int }
		if err := job.Decode(&in); err != nil {
			return nil, kvq.NoRetry(err)
		}
		if *flaky > 0 {
			*flaky--
			return nil, errors.New("disk busy")
		}
		if err := job.Progress(ctx, "half"); err != nil {
			return nil, err
		}
		if in.W == 0 {
			panic("zero width")
		}
		return map[string]int{"area": in.W * in.H}, nil
	})
}

func TestInlineRunsHandlersWithoutAServer(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	flaky := 2
	setUp(in, &flaky)
	var p kvq.Producer = in
	if _, err := p.Add(ctx, "resize", "img1", map[string]int{"W": 3, "H": 4}); err != nil {
		t.Fatal(err)
	}
	result, err := p.Result(ctx, "resize", "img1")
	if err != nil || string(result) != `{"area":12}` {
		t.Fatalf("Result: %s, %v", result, err)
	}
	job, _ := p.Get(ctx, "resize", "img1")
	if job.Attempts != 3 || len(job.Errors) != 2 || job.Errors[1].Message != "disk busy" ||
		job.Errors[1].Attempt != 2 || string(job.Progress) != `"half"` {
		t.Errorf("after two failures and a success: %+v", job)
	}

	// Keep leaves a job alone; update starts a finished one over.
	if added, _ := in.Add(ctx, "resize", "img1", nil, kvq.WithIfExists(kvq.IfExistsKeep)); added {
		t.Error("Add with keep changed an existing job")
	}
	if _, err := in.Add(ctx, "resize", "img1", map[string]int{"W": 1, "H": 1}); err != nil {
		t.Fatal(err)
	}
	if job, _ := in.Get(ctx, "resize", "img1"); job.State != kvq.StatePending || job.Attempts != 0 {
		t.Errorf("re-added: %+v", job)
	}
	if n, err := in.Drain(ctx); err != nil || n != 1 {
		t.Errorf("Drain: %d runs, %v", n, err)
	}
}

func TestInlineFailuresFollowTheRetryPolicy(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	flaky := 100
	setUp(in, &flaky)
	in.SetType("resize", kvq.TypeConfig{MaxAttempts: 4})
	if _, err := in.Add(ctx, "resize", "always-busy", map[string]int{"W": 1}); err != nil {
		t.Fatal(err)
	}
	_, err := in.Result(ctx, "resize", "always-busy")
	var failed *kvq.JobFailedError
	if !errors.As(err, &failed) || failed.Job.Outcome != kvq.OutcomeDead || failed.Job.Attempts != 4 || len(failed.Job.Errors) != 4 {
		t.Fatalf("a job failing every time: %v", err)
	}

	flaky = 0
	if _, err := in.Add(ctx, "resize", "panics", map[string]int{"H": 1}); err != nil {
		t.Fatal(err)
	}
	_, err = in.Result(ctx, "resize", "panics")
	if !errors.As(err, &failed) || failed.LastError().Kind != "panic" ||
		!strings.Contains(string(failed.LastError().Details), "inline_test.go") {
		t.Errorf("a panicking handler: %v", err)
	}
	if _, err := in.Add(ctx, "resize", "bad", map[string]string{"W": "wide"}); err != nil {
		t.Fatal(err)
	}
	_, err = in.Result(ctx, "resize", "bad")
	if !errors.As(err, &failed) || failed.Job.Attempts != 1 {
		t.Errorf("NoRetry: %v, want dead after one attempt", err)
	}
	if _, err := in.Add(ctx, "resize", "list", []int{1}); !kvq.IsInvalid(err) {
		t.Errorf("data that is not an object: %v", err)
	}
	if _, err := in.Add(ctx, "other", "j", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Drain(ctx); err == nil || !strings.Contains(err.Error(), `no handler for job type "other"`) {
		t.Errorf("Drain with a job of a type without handler: %v", err)
	}
}

func TestInlineSnoozeAndAddMany(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	runs := map[string]int{}
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		runs[job.ID]++
		if job.ID == "s" {
			return nil, kvq.SnoozeFor(0)
		}
		return json.RawMessage(fmt.Sprintf("%d", runs[job.ID])), nil
	})
	res, err := in.AddMany(ctx, "t", []kvq.NewJob{{ID: "a", Priority: 2}, {ID: "s", Priority: 1}}, kvq.IfExistsKeep)
	if err != nil || res.Added != 2 {
		t.Fatalf("AddMany: %+v, %v", res, err)
	}
	if n, err := in.Drain(ctx); err != nil || n != 2 {
		t.Errorf("Drain: %d runs, %v; want each job once", n, err)
	}
	if s, _ := in.Get(ctx, "t", "s"); s.State != kvq.StatePending || s.Attempts != 0 {
		t.Errorf("a snoozed job: %+v", s)
	}
	if jobs := in.Jobs("t"); len(jobs) != 2 || jobs[0].ID != "a" || string(jobs[0].Result) != "1" {
		t.Errorf("Jobs: %+v", jobs)
	}
	if _, err := in.Result(ctx, "t", "s"); err == nil {
		t.Error("Result of a job that snoozes did not fail")
	}
	if _, err := in.Get(ctx, "t", "missing"); !kvq.IsNotFound(err) {
		t.Errorf("Get of a missing job: %v", err)
	}
}

func TestInlineRunsAScheduledJobOnlyOnceItsTimeComes(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	var ran []string
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		ran = append(ran, job.ID)
		return nil, nil
	})
	start := in.Now()
	if _, err := in.Add(ctx, "t", "later", nil, kvq.After(time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "t", "now", nil); err != nil {
		t.Fatal(err)
	}
	if n, err := in.DrainDue(ctx); err != nil || n != 1 || len(ran) != 1 || ran[0] != "now" {
		t.Fatalf("DrainDue: %d runs (%v), %v; want only the due job", n, ran, err)
	}
	if job, _ := in.Get(ctx, "t", "later"); job.State != kvq.StatePending {
		t.Errorf("a job scheduled an hour later ran at once: %+v", job)
	}
	in.Advance(59 * time.Minute)
	if n, _ := in.DrainDue(ctx); n != 0 {
		t.Errorf("DrainDue a minute before its time: %d runs", n)
	}
	in.Advance(time.Minute)
	if n, _ := in.DrainDue(ctx); n != 1 {
		t.Errorf("DrainDue at its time: %d runs", n)
	}
	job, _ := in.Get(ctx, "t", "later")
	if job.State != kvq.StateFinished || job.StartedAt < job.ScheduledTime || job.StartedAt.Time().Before(start.Add(time.Hour-time.Millisecond)) {
		t.Errorf("the scheduled job: %+v", job)
	}
}

func TestInlineDrainMovesTheClockAndRunsJobsInTheirTimeOrder(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	var ran []string
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		ran = append(ran, job.ID)
		return nil, nil
	})
	start := in.Now()
	// A better priority does not run a job before its time.
	in.Add(ctx, "t", "b", nil, kvq.After(20*time.Second), kvq.WithPriority(-5))
	in.Add(ctx, "t", "a", nil, kvq.At(start.Add(10*time.Second)))
	in.Add(ctx, "t", "c", nil)
	if n, err := in.Drain(ctx); err != nil || n != 3 {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if fmt.Sprint(ran) != "[c a b]" {
		t.Errorf("ran %v, want [c a b]", ran)
	}
	if now := in.Now(); now.Before(start.Add(20 * time.Second)) {
		t.Errorf("the clock is %v after Drain, want 20 s on", now.Sub(start))
	}
}

func TestInlineRetriesWaitForTheirBackoff(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	in.SetType("t", kvq.TypeConfig{Backoff: &kvq.BackoffConfig{Base: 10 * time.Second}})
	fails := 1
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		if fails > 0 {
			fails--
			return nil, errors.New("busy")
		}
		if job.ID == "snoozer" {
			return nil, kvq.SnoozeFor(time.Minute)
		}
		return "ok", nil
	})
	in.Add(ctx, "t", "j", nil)
	if n, _ := in.DrainDue(ctx); n != 1 {
		t.Fatalf("DrainDue: %d runs", n)
	}
	job, _ := in.Get(ctx, "t", "j")
	if left := job.ScheduledTime.Time().Sub(in.Now()); job.State != kvq.StatePending || left < 7*time.Second || left > 10*time.Second {
		t.Fatalf("after a failure: %+v, due in %v; want 8..10 s (base 10 s, jitter 0.2)", job, left)
	}
	if n, _ := in.DrainDue(ctx); n != 0 {
		t.Errorf("DrainDue ran a retry before its backoff")
	}
	if n, _ := in.Drain(ctx); n != 1 {
		t.Errorf("Drain: %d runs, want the retry", n)
	}
	if job, _ = in.Get(ctx, "t", "j"); job.Outcome != kvq.OutcomeSucceeded || job.StartedAt < job.Errors[0].At+8000 {
		t.Errorf("the retry: %+v", job)
	}

	// A snooze hands the job back for later: Drain does not run it again, DrainDue once due does.
	in.Add(ctx, "t", "snoozer", nil)
	if n, _ := in.Drain(ctx); n != 1 {
		t.Errorf("Drain of a job that snoozes: %d runs", n)
	}
	s, _ := in.Get(ctx, "t", "snoozer")
	if s.State != kvq.StatePending || s.ScheduledTime.Time().Sub(in.Now()) < 59*time.Second {
		t.Errorf("a snoozed job: %+v", s)
	}
}

func TestInlinePauseAndResume(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	ty, err := in.PauseType(ctx, "t", 0)
	if err != nil || !ty.Paused || ty.PausedUntil != 0 {
		t.Fatalf("PauseType: %+v, %v", ty, err)
	}
	in.Add(ctx, "t", "j", nil)
	if n, _ := in.Drain(ctx); n != 0 {
		t.Errorf("Drain of a paused type: %d runs", n)
	}
	if _, err := in.Result(ctx, "t", "j"); err == nil || !strings.Contains(err.Error(), "paused") {
		t.Errorf("Result of a paused type's job: %v", err)
	}
	if ty, err = in.ResumeType(ctx, "t"); err != nil || ty.Paused {
		t.Fatalf("ResumeType: %+v, %v", ty, err)
	}
	if n, _ := in.DrainDue(ctx); n != 1 {
		t.Errorf("DrainDue after resume: %d runs", n)
	}

	// A pause for a while ends by the Inline's clock; Drain moves the clock there.
	if ty, err = in.PauseType(ctx, "t", time.Minute); err != nil || !ty.Paused || ty.PausedUntil.Time().Sub(in.Now()) < 59*time.Second {
		t.Fatalf("PauseType for a minute: %+v, %v", ty, err)
	}
	in.Add(ctx, "t", "k", nil)
	if n, _ := in.DrainDue(ctx); n != 0 {
		t.Errorf("DrainDue while paused for a minute: %d runs", n)
	}
	if n, _ := in.Drain(ctx); n != 1 {
		t.Errorf("Drain past a pause's end: %d runs", n)
	}
	if ty, _ = in.GetType(ctx, "t"); ty.Paused {
		t.Errorf("after its end the type is still paused: %+v", ty)
	}
	if _, err := in.PauseType(ctx, "missing", 0); !kvq.IsNotFound(err) {
		t.Errorf("PauseType of a missing type: %v", err)
	}
}

// concurrency tracks the most handlers running at once, per key.
type concurrency struct {
	mu        sync.Mutex
	now, most map[string]int
}

func (c *concurrency) handler(key func(*kvq.Job) string) kvq.HandlerFunc {
	c.now, c.most = map[string]int{}, map[string]int{}
	return func(ctx context.Context, job *kvq.Job) (any, error) {
		k := key(job)
		c.mu.Lock()
		c.now[k]++
		if c.now[k] > c.most[k] {
			c.most[k] = c.now[k]
		}
		c.mu.Unlock()
		time.Sleep(20 * time.Millisecond)
		c.mu.Lock()
		c.now[k]--
		c.mu.Unlock()
		return nil, nil
	}
}

func TestInlineMaxRunningCapsItsConcurrency(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	in.SetConcurrency(4)
	var c concurrency
	in.Handle("t", c.handler(func(*kvq.Job) string { return "all" }))
	for i := 0; i < 8; i++ {
		in.Add(ctx, "t", fmt.Sprint(i), nil)
	}
	if n, err := in.Drain(ctx); err != nil || n != 8 || c.most["all"] != 4 {
		t.Fatalf("Drain with concurrency 4: %d runs, %v, at most %d at once", n, err, c.most["all"])
	}
	in.SetType("t", kvq.TypeConfig{MaxRunning: 2})
	if ty, _ := in.GetType(ctx, "t"); ty.MaxRunning != 2 {
		t.Errorf("GetType: %+v", ty)
	}
	for i := 0; i < 8; i++ {
		in.Add(ctx, "t", fmt.Sprint(i), nil)
	}
	if n, err := in.Drain(ctx); err != nil || n != 8 || c.most["all"] != 4 {
		t.Fatalf("Drain: %d runs, %v", n, err)
	}
	c.most["all"] = 0
	for i := 0; i < 8; i++ {
		in.Add(ctx, "t", fmt.Sprint(i), nil)
	}
	in.Drain(ctx)
	if c.most["all"] != 2 {
		t.Errorf("with MaxRunning 2: at most %d at once", c.most["all"])
	}
	in.SetType("t", kvq.TypeConfig{MaxRunning: kvq.NoLimit})
	if ty, _ := in.GetType(ctx, "t"); ty.MaxRunning != 0 {
		t.Errorf("NoLimit did not clear MaxRunning: %+v", ty)
	}
}

func TestInlineRateCountsRunsPerWindowOfItsClock(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	in.SetType("t", kvq.TypeConfig{Rate: &kvq.RateLimit{Limit: 2, Period: time.Second}})
	for i := 0; i < 5; i++ {
		in.Add(ctx, "t", fmt.Sprint(i), nil)
	}
	if n, _ := in.DrainDue(ctx); n != 2 {
		t.Errorf("DrainDue under a rate of 2 a second: %d runs", n)
	}
	in.Advance(time.Second)
	if n, _ := in.DrainDue(ctx); n != 2 {
		t.Errorf("a second later: %d runs", n)
	}
	if n, _ := in.Drain(ctx); n != 1 {
		t.Errorf("Drain: %d runs", n)
	}
}

func TestInlineGroupsTakeTurns(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	var ran []string
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		ran = append(ran, job.ID)
		return nil, nil
	})
	at := in.Now().Add(-10 * time.Second) // all due, all at the same millisecond
	if _, err := in.AddMany(ctx, "t", []kvq.NewJob{{ID: "a0", Group: "A", At: at}, {ID: "a1", Group: "A", At: at}, {ID: "a2", Group: "A", At: at}}); err != nil {
		t.Fatal(err)
	}
	in.Add(ctx, "t", "b0", nil, kvq.WithGroup("B"), kvq.At(at))
	in.Add(ctx, "t", "b1", nil, kvq.WithGroup("B"), kvq.At(at))
	in.Add(ctx, "t", "n0", nil, kvq.At(at))
	page, err := in.Groups(ctx, "t", kvq.GroupOptions{})
	if err != nil || len(page.Groups) != 2 || page.Groups[0] != (kvq.GroupInfo{Group: "A", Pending: 3, InTurnAt: page.Groups[0].InTurnAt}) ||
		page.Groups[0].InTurnAt == 0 || page.Groups[1].Group != "B" || page.NextAfter != "" {
		t.Errorf("Groups: %+v, %v", page, err)
	}
	if page, _ := in.Groups(ctx, "t", kvq.GroupOptions{Limit: 1}); len(page.Groups) != 1 || page.NextAfter != "A" {
		t.Errorf("a page of one: %+v", page)
	}
	if page, _ := in.Groups(ctx, "t", kvq.GroupOptions{After: "A"}); len(page.Groups) != 1 || page.Groups[0].Group != "B" {
		t.Errorf("after A: %+v", page)
	}
	if job, _ := in.Get(ctx, "t", "a1"); job.Group != "A" {
		t.Errorf("a job's group: %+v", job)
	}
	if n, err := in.Drain(ctx); err != nil || n != 6 {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	// The job without a group wins the tie at its time; then the groups, by name, each going
	// to the back once served (as kvq serve gives them).
	if fmt.Sprint(ran) != "[n0 a0 b0 a1 b1 a2]" {
		t.Errorf("ran %v, want [n0 a0 b0 a1 b1 a2]", ran)
	}
	// A better priority goes first, whatever the turn.
	ran = nil
	at = in.Now().Add(-10 * time.Second)
	in.Add(ctx, "t", "a0", nil, kvq.WithGroup("A"), kvq.At(at))
	in.Add(ctx, "t", "a1", nil, kvq.WithGroup("A"), kvq.WithPriority(-1), kvq.At(at))
	in.Add(ctx, "t", "b0", nil, kvq.WithGroup("B"), kvq.At(at))
	in.Drain(ctx)
	if fmt.Sprint(ran) != "[a1 b0 a0]" {
		t.Errorf("ran %v, want [a1 b0 a0]", ran)
	}
	if _, err := in.Add(ctx, "t", "bad", nil, kvq.WithGroup(strings.Repeat("x", 129))); !kvq.IsInvalid(err) {
		t.Errorf("a group of 129 bytes: %v", err)
	}
}

// inlineRecording is an Inline whose type "t" records the order its jobs run in.
func inlineRecording() (*kvq.Inline, *[]string) {
	in := kvq.NewInline()
	ran := &[]string{}
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		*ran = append(*ran, job.ID)
		return nil, nil
	})
	return in, ran
}

// addGroupAndUngrouped adds g1..g3 of group G at base and u1..u3 without a group at base +
// 1, 2, 3 steps.
func addGroupAndUngrouped(t *testing.T, in *kvq.Inline, base time.Time, step time.Duration) {
	t.Helper()
	ctx := context.Background()
	var jobs []kvq.NewJob
	for i := 1; i <= 3; i++ {
		jobs = append(jobs, kvq.NewJob{ID: fmt.Sprint("g", i), Group: "G", At: base})
	}
	for i := 1; i <= 3; i++ {
		jobs = append(jobs, kvq.NewJob{ID: fmt.Sprint("u", i), At: base.Add(time.Duration(i) * step)})
	}
	if _, err := in.AddMany(ctx, "t", jobs); err != nil {
		t.Fatal(err)
	}
}

// kvq serve, jobs due at base (G) and base + 1, 2, 3 ms (u1..u3), one accept at a time: g1,
// u1, u2, u3, g2, g3 — G goes to the back once served, while each job without a group keeps
// its own time (not "one more group": g1, u1, g2, u2, g3, u3).
func TestInlineJobsWithoutAGroupKeepTheirOwnTimeAgainstAGroupsTurns(t *testing.T) {
	in, ran := inlineRecording()
	addGroupAndUngrouped(t, in, in.Now().Add(-10*time.Second), time.Millisecond)
	if n, err := in.DrainDue(context.Background()); err != nil || n != 6 {
		t.Fatalf("DrainDue: %d, %v", n, err)
	}
	if fmt.Sprint(*ran) != "[g1 u1 u2 u3 g2 g3]" {
		t.Errorf("ran %v, want [g1 u1 u2 u3 g2 g3]", *ran)
	}
}

// G's jobs at base, u1..u3 at base + 1, 2, 3 s, and one run per second from base + 1 s (a
// rate of 1 a second). kvq serve, one accept at each of base + 1 .. 6 s: g1, u1, g2, u2, u3,
// g3 — G's turn is its last accept, and a job without a group due by then goes first (u3 at
// base + 3 s against g2's run at base + 3 s: a tie, to the job).
func TestInlineAGroupsTurnAgainstJobsWithoutAGroupAsTheClockMoves(t *testing.T) {
	in, ran := inlineRecording()
	in.SetType("t", kvq.TypeConfig{Rate: &kvq.RateLimit{Limit: 1, Period: time.Second}})
	addGroupAndUngrouped(t, in, in.Now().Add(-time.Second), time.Second)
	if n, err := in.Drain(context.Background()); err != nil || n != 6 {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if fmt.Sprint(*ran) != "[g1 u1 g2 u2 u3 g3]" {
		t.Errorf("ran %v, want [g1 u1 g2 u2 u3 g3]", *ran)
	}
}

// A group's place in line is its first job's (by priority, then time): while that one is not
// due, a due job of the group with a worse priority waits (kvq serve hands out only u).
func TestInlineAGroupWhoseFirstJobIsNotDueIsNotInLine(t *testing.T) {
	ctx := context.Background()
	in, ran := inlineRecording()
	now := in.Now()
	in.Add(ctx, "t", "g-later", nil, kvq.WithGroup("G"), kvq.At(now.Add(time.Hour)))
	in.Add(ctx, "t", "g-due", nil, kvq.WithGroup("G"), kvq.WithPriority(1), kvq.At(now.Add(-time.Second)))
	in.Add(ctx, "t", "u", nil, kvq.WithPriority(1), kvq.At(now.Add(-500*time.Millisecond)))
	if n, err := in.DrainDue(ctx); err != nil || n != 1 || fmt.Sprint(*ran) != "[u]" {
		t.Fatalf("DrainDue: %d, %v, ran %v; want only u", n, err, *ran)
	}
	if page, _ := in.Groups(ctx, "t", kvq.GroupOptions{}); len(page.Groups) != 1 || page.Groups[0].InTurnAt != kvq.Millis(now.Add(time.Hour).UnixMilli()) {
		t.Errorf("Groups: %+v; want G in turn in an hour", page)
	}
	if n, err := in.Drain(ctx); err != nil || n != 2 || fmt.Sprint(*ran) != "[u g-later g-due]" {
		t.Errorf("Drain: %d, %v, ran %v; want [u g-later g-due]", n, err, *ran)
	}
}

func TestInlineMaxRunningPerGroup(t *testing.T) {
	ctx := context.Background()
	in := kvq.NewInline()
	in.SetConcurrency(10)
	in.SetType("t", kvq.TypeConfig{MaxRunningPerGroup: 1})
	var c concurrency
	in.Handle("t", c.handler(func(job *kvq.Job) string { return strings.TrimRight(job.ID, "0123456789") }))
	for i := 0; i < 3; i++ {
		in.Add(ctx, "t", fmt.Sprint("a", i), nil, kvq.WithGroup("A"))
		in.Add(ctx, "t", fmt.Sprint("b", i), nil, kvq.WithGroup("B"))
		in.Add(ctx, "t", fmt.Sprint("n", i), nil)
	}
	if n, err := in.Drain(ctx); err != nil || n != 9 {
		t.Fatalf("Drain: %d, %v", n, err)
	}
	if c.most["a"] != 1 || c.most["b"] != 1 || c.most["n"] != 3 {
		t.Errorf("most at once per group: %v; want 1 of A, 1 of B, and the 3 without a group", c.most)
	}
	if page, _ := in.Groups(ctx, "t", kvq.GroupOptions{}); len(page.Groups) != 0 {
		t.Errorf("Groups once all finished: %+v", page)
	}
}
