// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

func TestFinishNextTakesTheNextJobThenNone(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	for _, id := range []string{"a", "b"} {
		if _, err := c.Add(ctx, typ, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{Worker: "w1"})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("accept: %v %v", jobs, err)
	}
	first := jobs[0]
	next, err := c.FinishNext(ctx, typ, first.ID, first.Lock, map[string]any{"ok": true},
		kvq.NextOptions{Worker: "w2"})
	if err != nil || next == nil || next.ID == first.ID || next.DataFormat != "json" {
		t.Fatalf("FinishNext: %+v %v", next, err)
	}
	if j, _ := c.Get(ctx, typ, first.ID); j.Outcome != "succeeded" {
		t.Fatalf("the finished job: %+v", j)
	}
	if j, _ := c.Get(ctx, typ, next.ID); j.State != "running" || j.Worker != "w2" {
		t.Fatalf("the next job: %+v", j)
	}
	last, err := c.FinishNext(ctx, typ, next.ID, next.Lock, nil, kvq.NextOptions{})
	if err != nil || last != nil {
		t.Fatalf("FinishNext with nothing due: %+v %v", last, err)
	}
}

func TestFinishNextFencedIsHaltedAndTakesNothing(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, typ, "a", nil); err != nil {
		t.Fatal(err)
	}
	jobs, _ := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if _, err := c.Cancel(ctx, typ, "a"); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "b", nil); err != nil {
		t.Fatal(err)
	}
	if _, err := c.FinishNext(ctx, typ, "a", jobs[0].Lock, nil, kvq.NextOptions{}); !kvq.IsHalted(err) {
		t.Fatalf("a fenced FinishNext: %v, want halted", err)
	}
	if j, _ := c.Get(ctx, typ, "b"); j.State != "pending" {
		t.Fatalf("b: %+v", j)
	}
}

func TestAcceptAnyTakesTheBestPriorityAcrossTypes(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	t1 := newType(t, c, kvq.TypeConfig{})
	t2 := newType(t, c, kvq.TypeConfig{})
	if _, err := c.Add(ctx, t1, "low", nil, kvq.WithPriority(9)); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, t2, "high", nil, kvq.WithPriority(1)); err != nil {
		t.Fatal(err)
	}
	jobs, err := c.AcceptAny(ctx, []string{t1, t2}, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 || jobs[0].Type != t2 || jobs[0].ID != "high" {
		t.Fatalf("AcceptAny: %+v %v", jobs, err)
	}
	jobs, err = c.AcceptAny(ctx, []string{t1, t2}, kvq.AcceptOptions{Timeout: 100 * time.Millisecond})
	if err != nil || len(jobs) != 1 || jobs[0].ID != "low" {
		t.Fatalf("AcceptAny: %+v %v", jobs, err)
	}
	if _, err := c.AcceptAny(ctx, nil, kvq.AcceptOptions{}); err == nil {
		t.Fatal("AcceptAny of no types: no error")
	}
}

func TestBytesBodyAndOwnTimeout(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	raw := []byte("a\x00b\xff")
	if _, err := c.Add(ctx, typ, "bin", nil, kvq.WithBody(raw), kvq.WithTimeout(20*time.Second)); err != nil {
		t.Fatal(err)
	}
	j, err := c.Get(ctx, typ, "bin")
	if err != nil || j.DataFormat != "bytes" || j.Timeout == nil || *j.Timeout != 20 {
		t.Fatalf("get: %+v %v", j, err)
	}
	if got, err := j.Bytes(); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("Bytes: %q %v", got, err)
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("accept: %v %v", jobs, err)
	}
	if got, err := jobs[0].Bytes(); err != nil || !bytes.Equal(got, raw) {
		t.Fatalf("accepted Bytes: %q %v", got, err)
	}
	_, err = c.Add(ctx, typ, "bad", nil, kvq.WithTimeout(8*24*time.Hour))
	if !kvq.IsInvalid(err) || !strings.Contains(err.Error(), "timeout") {
		t.Fatalf("a timeout past 7 days: %v", err)
	}
}

