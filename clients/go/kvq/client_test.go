// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

func TestNewClientRejectsABadURL(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:7411", "ftp://host", "http://"} {
		if _, err := kvq.NewClient(u); err == nil {
			t.Errorf("NewClient(%q) did not fail", u)
		}
	}
}

func TestClientTypes(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	name := uniq("t")
	got, err := c.SetType(ctx, name, kvq.TypeConfig{Timeout: 1500 * time.Millisecond, MaxAttempts: 7,
		MaxLostRuns: 2, FinishedRetention: time.Hour,
		Backoff: &kvq.BackoffConfig{Base: 2 * time.Second, Factor: 3, Cap: time.Minute, Jitter: 0.5}})
	if err != nil {
		t.Fatal(err)
	}
	want := kvq.Type{Name: name, Timeout: 1500 * time.Millisecond, FinishedRetention: time.Hour, MaxLostRuns: 2,
		MaxAttempts: 7, Backoff: kvq.BackoffConfig{Base: 2 * time.Second, Factor: 3, Cap: time.Minute, Jitter: 0.5}}
	if *got != want {
		t.Errorf("SetType: %+v, want %+v", *got, want)
	}
	// A zero field leaves its setting alone.
	if got, err = c.SetType(ctx, name, kvq.TypeConfig{MaxAttempts: 2}); err != nil || got.Timeout != want.Timeout || got.MaxAttempts != 2 {
		t.Errorf("SetType of MaxAttempts only: %+v, %v", got, err)
	}
	if got, err = c.GetType(ctx, name); err != nil || got.MaxAttempts != 2 || got.Backoff != want.Backoff {
		t.Errorf("GetType: %+v, %v", got, err)
	}
	types, err := c.ListTypes(ctx)
	if err != nil {
		t.Fatal(err)
	}
	listed := false
	for _, ty := range types {
		listed = listed || ty.Name == name
	}
	if !listed {
		t.Errorf("ListTypes does not list %s", name)
	}
	if _, err := c.Add(ctx, name, "j", nil); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteType(ctx, name); kvq.ErrorCode(err) != "type_has_jobs" {
		t.Errorf("DeleteType of a type with a job: %v, want type_has_jobs", err)
	}
	if n, err := c.RemoveAll(ctx, name); err != nil || n != 1 {
		t.Errorf("RemoveAll: %d, %v", n, err)
	}
	if err := c.DeleteType(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetType(ctx, name); !kvq.IsNotFound(err) {
		t.Errorf("GetType of a deleted type: %v, want not_found", err)
	}
	if _, err := c.SetType(ctx, "bad type!", kvq.TypeConfig{Timeout: time.Second}); !kvq.IsInvalid(err) {
		t.Errorf("SetType of a bad name: %v, want a 400", err)
	}
	if _, err := c.SetType(ctx, uniq("t"), kvq.TypeConfig{Timeout: time.Second, MaxAttempts: 2000000}); !kvq.IsInvalid(err) {
		t.Errorf("SetType with max_attempts out of range: %v, want a 400", err)
	}
}

func TestClientAddGetListRemove(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	added, err := c.Add(ctx, typ, "a", map[string]any{"k": 1}, kvq.WithPriority(5))
	if err != nil || !added {
		t.Fatalf("Add: %v, %v", added, err)
	}
	if added, err = c.Add(ctx, typ, "a", map[string]any{"k": 2}, kvq.WithIfExists(kvq.IfExistsKeep)); err != nil || added {
		t.Errorf("Add with keep of an existing job: added %v, %v; want false", added, err)
	}
	job, err := c.Get(ctx, typ, "a")
	if err != nil {
		t.Fatal(err)
	}
	if job.State != kvq.StatePending || string(job.Data) != `{"k":1}` || job.Priority != 5 || job.Result != nil || job.Outcome != "" {
		t.Errorf("Get: %+v", job)
	}
	later := time.Now().Add(time.Hour)
	res, err := c.AddMany(ctx, typ, []kvq.NewJob{
		{ID: "a", Data: map[string]int{"k": 3}},
		{ID: "b"},
		{ID: "c", At: later},
		{ID: "d", IfExists: kvq.IfExistsUpdate},
	}, kvq.IfExistsKeep)
	if err != nil {
		t.Fatal(err)
	}
	if res.Added != 3 || len(res.Kept) != 1 || res.Kept[0] != "a" {
		t.Errorf("AddMany: %+v, want 3 added and a kept", res)
	}
	if c2, err := c.Get(ctx, typ, "c"); err != nil || c2.ScheduledTime.Time().Sub(later).Abs() > time.Second {
		t.Errorf("a scheduled job: %+v, %v", c2, err)
	}
	page, err := c.List(ctx, typ, kvq.ListOptions{State: kvq.StatePending, Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Jobs) != 2 || page.Jobs[0].ID != "a" || page.Jobs[1].ID != "b" || page.NextCursor == "" {
		t.Errorf("the first page: %d jobs, cursor %q", len(page.Jobs), page.NextCursor)
	}
	all, err := c.ListAll(ctx, typ, kvq.ListOptions{Limit: 1})
	if err != nil || len(all) != 4 {
		t.Errorf("ListAll, a page at a time: %d jobs, %v; want 4", len(all), err)
	}
	scheduled, err := c.List(ctx, typ, kvq.ListOptions{State: "scheduled"})
	if err != nil || len(scheduled.Jobs) != 1 || scheduled.Jobs[0].ID != "c" {
		t.Errorf("List scheduled: %+v, %v", scheduled, err)
	}
	if n, err := c.Pending(ctx, typ); err != nil || n != 3 {
		t.Errorf("Pending: %d, %v; want 3 due", n, err)
	}
	if _, err := c.List(ctx, typ, kvq.ListOptions{State: "bogus"}); !kvq.IsInvalid(err) {
		t.Errorf("List with a bad state: %v", err)
	}
	if err := c.Remove(ctx, typ, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(ctx, typ, "a"); !kvq.IsNotFound(err) {
		t.Errorf("Get of a removed job: %v", err)
	}
	if err := c.Remove(ctx, typ, "a"); !kvq.IsNotFound(err) {
		t.Errorf("Remove of a removed job: %v", err)
	}
}

func TestClientErrorsAreTyped(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 10*time.Second)
	_, err := c.Get(ctx, uniq("t"), "nope")
	var apiErr *kvq.APIError
	if !errors.As(err, &apiErr) || apiErr.Status != 404 || apiErr.Code != "not_found" || apiErr.Message == "" {
		t.Fatalf("Get of a missing job: %#v", err)
	}
	if !kvq.IsNotFound(err) || kvq.IsHalted(err) || kvq.IsInvalid(err) {
		t.Error("the helpers disagree with the code")
	}
	if _, err := c.Add(ctx, uniq("t"), "j", nil); kvq.ErrorCode(err) != "no_timeout" {
		t.Errorf("Add to a type that does not exist: %v, want no_timeout", err)
	}
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "j", []int{1}); !kvq.IsInvalid(err) {
		t.Errorf("Add with data that is not an object: %v, want a 400", err)
	}
	if _, err := c.Add(ctx, typ, "j", map[string]any{"f": func() {}}); err == nil {
		t.Error("Add with data JSON cannot encode did not fail")
	}
	// A stale lock is halted.
	if _, err := c.Add(ctx, typ, "j", nil); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Accept: %v, %v", jobs, err)
	}
	if _, err := c.Cancel(ctx, typ, "j"); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, typ, "j", jobs[0].Lock, nil); !kvq.IsHalted(err) {
		t.Errorf("Finish of a cancelled job: %v, want halted", err)
	}
}

