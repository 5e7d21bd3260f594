package kvq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"

	kvq "github.com/kvq/kvq/clients/go"
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