// A busy worker takes each next job with its finish: a few accepts for many jobs.
func TestWorkerSpendsOneRequestPerJobWhileBusy(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 60*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	const n = 30
	jobs := make([]kvq.NewJob, n)
	for i := range jobs {
		jobs[i] = kvq.NewJob{ID: fmt.Sprintf("j%02d", i)}
	}
	if _, err := c.AddMany(ctx, typ, jobs); err != nil {
		t.Fatal(err)
	}
	before := acceptRequests(t)
	var ran int32
	w := newWorker(t, c, kvq.WorkerOptions{NoRegister: true})
	w.Handle(typ, func(ctx context.Context, job *kvq.Job) (any, error) {
		atomic.AddInt32(&ran, 1)
		return nil, nil
	})
	runWorker(t, w)
	for i := range jobs {
		waitJob(t, c, typ, jobs[i].ID, 20*time.Second, "succeeded", func(j *kvq.JobInfo) bool {
			return j.Outcome == "succeeded"
		})
	}
	if got := atomic.LoadInt32(&ran); got != n {
		t.Fatalf("ran %d jobs, want %d", got, n)
	}
	if accepts := acceptRequests(t) - before; accepts >= 8 {
		t.Fatalf("the worker accepted %d times for %d jobs: its finishes do not take the next", accepts, n)
	}
}

// acceptRequests counts the server's POST /v1/accept/{type} requests so far (its /metrics).
func acceptRequests(t *testing.T) int {
	t.Helper()
	text, err := metricsText()
	if err != nil {
		t.Fatal(err)
	}
	total := 0
	for _, line := range strings.Split(text, "\n") {
		if strings.HasPrefix(line, `kvq_http_requests_total{route="/v1/accept/{type}"`) {
			var v float64
			fmt.Sscan(line[strings.LastIndex(line, " ")+1:], &v)
			total += int(v)
		}
	}
	return total
}

func metricsText() (string, error) {
	r, err := http.Get(serverURL + "/metrics")
	if err != nil {
		return "", err
	}
	defer r.Body.Close()
	b, err := io.ReadAll(r.Body)
	return string(b), err
}

// A finish with "next" whose answer is lost is retried without "next": the retry finds the
// finish done and takes no second job. A real fault: a TCP proxy in front of the real server
// passes the first request on, waits for the server to commit, and closes the connection
// without the answer; later connections pass through.
func TestFinishNextRetriedAfterALostAnswerTakesNoSecondJob(t *testing.T) {
	c := newClient(t)
	ctx := testCtx(t, 30*time.Second)
	typ := newType(t, c, kvq.TypeConfig{})
	for _, id := range []string{"a", "b", "c"} {
		if _, err := c.Add(ctx, typ, id, nil); err != nil {
			t.Fatal(err)
		}
	}
	jobs, err := c.Accept(ctx, typ, kvq.AcceptOptions{})
	if err != nil || len(jobs) != 1 {
		t.Fatalf("accept: %v %v", jobs, err)
	}
	proxy := losingProxy(t, strings.TrimPrefix(serverURL, "http://"))
	pc, err := kvq.NewClient("http://" + proxy)
	if err != nil {
		t.Fatal(err)
	}
	next, err := pc.FinishNext(ctx, typ, jobs[0].ID, jobs[0].Lock, nil, kvq.NextOptions{})
	if err != nil || next != nil {
		t.Fatalf("FinishNext through the proxy: %+v %v, want no job and no error", next, err)
	}
	if j, _ := c.Get(ctx, typ, jobs[0].ID); j.Outcome != "succeeded" {
		t.Fatalf("the finished job: %+v", j)
	}
	running := 0
	for _, id := range []string{"a", "b", "c"} {
		if id == jobs[0].ID {
			continue
		}
		if j, _ := c.Get(ctx, typ, id); j.State == "running" {
			running++
		}
	}
	// The lost first attempt took one (it runs again after its timeout); the retry took none.
	if running != 1 {
		t.Fatalf("%d jobs running after the retried FinishNext, want 1 (the lost attempt's)", running)
	}
}

// losingProxy listens on loopback and forwards to target; on its first connection it sends
// the request on, waits 500 ms (the server has answered by then) and closes both sides.
func losingProxy(t *testing.T, target string) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for first := true; ; first = false {
			in, err := ln.Accept()
			if err != nil {
				return
			}
			out, err := net.Dial("tcp", target)
			if err != nil {
				in.Close()
				return
			}
			go io.Copy(out, in)
			if first {
				go func() {
					time.Sleep(500 * time.Millisecond)
					in.Close()
					out.Close()
				}()
				continue
			}
			go func() {
				io.Copy(in, out)
				in.Close()
			}()
		}
	}()
	return ln.Addr().String()
}
