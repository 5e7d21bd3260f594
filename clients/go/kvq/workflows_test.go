// SPDX-License-Identifier: Apache-2.0

package kvq_test

// Workflows against the real server: WithDependsOn, Dependencies, batches and FanOut.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// finishOne accepts one job of typ and finishes it with result.
func finishOne(t *testing.T, ctx context.Context, c *kvq.Client, typ string, result any) kvq.AcceptedJob {
	t.Helper()
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Accept %s: %d jobs, %v", typ, len(jobs), err)
	}
	if err := c.Finish(ctx, typ, jobs[0].ID, jobs[0].Lock, result); err != nil {
		t.Fatal(err)
	}
	return jobs[0]
}

func TestClientDependsOnWaitsThenDependenciesShowTheResult(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	fetch := newType(t, c, kvq.TypeConfig{})
	report := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, fetch, "eu", map[string]any{"region": "eu"}); err != nil {
		t.Fatal(err)
	}
	if added, err := c.Add(ctx, report, "weekly", nil, kvq.WithDependsOn(kvq.JobRef{Type: fetch, ID: "eu"})); err != nil || !added {
		t.Fatalf("Add with WithDependsOn: %v, %v", added, err)
	}
	job, err := c.Get(ctx, report, "weekly")
	if err != nil || job.State != kvq.StateWaiting || job.Dependencies != 1 || job.WaitingOn != 1 ||
		job.OnDependencyFailure != string(kvq.DependencyFailureCancel) {
		t.Fatalf("the dependent: %+v, %v", job, err)
	}
	if jobs, err := c.Accept(ctx, report, kvq.AcceptOptions{}); err != nil || len(jobs) != 0 {
		t.Fatalf("a waiting job was accepted: %v, %v", jobs, err)
	}
	deps, err := c.Dependencies(ctx, report, "weekly")
	if err != nil || len(deps) != 1 || deps[0].Type != fetch || deps[0].ID != "eu" || deps[0].Resolved != "" {
		t.Fatalf("Dependencies before: %+v, %v", deps, err)
	}

	finishOne(t, ctx, c, fetch, map[string]any{"rows": 120})
	if job, err = c.Get(ctx, report, "weekly"); err != nil || job.State != kvq.StatePending {
		t.Fatalf("after its dependency succeeded: %+v, %v", job, err)
	}
	deps, err = c.Dependencies(ctx, report, "weekly")
	if err != nil || len(deps) != 1 || deps[0].Resolved != kvq.OutcomeSucceeded || deps[0].Job == nil ||
		string(deps[0].Job.Result) != `{"rows":120}` {
		t.Fatalf("Dependencies after: %+v, %v", deps, err)
	}
	if deps, err := c.Dependencies(ctx, fetch, "eu"); err != nil || deps == nil || len(deps) != 0 {
		t.Errorf("Dependencies of a job without: %v, %v", deps, err)
	}
	if _, err := c.Dependencies(ctx, fetch, "nope"); !kvq.IsNotFound(err) {
		t.Errorf("Dependencies of no job: %v", err)
	}
}

