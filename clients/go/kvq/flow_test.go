// SPDX-License-Identifier: Apache-2.0

package kvq_test

// Schedules, pause / resume, a type's flow-control settings and groups, against the real server.
// The TestClientGroups* tests need a server with groups (the group field of add,
// max_running_per_group, GET /v1/types/{type}/groups); against one without, they fail.

import (
	"context"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

func TestClientTypeFlowSettings(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	name := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	got, err := c.SetType(ctx, name, kvq.TypeConfig{MaxRunning: 3, Rate: &kvq.RateLimit{Limit: 10, Period: time.Second}})
	if err != nil || got.MaxRunning != 3 || got.Rate == nil || *got.Rate != (kvq.RateLimit{Limit: 10, Period: time.Second}) ||
		got.Paused || got.PausedUntil != 0 || got.Timeout != 30*time.Second {
		t.Fatalf("SetType: %+v, %v", got, err)
	}
	if got, err = c.SetType(ctx, name, kvq.TypeConfig{MaxAttempts: 4}); err != nil || got.MaxRunning != 3 || got.Rate == nil {
		t.Errorf("a zero field left the limits alone: %+v, %v", got, err)
	}
	if got, err = c.SetType(ctx, name, kvq.TypeConfig{MaxRunning: kvq.NoLimit, Rate: &kvq.RateLimit{}}); err != nil || got.MaxRunning != 0 || got.Rate != nil {
		t.Errorf("NoLimit and a zero RateLimit clear them: %+v, %v", got, err)
	}
	if _, err := c.SetType(ctx, name, kvq.TypeConfig{Rate: &kvq.RateLimit{Limit: 5000, Period: time.Second}}); !kvq.IsInvalid(err) {
		t.Errorf("a rate limit out of range: %v", err)
	}

	// MaxRunning caps accepts.
	capped := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second, MaxRunning: 1})
	for _, id := range []string{"a", "b"} {
		if _, err := c.Add(ctx, capped, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := c.Accept(ctx, capped, kvq.AcceptOptions{Count: 5})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("Accept under MaxRunning 1: %d jobs, %v", len(jobs), err)
	}
	if more, err := c.Accept(ctx, capped, kvq.AcceptOptions{Count: 5}); err != nil || len(more) != 0 {
		t.Errorf("a second Accept under MaxRunning 1: %d jobs, %v", len(more), err)
	}
}

func TestClientPauseAndResume(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	name := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	if _, err := c.Add(ctx, name, "j", nil); err != nil {
		t.Fatal(err)
	}
	ty, err := c.PauseType(ctx, name, 0)
	if err != nil || !ty.Paused || ty.PausedUntil != 0 {
		t.Fatalf("PauseType: %+v, %v", ty, err)
	}
	if jobs, err := c.Accept(ctx, name, kvq.AcceptOptions{Timeout: 200 * time.Millisecond}); err != nil || len(jobs) != 0 {
		t.Errorf("Accept of a paused type: %d jobs, %v", len(jobs), err)
	}
	if ty, err = c.ResumeType(ctx, name); err != nil || ty.Paused {
		t.Fatalf("ResumeType: %+v, %v", ty, err)
	}
	if jobs, err := c.Accept(ctx, name, kvq.AcceptOptions{}); err != nil || len(jobs) != 1 {
		t.Errorf("Accept after resume: %d jobs, %v", len(jobs), err)
	}

	before := time.Now()
	if ty, err = c.PauseType(ctx, name, 300*time.Millisecond); err != nil || !ty.Paused ||
		ty.PausedUntil.Time().Before(before.Add(300*time.Millisecond-time.Second)) {
		t.Fatalf("PauseType for 300 ms: %+v, %v", ty, err)
	}
	if _, err := c.Add(ctx, name, "k", nil); err != nil {
		t.Fatal(err)
	}
	if jobs, err := c.Accept(ctx, name, kvq.AcceptOptions{Timeout: 5 * time.Second}); err != nil || len(jobs) != 1 {
		t.Errorf("Accept across the pause's end: %d jobs, %v", len(jobs), err)
	}
	if _, err := c.PauseType(ctx, uniq("missing"), 0); !kvq.IsNotFound(err) {
		t.Errorf("PauseType of a missing type: %v", err)
	}
	if _, err := c.ResumeType(ctx, uniq("missing")); !kvq.IsNotFound(err) {
		t.Errorf("ResumeType of a missing type: %v", err)
	}
}

