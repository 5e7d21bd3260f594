// SPDX-License-Identifier: Apache-2.0

package kvq_test

// Shutdown is tested on a real process: this test binary, re-run with KVQ_GO_HELPER=worker,
// is a worker that RunWithSignals; the test sends it SIGTERM.

import (
	"context"
	"errors"
	"log"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// helperWorker is the worker process: it serves $KVQ_TYPE at $KVQ_URL with concurrency 2.
// A job {"sleep_ms": N} sleeps N ms ignoring its context; {"stubborn": true} ignores its
// context for ever; any other job waits for its context.
func helperWorker() int {
	logger := log.New(os.Stderr, "helper worker: ", log.Lmicroseconds)
	c, err := kvq.NewClient(os.Getenv("KVQ_URL"))
	if err != nil {
		logger.Print(err)
		return 1
	}
	grace, _ := time.ParseDuration(os.Getenv("KVQ_GRACE"))
	health, _ := time.ParseDuration(os.Getenv("KVQ_HEALTH_TIMEOUT")) // "" leaves the default
	w := kvq.NewWorker(c, kvq.WorkerOptions{ID: os.Getenv("KVQ_WORKER_ID"),
		WorkerType: os.Getenv("KVQ_WORKER_TYPE"), Concurrency: 2, Grace: grace,
		PollTimeout: 2 * time.Second, HealthTimeout: health, Logger: logger})
	w.Handle(os.Getenv("KVQ_TYPE"), func(ctx context.Context, job *kvq.Job) (any, error) {
		var in struct {
			SleepMS  int  `json:"sleep_ms"`
			Stubborn bool `json:"stubborn"`
		}
		if err := job.Decode(&in); err != nil {
			return nil, err
		}
		switch {
		case in.Stubborn:
			select {}
		case in.SleepMS > 0:
			time.Sleep(time.Duration(in.SleepMS) * time.Millisecond)
			return map[string]int{"slept": in.SleepMS}, nil
		}
		<-ctx.Done()
		return nil, ctx.Err()
	})
	if err := kvq.RunWithSignals(w); err != nil {
		logger.Print(err)
		return 1
	}
	return 0
}

type helper struct {
	cmd      *exec.Cmd
	done     chan struct{}
	err      error
	wtype    string
	workerID string
}

func startHelper(t *testing.T, typ string, grace time.Duration, env ...string) *helper {
	t.Helper()
	h := &helper{wtype: uniq("wt"), workerID: uniq("w"), done: make(chan struct{})}
	h.cmd = exec.Command(os.Args[0], "-test.run=^$")
	h.cmd.Env = append(os.Environ(), "KVQ_GO_HELPER=worker", "KVQ_URL="+serverURL, "KVQ_TYPE="+typ,
		"KVQ_GRACE="+grace.String(), "KVQ_WORKER_TYPE="+h.wtype, "KVQ_WORKER_ID="+h.workerID)
	h.cmd.Env = append(h.cmd.Env, env...)
	if os.Getenv("KVQ_GO_VERBOSE") != "" {
		h.cmd.Stderr = os.Stderr
	}
	if err := h.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		h.err = h.cmd.Wait()
		close(h.done)
	}()
	t.Cleanup(func() {
		select {
		case <-h.done:
		default:
			_ = h.cmd.Process.Kill()
			<-h.done
		}
	})
	return h
}

// exitCode waits up to d for the process and returns its exit status (-1: it did not exit).
func (h *helper) exitCode(d time.Duration) int {
	select {
	case <-h.done:
	case <-time.After(d):
		return -1
	}
	var exit *exec.ExitError
	if errors.As(h.err, &exit) {
		return exit.ExitCode()
	}
	if h.err != nil {
		return -2
	}
	return 0
}

func waitRunning(t *testing.T, c *kvq.Client, typ string, ids ...string) {
	t.Helper()
	for _, id := range ids {
		waitJob(t, c, typ, id, 15*time.Second, "running", func(j *kvq.JobInfo) bool {
			return j.State == kvq.StateRunning
		})
	}
}