func TestClientAddManyWithDependenciesAndTheirPolicy(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	a := kvq.JobRef{Type: typ, ID: "a"}
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{
		{ID: "a"},
		{ID: "b", DependsOn: []kvq.JobRef{a}},
		{ID: "c", DependsOn: []kvq.JobRef{a}, OnDependencyFailure: kvq.DependencyFailureRun},
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Cancel(ctx, typ, "a"); err != nil {
		t.Fatal(err)
	}
	b, err := c.Get(ctx, typ, "b")
	if err != nil || b.Outcome != kvq.OutcomeCancelled || b.LastError() == nil || b.LastError().Kind != "dependency_failed" {
		t.Fatalf("b under cancel: %+v, %v", b, err)
	}
	if cj, err := c.Get(ctx, typ, "c"); err != nil || cj.State != kvq.StatePending {
		t.Fatalf("c under run: %+v, %v", cj, err)
	}
	if _, err := c.Add(ctx, typ, "d", nil, kvq.WithDependsOn(kvq.JobRef{Type: typ, ID: "nope"})); !kvq.IsNotFound(err) {
		t.Errorf("a dependency that does not exist: %v", err)
	}
	if _, err := c.Add(ctx, typ, "e", nil, kvq.WithDependsOn(a), kvq.WithOnDependencyFailure("maybe")); !kvq.IsInvalid(err) {
		t.Errorf("a bad policy: %v", err)
	}
}

func TestClientFanOutFiresTheCallbackOnce(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	work := newType(t, c, kvq.TypeConfig{})
	report := newType(t, c, kvq.TypeConfig{})
	id := uniq("batch")
	var jobs []kvq.NewJob
	for i := 0; i < 5; i++ {
		jobs = append(jobs, kvq.NewJob{ID: fmt.Sprintf("j%d", i), Data: map[string]any{"n": i}})
	}
	b, err := c.FanOut(ctx, id, work, jobs, kvq.BatchCallback{Type: report, ID: "done", Data: map[string]any{"to": "ops"}}, "")
	if err != nil || b.ID != id || b.State != kvq.BatchSealed || !b.Sealed || b.Counts.Members != 5 || b.On != kvq.BatchOnComplete {
		t.Fatalf("FanOut: %+v, %v", b, err)
	}
	if jobs[0].Batch != "" {
		t.Errorf("FanOut changed the caller's jobs")
	}
	if j, err := c.Get(ctx, work, "j0"); err != nil || j.Batch != id {
		t.Errorf("a member: %+v, %v", j, err)
	}
	for i := 0; i < 5; i++ {
		if n, err := c.Pending(ctx, report); err != nil || n != 0 {
			t.Fatalf("the callback before the last member ended: %d, %v", n, err)
		}
		finishOne(t, ctx, c, work, nil)
	}
	got, err := c.GetBatch(ctx, id)
	if err != nil || got.State != kvq.BatchFired || !got.Fired || got.Counts.Succeeded != 5 || got.Counts.Unfinished != 0 || got.SettledAt == 0 {
		t.Fatalf("GetBatch: %+v, %v", got, err)
	}
	all, err := c.ListAll(ctx, report, kvq.ListOptions{})
	if err != nil || len(all) != 1 || all[0].ID != "done" {
		t.Fatalf("the callback jobs: %v, %v", all, err)
	}
	var data struct {
		To    string `json:"to"`
		Batch struct {
			ID        string `json:"id"`
			Members   int    `json:"members"`
			Succeeded int    `json:"succeeded"`
		} `json:"batch"`
	}
	if err := json.Unmarshal(all[0].Data, &data); err != nil || data.To != "ops" || data.Batch.ID != id ||
		data.Batch.Members != 5 || data.Batch.Succeeded != 5 {
		t.Fatalf("the callback's data: %s, %v", all[0].Data, err)
	}
}

func TestClientBatchCallsAndTheirErrors(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	report := newType(t, c, kvq.TypeConfig{})
	id := uniq("batch")
	put, err := c.PutBatch(ctx, id, kvq.BatchCallback{Type: report, ID: "r"}, kvq.BatchOnSuccess)
	if err != nil || put.State != kvq.BatchOpen || put.On != kvq.BatchOnSuccess || put.Sealed || put.SettledAt != 0 ||
		put.Callback.Type != report || put.Callback.ID != "r" || put.CreatedAt == 0 {
		t.Fatalf("PutBatch: %+v, %v", put, err)
	}
	if _, err := c.Add(ctx, typ, "m", nil, kvq.WithBatch(id)); err != nil {
		t.Fatal(err)
	}
	if got, err := c.GetBatch(ctx, id); err != nil || got.Counts.Members != 1 || got.Counts.Unfinished != 1 {
		t.Fatalf("GetBatch: %+v, %v", got, err)
	}
	if sealed, err := c.SealBatch(ctx, id); err != nil || sealed.State != kvq.BatchSealed {
		t.Fatalf("SealBatch: %+v, %v", sealed, err)
	}
	_, err = c.Add(ctx, typ, "late", nil, kvq.WithBatch(id))
	var apiErr *kvq.APIError
	if !kvq.IsWrongState(err) || !asAPIError(err, &apiErr) || apiErr.Status != 409 {
		t.Errorf("an add to a sealed batch: %v", err)
	}
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "late2", Batch: id}}); !kvq.IsWrongState(err) {
		t.Errorf("a batch add to a sealed batch: %v", err)
	}
	if _, err := c.GetBatch(ctx, uniq("missing")); !kvq.IsNotFound(err) {
		t.Errorf("GetBatch of none: %v", err)
	}
	if _, err := c.Add(ctx, typ, "x", nil, kvq.WithBatch(uniq("missing"))); !kvq.IsNotFound(err) {
		t.Errorf("an add to no batch: %v", err)
	}
	if _, err := c.PutBatch(ctx, uniq("batch"), kvq.BatchCallback{Type: report, ID: "r"}, "sometimes"); !kvq.IsInvalid(err) {
		t.Errorf("a bad on: %v", err)
	}
}

func asAPIError(err error, target **kvq.APIError) bool {
	return errors.As(err, target)
}