func TestClientSchedules(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	name := uniq("sch")
	s, err := c.PutSchedule(ctx, name, kvq.ScheduleConfig{Type: typ, Cron: "0 3 * * *", Timezone: "Europe/Paris",
		Data: map[string]string{"kind": "daily"}, Priority: 2, CatchUp: "none"})
	if err != nil {
		t.Fatal(err)
	}
	if s.Name != name || s.Type != typ || s.Cron != "0 3 * * *" || s.Timezone != "Europe/Paris" ||
		string(s.Data) != `{"kind":"daily"}` || s.Priority != 2 || s.CatchUp != "none" || len(s.NextRuns) != 5 ||
		s.NextRun.Time().Before(time.Now()) || s.LastRun != 0 || s.Enqueued != 0 || s.LastError != "" {
		t.Errorf("PutSchedule: %+v", s)
	}
	got, err := c.GetSchedule(ctx, name)
	if err != nil || got.NextRun != s.NextRun || len(got.NextRuns) != 5 {
		t.Errorf("GetSchedule: %+v, %v", got, err)
	}
	all, err := c.ListSchedules(ctx)
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, x := range all {
		if x.Name == name {
			found = true
			if x.NextRuns != nil || x.Cron != s.Cron {
				t.Errorf("listed: %+v", x)
			}
		}
	}
	if !found {
		t.Errorf("ListSchedules does not list %s", name)
	}
	if s, err = c.PutSchedule(ctx, name, kvq.ScheduleConfig{Type: typ, Cron: "@hourly"}); err != nil ||
		s.Timezone != "UTC" || s.CatchUp != "one" {
		t.Errorf("replaced: %+v, %v", s, err)
	}
	if err := c.DeleteSchedule(ctx, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.GetSchedule(ctx, name); !kvq.IsNotFound(err) {
		t.Errorf("GetSchedule of a deleted schedule: %v", err)
	}
	if err := c.DeleteSchedule(ctx, name); !kvq.IsNotFound(err) {
		t.Errorf("DeleteSchedule again: %v", err)
	}
	if _, err := c.PutSchedule(ctx, uniq("bad"), kvq.ScheduleConfig{Type: typ, Cron: "not a cron"}); !kvq.IsInvalid(err) {
		t.Errorf("a bad cron: %v", err)
	}
	if _, err := c.PutSchedule(ctx, uniq("bad"), kvq.ScheduleConfig{Type: uniq("missing"), Cron: "@daily"}); !kvq.IsNotFound(err) {
		t.Errorf("a schedule of a missing type: %v", err)
	}

	// Every second: it enqueues NAME@TIME jobs.
	every := uniq("every")
	if _, err := c.PutSchedule(ctx, every, kvq.ScheduleConfig{Type: typ, Cron: "* * * * * *", Data: map[string]int{"n": 1}}); err != nil {
		t.Fatal(err)
	}
	defer c.DeleteSchedule(context.Background(), every)
	deadline := time.Now().Add(10 * time.Second)
	for {
		page, err := c.List(ctx, typ, kvq.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Jobs) > 0 {
			if j := page.Jobs[0]; !strings.HasPrefix(j.ID, every+"@") || string(j.Data) != `{"n":1}` {
				t.Errorf("an enqueued job: %+v", j)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the schedule enqueued nothing in 10 s")
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestClientGroupsAddAndRead(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	if _, err := c.Add(ctx, typ, "a", nil, kvq.WithGroup("tenant-42")); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "none", nil); err != nil {
		t.Fatal(err)
	}
	if res, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "b", Group: "tenant-7"}, {ID: "c"}}); err != nil || res.Added != 2 {
		t.Fatalf("AddMany with a group: %+v, %v", res, err)
	}
	for id, want := range map[string]string{"a": "tenant-42", "b": "tenant-7", "c": "", "none": ""} {
		if j, err := c.Get(ctx, typ, id); err != nil || j.Group != want {
			t.Errorf("job %s: group %q, %v; want %q", id, j.Group, err, want)
		}
	}
	if _, err := c.Add(ctx, typ, "bad", nil, kvq.WithGroup(strings.Repeat("x", 129))); !kvq.IsInvalid(err) {
		t.Errorf("a group of 129 bytes: %v", err)
	}
}

func TestClientGroupsMaxRunningPerGroupAndTheirListing(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second, MaxRunningPerGroup: 1})
	if ty, err := c.GetType(ctx, typ); err != nil || ty.MaxRunningPerGroup != 1 {
		t.Fatalf("GetType: %+v, %v", ty, err)
	}
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "a0", Group: "A"}, {ID: "a1", Group: "A"}, {ID: "b0", Group: "B"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{Count: 10})
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, j := range jobs {
		ids = append(ids, j.ID)
	}
	sort.Strings(ids)
	if strings.Join(ids, ",") != "a0,b0" {
		t.Fatalf("Accept under MaxRunningPerGroup 1: %v", ids)
	}
	page, err := c.Groups(ctx, typ, kvq.GroupOptions{})
	if err != nil || len(page.Groups) != 2 || page.NextAfter != "" ||
		page.Groups[0] != (kvq.GroupInfo{Group: "A", Running: 1, Pending: 1, Full: true}) ||
		page.Groups[1] != (kvq.GroupInfo{Group: "B", Running: 1, Full: true}) {
		t.Errorf("Groups: %+v, %v", page, err)
	}
	if page, err := c.Groups(ctx, typ, kvq.GroupOptions{Limit: 1}); err != nil || len(page.Groups) != 1 || page.NextAfter != "A" {
		t.Errorf("a page of one: %+v, %v", page, err)
	}
	if page, err := c.Groups(ctx, typ, kvq.GroupOptions{After: "A"}); err != nil || len(page.Groups) != 1 || page.Groups[0].Group != "B" {
		t.Errorf("after A: %+v, %v", page, err)
	}
	if _, err := c.Groups(ctx, uniq("missing"), kvq.GroupOptions{}); !kvq.IsNotFound(err) {
		t.Errorf("Groups of a missing type: %v", err)
	}
	if ty, err := c.SetType(ctx, typ, kvq.TypeConfig{MaxRunningPerGroup: kvq.NoLimit}); err != nil || ty.MaxRunningPerGroup != 0 {
		t.Errorf("NoLimit clears MaxRunningPerGroup: %+v, %v", ty, err)
	}
}

func TestClientGroupsTakeTurns(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 30 * time.Second})
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "a0", Group: "A"}, {ID: "a1", Group: "A"}, {ID: "a2", Group: "A"},
		{ID: "b0", Group: "B"}}); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{Count: 2})
	if err != nil || len(jobs) != 2 {
		t.Fatalf("Accept: %+v, %v", jobs, err)
	}
	ids := []string{jobs[0].ID, jobs[1].ID}
	sort.Strings(ids)
	if ids[0] != "a0" || ids[1] != "b0" {
		t.Errorf("two accepts' worth took %v; want one of each group", ids)
	}
}