func TestClientWaitEventsAndResult(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "j", map[string]int{"n": 1}); err != nil {
		t.Fatal(err)
	}
	stream, err := c.Events(ctx, typ, "j", false)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	states := make(chan []string, 1)
	go func() {
		var seen []string
		for stream.Next() {
			seen = append(seen, stream.Event().State)
		}
		states <- seen
	}()
	results := make(chan string, 1)
	go func() {
		r, err := c.Result(ctx, typ, "j")
		results <- fmt.Sprintf("%s %v", r, err)
	}()
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{Timeout: time.Second, Count: 5})
	if err != nil || len(jobs) != 1 || string(jobs[0].Data) != `{"n":1}` {
		t.Fatalf("Accept: %+v, %v", jobs, err)
	}
	if ev, err := c.Wait(ctx, typ, "j", kvq.StateRunning); err != nil || !ev.Found || ev.State != kvq.StateRunning || ev.Attempts != 1 {
		t.Errorf("Wait for running: %+v, %v", ev, err)
	}
	time.Sleep(100 * time.Millisecond) // let the stream see running on its own
	if _, err := c.Update(ctx, typ, "j", jobs[0].Lock, map[string]int{"pct": 10}); err != nil {
		t.Fatal(err)
	}
	if err := c.Finish(ctx, typ, "j", jobs[0].Lock, map[string]string{"ok": "yes"}); err != nil {
		t.Fatal(err)
	}
	if got := <-results; got != `{"ok":"yes"} <nil>` {
		t.Errorf("Result: %s", got)
	}
	seen := <-states
	if err := stream.Err(); err != nil {
		t.Errorf("the stream ended with %v", err)
	}
	if len(seen) < 2 || seen[0] != kvq.StatePending || seen[len(seen)-1] != kvq.StateFinished {
		t.Errorf("events: %v, want pending ... finished", seen)
	}
	if _, err := c.Events(ctx, typ, "missing", false); !kvq.IsNotFound(err) {
		t.Errorf("Events of a missing job: %v", err)
	}
	if _, err := c.Result(ctx, typ, "missing"); !kvq.IsNotFound(err) {
		t.Errorf("Result of a missing job: %v", err)
	}
	// A wait bounded by its context.
	if _, err := c.Add(ctx, typ, "idle", nil); err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := c.Wait(short, typ, "idle", kvq.StateFinished); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Wait past its context: %v", err)
	}
	// Removal ends Result.
	go func() {
		time.Sleep(200 * time.Millisecond)
		_ = c.Remove(ctx, typ, "idle")
	}()
	if _, err := c.Result(ctx, typ, "idle"); !errors.Is(err, kvq.ErrRemoved) {
		t.Errorf("Result of a job removed while waiting: %v", err)
	}
}