func TestSIGTERMDrainsAndHandsJobsBack(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 5 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	if _, err := c.Add(ctx, typ, "quick", map[string]int{"sleep_ms": 700}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Add(ctx, typ, "slow", nil); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, typ, 2*time.Second)
	waitRunning(t, c, typ, "quick", "slow")
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	// Added after the signal: a draining worker must not take it.
	if _, err := c.Add(ctx, typ, "later", nil); err != nil {
		t.Fatal(err)
	}
	began := time.Now()
	if code := h.exitCode(15 * time.Second); code != 0 {
		t.Fatalf("the worker exited with %d after SIGTERM, want 0", code)
	}
	if took := time.Since(began); took < 1500*time.Millisecond || took > 8*time.Second {
		t.Errorf("the drain took %v, want about the 2 s grace", took)
	}
	quick, err := c.Get(ctx, typ, "quick")
	if err != nil {
		t.Fatal(err)
	}
	if quick.Outcome != kvq.OutcomeSucceeded || string(quick.Result) != `{"slept":700}` {
		t.Errorf("a job that ends within the grace: outcome %q result %s, want succeeded", quick.Outcome, quick.Result)
	}
	for _, id := range []string{"slow", "later"} {
		j, err := c.Get(ctx, typ, id)
		if err != nil {
			t.Fatal(err)
		}
		if j.State != kvq.StatePending || j.Attempts != 0 || j.LostRuns != 0 || len(j.Errors) != 0 {
			t.Errorf("job %s after the drain: state %q, attempts %d, lost runs %d, errors %+v; want pending and untouched",
				id, j.State, j.Attempts, j.LostRuns, j.Errors)
		}
	}
	if m, err := c.Workers(ctx, h.wtype); err != nil || len(m.Workers) != 0 {
		t.Errorf("the stopped worker's registration: %+v, %v; want none", m, err)
	}
}

func TestSecondSignalExitsAtOnce(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: 5 * time.Second})
	ctx := testCtx(t, 30*time.Second)
	if _, err := c.Add(ctx, typ, "stubborn", map[string]bool{"stubborn": true}); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, typ, time.Minute)
	waitRunning(t, c, typ, "stubborn")
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := h.exitCode(500 * time.Millisecond); code != -1 {
		t.Fatalf("the worker exited (%d) within its one-minute grace", code)
	}
	if err := h.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if code := h.exitCode(5 * time.Second); code != 2 {
		t.Fatalf("after a second SIGTERM the worker's exit: %d, want 2 within 5 s", code)
	}
}

// A worker killed outright (no drain, no unregister) loses its jobs' runs, but they come back as
// soon as the server declares the registered worker dead: its health timeout (1 s here), not
// the type's activity timeout (a minute).
func TestAKilledWorkersJobsComeBackAfterItsHealthTimeout(t *testing.T) {
	c := newClient(t)
	typ := newType(t, c, kvq.TypeConfig{Timeout: time.Minute})
	ctx := testCtx(t, 30*time.Second)
	if _, err := c.Add(ctx, typ, "orphan", nil); err != nil {
		t.Fatal(err)
	}
	h := startHelper(t, typ, time.Minute, "KVQ_HEALTH_TIMEOUT=1s")
	waitRunning(t, c, typ, "orphan")
	if err := h.cmd.Process.Kill(); err != nil {
		t.Fatal(err)
	}
	// Well inside the type's minute: only the worker's death can bring it back by then.
	j := waitJob(t, c, typ, "orphan", 15*time.Second, "pending again", func(j *kvq.JobInfo) bool {
		return j.State == kvq.StatePending
	})
	if last := j.LastError(); j.LostRuns != 1 || last == nil || last.Kind != "worker_lost" {
		t.Errorf("the job after its worker died: lost_runs %d, last error %+v; want 1 and worker_lost",
			j.LostRuns, last)
	}
	if m, err := c.Workers(ctx, h.wtype); err != nil || len(m.Workers) != 0 {
		t.Errorf("the dead worker's registration: %+v, %v; want none", m, err)
	}
}
