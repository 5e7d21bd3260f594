// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// gauge counts handlers running at once and keeps the most it saw.
type gauge struct {
	mu       sync.Mutex
	now, max int
}

func (g *gauge) enter() {
	g.mu.Lock()
	g.now++
	if g.now > g.max {
		g.max = g.now
	}
	g.mu.Unlock()
}

func (g *gauge) leave() {
	g.mu.Lock()
	g.now--
	g.mu.Unlock()
}

func (g *gauge) most() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.max
}

func TestTypeConcurrencyCapsOneTypeWhileOthersUseTheRest(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 60*time.Second)
	slow := newType(t, c, kvq.TypeConfig{})
	fast := newType(t, c, kvq.TypeConfig{})
	var slowRunning, all gauge
	w := newWorker(t, c, kvq.WorkerOptions{Concurrency: 4, TypeConcurrency: map[string]int{slow: 1}, Burst: true})
	w.Handle(slow, func(ctx context.Context, job *kvq.Job) (any, error) {
		slowRunning.enter()
		all.enter()
		defer slowRunning.leave()
		defer all.leave()
		time.Sleep(150 * time.Millisecond)
		return nil, nil
	})
	w.Handle(fast, func(ctx context.Context, job *kvq.Job) (any, error) {
		all.enter()
		defer all.leave()
		time.Sleep(50 * time.Millisecond)
		return nil, nil
	})
	var slowJobs, fastJobs []kvq.NewJob
	for i := 0; i < 4; i++ {
		slowJobs = append(slowJobs, kvq.NewJob{ID: uniq("s")})
	}
	for i := 0; i < 12; i++ {
		fastJobs = append(fastJobs, kvq.NewJob{ID: uniq("f")})
	}
	if _, err := c.AddMany(ctx, slow, slowJobs); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMany(ctx, fast, fastJobs); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for typ, want := range map[string]int64{slow: 4, fast: 12} {
		counts, err := c.Counts(ctx, typ)
		if err != nil || counts.Finished != want || counts.Pending != 0 {
			t.Errorf("%s: %+v, %v; want all %d finished", typ, counts, err, want)
		}
	}
	if got := slowRunning.most(); got != 1 {
		t.Errorf("at most %d handlers of the capped type ran at once, want 1", got)
	}
	if got := all.most(); got < 3 || got > 4 {
		t.Errorf("at most %d handlers ran at once, want 3 or 4: the other type uses the free slots", got)
	}
}

func TestTypeConcurrencyOfAllTypesWaitsForAFreeSlot(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 60*time.Second)
	a := newType(t, c, kvq.TypeConfig{})
	b := newType(t, c, kvq.TypeConfig{})
	var ga, gb gauge
	w := newWorker(t, c, kvq.WorkerOptions{Concurrency: 8, TypeConcurrency: map[string]int{a: 2, b: 1}, Burst: true})
	handler := func(g *gauge) kvq.HandlerFunc {
		return func(ctx context.Context, job *kvq.Job) (any, error) {
			g.enter()
			defer g.leave()
			time.Sleep(40 * time.Millisecond)
			return nil, nil
		}
	}
	w.Handle(a, handler(&ga))
	w.Handle(b, handler(&gb))
	for _, typ := range []string{a, b} {
		var jobs []kvq.NewJob
		for i := 0; i < 10; i++ {
			jobs = append(jobs, kvq.NewJob{ID: uniq("j")})
		}
		if _, err := c.AddMany(ctx, typ, jobs); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	for _, typ := range []string{a, b} {
		if counts, err := c.Counts(ctx, typ); err != nil || counts.Finished != 10 {
			t.Errorf("%s: %+v, %v; want 10 finished", typ, counts, err)
		}
	}
	if ga.most() != 2 || gb.most() != 1 {
		t.Errorf("most at once: %d of a (cap 2), %d of b (cap 1)", ga.most(), gb.most())
	}
}

func TestTypeConcurrencyRefusesATypeWithoutHandlerAndACapBelowOne(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 10*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	noop := func(ctx context.Context, job *kvq.Job) (any, error) { return nil, nil }
	for _, tc := range []struct {
		caps map[string]int
		want string
	}{
		{map[string]int{"other": 1}, `TypeConcurrency names "other", which has no handler`},
		{map[string]int{typ: 0}, `TypeConcurrency["` + typ + `"] is 0: it must be at least 1`},
	} {
		w := newWorker(t, c, kvq.WorkerOptions{TypeConcurrency: tc.caps, Burst: true})
		w.Handle(typ, noop)
		if err := w.Run(ctx); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("TypeConcurrency %v: Run = %v, want %q", tc.caps, err, tc.want)
		}
	}
}
