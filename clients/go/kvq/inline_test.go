// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// newInline starts an Inline of the tree's kvq for one test, closed when it ends (and checked
// to have stopped cleanly).
func newInline(t *testing.T) *kvq.Inline {
	t.Helper()
	bin, err := kvqBin()
	if err != nil {
		t.Fatal(err)
	}
	in, err := kvq.NewInline(context.Background(), kvq.InlineOptions{Bin: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := in.Close(); err != nil {
			t.Errorf("Close: %v", err)
		}
	})
	return in
}

// fastRetries is a type whose retries come within milliseconds, so a test does not wait.
var fastRetries = kvq.TypeConfig{Timeout: 30 * time.Second,
	Backoff: &kvq.BackoffConfig{Base: time.Millisecond, Cap: 10 * time.Millisecond}}

// setUp is what an application would share between its worker and its tests.
func setUp(r kvq.Registrar, flaky *int32) {
	r.Handle("resize", func(ctx context.Context, job *kvq.Job) (any, error) {
		var in struct{ W, H int }
		if err := job.Decode(&in); err != nil {
			return nil, kvq.NoRetry(err)
		}
		if atomic.AddInt32(flaky, -1) >= 0 {
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

func TestInlineRunsTheHandlersOnARealServer(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	in := newInline(t)
	flaky := int32(2)
	setUp(in, &flaky)
	if _, err := in.SetType(ctx, "resize", fastRetries); err != nil {
		t.Fatal(err)
	}
	var p kvq.Producer = in
	if _, err := p.Add(ctx, "resize", "img1", map[string]int{"W": 3, "H": 4}); err != nil {
		t.Fatal(err)
	}
	result, err := p.Result(ctx, "resize", "img1")
	if err != nil || string(result) != `{"area":12}` {
		t.Fatalf("Result: %s, %v", result, err)
	}
	job, err := p.Get(ctx, "resize", "img1")
	if err != nil || job.Attempts != 3 || len(job.Errors) != 2 || job.Errors[1].Message != "disk busy" ||
		job.Errors[1].Attempt != 2 || string(job.Progress) != `"half"` {
		t.Errorf("after two failures and a success: %+v, %v", job, err)
	}

	// An add of a type without a timeout is the server's 409, as in production.
	if _, err := in.Add(ctx, "untyped", "j", nil); kvq.ErrorCode(err) != "no_timeout" {
		t.Errorf("an add to a type that does not exist: %v", err)
	}
	if _, err := in.Add(ctx, "resize", "list", []int{1}); !kvq.IsInvalid(err) {
		t.Errorf("data that is not an object: %v", err)
	}
}

func TestInlineFailuresFollowTheServersRetryPolicy(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	in := newInline(t)
	flaky := int32(100)
	setUp(in, &flaky)
	cfg := fastRetries
	cfg.MaxAttempts = 4
	if _, err := in.SetType(ctx, "resize", cfg); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "resize", "always-busy", map[string]int{"W": 1}); err != nil {
		t.Fatal(err)
	}
	_, err := in.Result(ctx, "resize", "always-busy")
	var failed *kvq.JobFailedError
	if !errors.As(err, &failed) || failed.Job.Outcome != kvq.OutcomeDead || failed.Job.Attempts != 4 || len(failed.Job.Errors) != 4 {
		t.Fatalf("a job failing every time: %v", err)
	}

	atomic.StoreInt32(&flaky, 0)
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
}

func TestInlineDrainDueLeavesLaterJobsAndDrainWaitsForThem(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	in := newInline(t)
	if _, err := in.SetType(ctx, "t", fastRetries); err != nil {
		t.Fatal(err)
	}
	var snoozed int32
	in.Handle("t", func(ctx context.Context, job *kvq.Job) (any, error) {
		if job.ID == "snoozes" && atomic.AddInt32(&snoozed, 1) == 1 {
			return nil, kvq.SnoozeFor(200 * time.Millisecond)
		}
		return job.ID, nil
	})
	if _, err := in.AddMany(ctx, "t", []kvq.NewJob{{ID: "now"}, {ID: "snoozes"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "t", "later", nil, kvq.After(400*time.Millisecond)); err != nil {
		t.Fatal(err)
	}
	n, err := in.DrainDue(ctx)
	if err != nil || n != 2 {
		t.Fatalf("DrainDue: %d runs, %v; want 2 (now, and snoozes once)", n, err)
	}
	counts, err := in.Counts(ctx, "t")
	if err != nil || counts.Pending != 2 || counts.Scheduled != 2 || counts.Finished != 1 {
		t.Fatalf("after DrainDue: %+v, %v; want the snoozed and the later job pending", counts, err)
	}
	start := time.Now()
	n, err = in.Drain(ctx)
	if err != nil || n != 2 {
		t.Fatalf("Drain: %d runs, %v; want 2", n, err)
	}
	if waited := time.Since(start); waited < 250*time.Millisecond {
		t.Errorf("Drain returned after %v: it did not wait for the later job", waited)
	}
	for _, id := range []string{"now", "snoozes", "later"} {
		if job, err := in.Get(ctx, "t", id); err != nil || job.Outcome != kvq.OutcomeSucceeded {
			t.Errorf("job %s: %+v, %v; want succeeded", id, job, err)
		}
	}
	short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
	defer cancel()
	if _, err := in.Add(ctx, "t", "tomorrow", nil, kvq.After(24*time.Hour)); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Drain(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Drain with a job due tomorrow and a short context: %v", err)
	}
}

func TestInlineCloseStopsTheServerAndRemovesItsData(t *testing.T) {
	bin, err := kvqBin()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	in, err := kvq.NewInline(ctx, kvq.InlineOptions{Bin: bin})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(in.URL(), "http://127.0.0.1:") {
		t.Errorf("URL %q, want a loopback one", in.URL())
	}
	if st, err := os.Stat(in.DataDir()); err != nil || !st.IsDir() {
		t.Fatalf("its data directory %q: %v", in.DataDir(), err)
	}
	if _, err := in.SetType(ctx, "t", kvq.TypeConfig{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if err := in.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(in.DataDir()); !os.IsNotExist(err) {
		t.Errorf("its data directory after Close: %v, want it gone", err)
	}
	quick, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	defer cancel()
	if _, err := in.GetType(quick, "t"); err == nil {
		t.Error("the server still answers after Close")
	}
	if err := in.Close(); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func TestInlineFindsTheBinaryByOptionThenKVQ_BINThenPATH(t *testing.T) {
	bin, err := kvqBin()
	if err != nil {
		t.Fatal(err)
	}
	ctx := testCtx(t, 30*time.Second)
	start := func() error {
		in, err := kvq.NewInline(ctx, kvq.InlineOptions{})
		if err == nil {
			err = in.Close()
		}
		return err
	}
	t.Setenv("KVQ_BIN", bin)
	t.Setenv("PATH", "")
	if err := start(); err != nil {
		t.Errorf("with $KVQ_BIN: %v", err)
	}
	onPath := t.TempDir()
	if err := os.Symlink(bin, filepath.Join(onPath, "kvq")); err != nil {
		t.Fatal(err)
	}
	t.Setenv("KVQ_BIN", "")
	t.Setenv("PATH", onPath)
	if err := start(); err != nil {
		t.Errorf("with kvq on $PATH: %v", err)
	}
	t.Setenv("PATH", t.TempDir())
	if err := start(); err == nil || !strings.Contains(err.Error(), "no kvq binary") {
		t.Errorf("with no kvq anywhere: %v", err)
	}
	t.Setenv("KVQ_BIN", "/nonexistent/kvq")
	if err := start(); err == nil || !strings.Contains(err.Error(), "/nonexistent/kvq") || !strings.Contains(err.Error(), "$KVQ_BIN") {
		t.Errorf("with $KVQ_BIN naming nothing: %v", err)
	}
	// An explicit Bin wins over $KVQ_BIN.
	in, err := kvq.NewInline(ctx, kvq.InlineOptions{Bin: bin})
	if err != nil {
		t.Fatalf("an explicit Bin with a wrong $KVQ_BIN: %v", err)
	}
	_ = in.Close()
	// A server that refuses its flags is reported with what it said.
	_, err = kvq.NewInline(ctx, kvq.InlineOptions{Bin: bin, Args: []string{"--listen", "127.0.0.1:0"}})
	if err == nil || !strings.Contains(err.Error(), "leave out --data, --store and --listen") {
		t.Errorf("kvq serve --ephemeral --listen: %v, want the server's own message", err)
	}
}

func TestInlineWithoutAHandlerOrWithAMissingTypeSaysSo(t *testing.T) {
	ctx := testCtx(t, 30*time.Second)
	in := newInline(t)
	if _, err := in.DrainDue(ctx); err == nil || !strings.Contains(err.Error(), "no handler") {
		t.Errorf("DrainDue without a handler: %v", err)
	}
	in.Handle("missing", func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil })
	if _, err := in.Drain(ctx); !kvq.IsNotFound(err) {
		t.Errorf("Drain of a type that does not exist: %v, want not_found", err)
	}
	if _, err := in.SetType(ctx, "t", kvq.TypeConfig{Timeout: time.Second}); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Add(ctx, "t", "j", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := in.Result(ctx, "t", "j"); !kvq.IsNotFound(err) {
		t.Errorf("Result while a handler's type does not exist: %v, want its not_found at once", err)
	}
}