func TestClientCancelAndRerun(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "j", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Rerun(ctx, typ, "j"); !kvq.IsWrongState(err) {
		t.Errorf("Rerun of a pending job: %v, want wrong_state", err)
	}
	job, err := c.Cancel(ctx, typ, "j")
	if err != nil || job.State != kvq.StateFinished || job.Outcome != kvq.OutcomeCancelled {
		t.Fatalf("Cancel: %+v, %v", job, err)
	}
	if _, err := c.Cancel(ctx, typ, "j"); !kvq.IsWrongState(err) {
		t.Errorf("Cancel of a finished job: %v, want wrong_state", err)
	}
	var failed *kvq.JobFailedError
	if _, err := c.Result(ctx, typ, "j"); !errors.As(err, &failed) || failed.Job.Outcome != kvq.OutcomeCancelled {
		t.Errorf("Result of a cancelled job: %v", err)
	}
	job, err = c.Rerun(ctx, typ, "j", kvq.WithPriority(3))
	if err != nil || job.State != kvq.StatePending || job.Priority != 3 || job.Attempts != 0 {
		t.Errorf("Rerun: %+v, %v", job, err)
	}
	if _, err := c.Cancel(ctx, typ, "j"); err != nil {
		t.Fatal(err)
	}
	if n, err := c.RerunAll(ctx, typ, kvq.OutcomeCancelled); err != nil || n != 1 {
		t.Errorf("RerunAll of cancelled jobs: %d, %v", n, err)
	}
	// A worker's own Fail, with NoRetry and a RetryIn.
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Accept: %v, %v", jobs, err)
	}
	in := time.Hour
	fr, err := c.Fail(ctx, typ, "j", jobs[0].Lock, kvq.Failure{Message: "later", Kind: "rate_limit",
		Details: map[string]int{"code": 429}, RetryIn: &in})
	if err != nil || fr.Dead || fr.Attempt != 1 || time.Until(fr.RetryAt.Time()) < 50*time.Minute {
		t.Errorf("Fail with RetryIn: %+v, %v", fr, err)
	}
	job, err = c.Get(ctx, typ, "j")
	if err != nil || len(job.Errors) != 1 || job.Errors[0].Kind != "rate_limit" || string(job.Errors[0].Details) != `{"code":429}` {
		t.Errorf("the recorded failure: %+v, %v", job, err)
	}
}

// 503 answers are retried with backoff until the server takes the call. A real server is made
// to answer 503 on cue: one held-open request fills its request-body budget
// (--max-body-memory), and every other request with a body is refused until that one ends.
func TestClientRetries503(t *testing.T) {
	busy, err := startServer("127.0.0.1:0", "", "--max-body-memory", "4096", "--max-body", "4096")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.stop()
	ctx := testCtx(t, 20*time.Second)
	noRetry, _ := kvq.NewClient(busy.url, kvq.WithRetryTime(0))
	typ := uniq("busy")
	if _, err := noRetry.SetType(ctx, typ, kvq.TypeConfig{Timeout: 5 * time.Second}); err != nil {
		t.Fatal(err)
	}
	// The hog's head reserves its body's bytes once nothing else holds any: a request that the
	// server reads first (a probe sent right after the hog) gets the hog refused 503
	// itself, so it is sent again until no answer shows the server took it.
	var hog net.Conn
	deadline := time.Now().Add(10 * time.Second)
	for hog == nil {
		conn, err := net.Dial("tcp", strings.TrimPrefix(busy.url, "http://"))
		if err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(conn, "PUT /v1/types/%s HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: 4090\r\n\r\n{", typ)
		_ = conn.SetReadDeadline(time.Now().Add(200 * time.Millisecond))
		if n, _ := conn.Read(make([]byte, 1)); n == 0 {
			hog = conn // no answer: the server holds its body's budget, waiting for the rest
			continue
		}
		conn.Close()
		if time.Now().After(deadline) {
			t.Fatal("the server kept refusing the request meant to fill its body budget")
		}
	}
	defer hog.Close()
	_, err = noRetry.Add(ctx, typ, uniq("probe"), map[string]int{"n": 0})
	if !kvq.IsUnavailable(err) {
		t.Fatalf("without retries, while the budget is held: %v, want unavailable (503)", err)
	}
	retrying, _ := kvq.NewClient(busy.url)
	added := make(chan error, 1)
	go func() {
		_, err := retrying.Add(ctx, typ, "j", map[string]int{"n": 1})
		added <- err
	}()
	select {
	case err := <-added:
		t.Fatalf("the add ended while the budget was still held: %v", err)
	case <-time.After(400 * time.Millisecond):
	}
	hog.Close() // frees the budget
	if err := <-added; err != nil {
		t.Fatalf("the retried add: %v", err)
	}
	job, err := noRetry.Get(ctx, typ, "j")
	if err != nil || string(job.Data) != `{"n":1}` {
		t.Errorf("the job the retried add made: %+v, %v", job, err)
	}
}
