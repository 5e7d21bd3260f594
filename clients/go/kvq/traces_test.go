// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

const (
	parentTP  = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
	ambientTP = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
)

// headerRecorder is a proxy to the test server that keeps the traceparent header of each request.
type headerRecorder struct {
	mu   sync.Mutex
	seen []string
}

func (h *headerRecorder) start(t *testing.T) string {
	target, _ := url.Parse(serverURL)
	proxy := httputil.NewSingleHostReverseProxy(target)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h.mu.Lock()
		h.seen = append(h.seen, r.Header.Get("traceparent"))
		h.mu.Unlock()
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

type traceKey struct{}

func TestTraceparentFromSendsTheContextsTraceAsTheAddsHeader(t *testing.T) {
	ctx := testCtx(t, 20*time.Second)
	rec := &headerRecorder{}
	c, err := kvq.NewClient(rec.start(t), kvq.WithTraceparentFrom(func(ctx context.Context) string {
		tp, _ := ctx.Value(traceKey{}).(string)
		return tp
	}))
	if err != nil {
		t.Fatal(err)
	}
	typ := newType(t, newClient(t), kvq.TypeConfig{})
	traced := context.WithValue(ctx, traceKey{}, ambientTP)
	if _, err := c.Add(traced, typ, "a", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMany(traced, typ, []kvq.NewJob{{ID: "b"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "untraced", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(traced, typ, "a"); err != nil { // not an add: no header
		t.Fatal(err)
	}
	rec.mu.Lock()
	got := append([]string(nil), rec.seen...)
	rec.mu.Unlock()
	if want := []string{ambientTP, ambientTP, "", ""}; len(got) != len(want) || got[0] != want[0] ||
		got[1] != want[1] || got[2] != want[2] || got[3] != want[3] {
		t.Errorf("traceparent headers %q, want %q", got, want)
	}
}

// span is what a StartSpan hook saw of one run.
type span struct {
	typ, id, traceparent string
	err                  error
	ended                bool
}

func TestStartSpanRunsAroundEachHandlerWithItsOutcome(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{MaxAttempts: 1})
	var mu sync.Mutex
	spans := map[string]*span{}
	w := newWorker(t, c, kvq.WorkerOptions{Burst: true,
		StartSpan: func(ctx context.Context, job *kvq.Job) (context.Context, func(error)) {
			s := &span{typ: job.Type, id: job.ID, traceparent: job.Traceparent}
			mu.Lock()
			spans[job.ID] = s
			mu.Unlock()
			return context.WithValue(ctx, traceKey{}, "span of "+job.ID), func(err error) {
				mu.Lock()
				defer mu.Unlock()
				s.err, s.ended = err, true
			}
		}})
	inHandler := map[string]any{}
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		mu.Lock()
		inHandler[job.ID] = ctx.Value(traceKey{})
		mu.Unlock()
		if job.ID == "bad" {
			return nil, errors.New("bad input")
		}
		return "done", nil
	})
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "ok"}, {ID: "bad"}}); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	ok, bad := spans["ok"], spans["bad"]
	if ok == nil || bad == nil {
		t.Fatalf("spans %v, want one per job", spans)
	}
	if !ok.ended || ok.err != nil || ok.typ != typ || ok.traceparent != "" {
		t.Errorf("the succeeding job's span: %+v", *ok)
	}
	if !bad.ended || bad.err == nil || bad.err.Error() != "bad input" {
		t.Errorf("the failing job's span: %+v, want ended with its error", *bad)
	}
	if inHandler["ok"] != "span of ok" || inHandler["bad"] != "span of bad" {
		t.Errorf("the handlers' contexts carried %v: want the hook's", inHandler)
	}
	if j, err := c.Get(ctx, typ, "bad"); err != nil || j.Outcome != kvq.OutcomeDead {
		t.Errorf("the failing job: %+v, %v", j, err)
	}
}

func TestAnExplicitTraceparentRoundTripsToTheHandler(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 20*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "j", nil, kvq.WithTraceparent(parentTP)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.AddMany(ctx, typ, []kvq.NewJob{{ID: "k", Traceparent: ambientTP}, {ID: "none"}}); err != nil {
		t.Fatal(err)
	}
	if j, err := c.Get(ctx, typ, "j"); err != nil || j.Traceparent != parentTP {
		t.Errorf("Get: %+v, %v; want traceparent %s", j, err, parentTP)
	}
	var mu sync.Mutex
	seen := map[string]string{}
	w := newWorker(t, c, kvq.WorkerOptions{Burst: true,
		StartSpan: func(ctx context.Context, job *kvq.Job) (context.Context, func(error)) {
			mu.Lock()
			seen["span "+job.ID] = job.Traceparent
			mu.Unlock()
			return ctx, func(error) {}
		}})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		mu.Lock()
		seen[job.ID] = job.Traceparent
		mu.Unlock()
		return nil, nil
	})
	if err := w.Run(ctx); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	for id, want := range map[string]string{"j": parentTP, "k": ambientTP, "none": ""} {
		if seen[id] != want || seen["span "+id] != want {
			t.Errorf("job %s: the handler saw %q, the span %q; want %q", id, seen[id], seen["span "+id], want)
		}
	}
}

func TestAnInvalidTraceparentIsRefused(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 10*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "j", nil, kvq.WithTraceparent("00-not-a-trace-01")); !kvq.IsInvalid(err) {
		t.Errorf("an invalid traceparent: %v, want 400 invalid_argument", err)
	}
	if _, err := c.Get(ctx, typ, "j"); !kvq.IsNotFound(err) {
		t.Errorf("the refused job: %v, want none", err)
	}
}
