// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"time"
)

// Producer is what code that adds jobs and awaits their results needs: a *Client, or an
// *Inline in that code's unit tests.
type Producer interface {
	Add(ctx context.Context, typ, id string, data any, opts ...AddOption) (bool, error)
	Get(ctx context.Context, typ, id string) (*JobInfo, error)
	Result(ctx context.Context, typ, id string) (json.RawMessage, error)
}

var (
	_ Producer  = (*Client)(nil)
	_ Producer  = (*Inline)(nil)
	_ Registrar = (*Inline)(nil)
)

// InlineOptions configures NewInline. The zero value is ready to use.
type InlineOptions struct {
	// Bin is the kvq binary to run. "" looks for it in $KVQ_BIN, then for `kvq` on $PATH.
	Bin string
	// Args are more flags for `kvq serve` (say "--token", t: then pass WithToken(t) in
	// ClientOptions too). --data, --store and --listen are refused with --ephemeral.
	Args []string
	// ClientOptions configure the Client bound to the server.
	ClientOptions []Option
	// Worker is what the workers of Drain, DrainDue and Result are made with (their Burst is
	// theirs to set). Its Logger defaults to discarding the lines, not to standard error.
	Worker WorkerOptions
	// StartTimeout bounds how long the server may take to say where it listens (default 30 s).
	StartTimeout time.Duration
}

// Inline is a real kvq server of a test's own, and a Client of it: NewInline starts
// `kvq serve --ephemeral` (an LMDB store in a new temporary directory, a free loopback port),
// and Close stops it, which removes that directory. Every Client method works on it as on any
// server, with the server's own rules (retries, backoff, flow control, groups, schedules).
//
// It also takes handlers (Handle, as a Worker does), so a unit test can add jobs and run the
// same handlers its program registers: DrainDue runs the due jobs, Drain waits for the
// scheduled ones too, and Result runs the handlers until the job it awaits has ended. They
// run in a Worker of InlineOptions.Worker, in real time: give a test's types a short
// TypeConfig.Backoff so retries come soon.
//
// (Before 0.2.0 Inline was an in-memory imitation of a server, with a clock of its own. It is
// now the server itself, so a test sees what production will.)
type Inline struct {
	*Client

	cmd     *exec.Cmd
	exited  chan struct{} // closed once the server process has exited
	wopts   WorkerOptions
	output  *tail
	dataDir string

	mu       sync.Mutex
	handlers map[string]HandlerFunc
	types    []string // in Handle order
	closed   bool
}

// The first line `kvq serve --ephemeral` prints (docs/operations.md, A throwaway server).
var inlineListening = regexp.MustCompile(`^kvq serve: listening on (https?://\S+) store lmdb:(\S+)`)

// NewInline starts a kvq server for a test and returns a Client bound to it; Close stops it.
// It fails, naming what it tried, if the binary cannot be found or started, or the server
// does not say where it listens within o.StartTimeout.
func NewInline(ctx context.Context, o InlineOptions) (*Inline, error) {
	bin, err := findKvq(o.Bin)
	if err != nil {
		return nil, err
	}
	if o.StartTimeout <= 0 {
		o.StartTimeout = 30 * time.Second
	}
	if o.Worker.Logger == nil && o.Worker.Log == nil {
		o.Worker.Logger = log.New(io.Discard, "", 0)
	}
	cmd := exec.Command(bin, append([]string{"serve", "--ephemeral"}, o.Args...)...)
	// A token in the test's environment is production's, not this server's.
	cmd.Env = withoutVar(os.Environ(), "KVQ_TOKEN")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return nil, err
	}
	out := &tail{}
	cmd.Stderr = out
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("kvq: inline: cannot start %s: %w", bin, err)
	}
	in := &Inline{cmd: cmd, exited: make(chan struct{}), wopts: o.Worker, output: out,
		handlers: map[string]HandlerFunc{}}
	url := make(chan []string, 1)
	go func() {
		// Read stdout to its end, so the server never blocks writing to it.
		sc := bufio.NewScanner(stdout)
		first := true
		for sc.Scan() {
			line := sc.Text()
			_, _ = out.Write([]byte(line + "\n"))
			if first {
				first = false
				if m := inlineListening.FindStringSubmatch(line); m != nil {
					url <- m[1:]
				}
			}
		}
		_, _ = io.Copy(io.Discard, stdout)
	}()
	go func() {
		_ = cmd.Wait()
		close(in.exited)
	}()
	timer := time.NewTimer(o.StartTimeout)
	defer timer.Stop()
	select {
	case m := <-url:
		in.dataDir = m[1]
		c, err := NewClient(m[0], o.ClientOptions...)
		if err != nil {
			in.stop()
			return nil, err
		}
		in.Client = c
		return in, nil
	case <-in.exited:
		return nil, fmt.Errorf("kvq: inline: %s serve --ephemeral exited (%v) before listening; its output:\n%s",
			bin, cmd.ProcessState, out.String())
	case <-timer.C:
		in.stop()
		return nil, fmt.Errorf("kvq: inline: %s serve --ephemeral did not say where it listens within %v; its output:\n%s",
			bin, o.StartTimeout, out.String())
	case <-ctx.Done():
		in.stop()
		return nil, ctx.Err()
	}
}

// findKvq is the kvq binary: bin if given, else $KVQ_BIN, else `kvq` on $PATH.
func findKvq(bin string) (string, error) {
	from := "InlineOptions.Bin"
	if bin == "" {
		bin, from = os.Getenv("KVQ_BIN"), "$KVQ_BIN"
	}
	if bin == "" {
		found, err := exec.LookPath("kvq")
		if err != nil {
			return "", errors.New("kvq: inline: no kvq binary: set InlineOptions.Bin or $KVQ_BIN, or put kvq on $PATH")
		}
		return found, nil
	}
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("kvq: inline: the kvq binary %s names (%s): %w", from, bin, err)
	}
	return bin, nil
}

func withoutVar(env []string, name string) []string {
	out := env[:0:0]
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

// DataDir is the server's temporary data directory, removed when it stops.
func (in *Inline) DataDir() string { return in.dataDir }

// Close stops the server (SIGTERM; after 10 s, SIGKILL) and waits for it to exit; its data
// directory is gone once it has. It returns an error if the server had to be killed or did
// not exit cleanly. Closing twice is a no-op.
func (in *Inline) Close() error {
	in.mu.Lock()
	if in.closed {
		in.mu.Unlock()
		return nil
	}
	in.closed = true
	in.mu.Unlock()
	return in.stop()
}

func (in *Inline) stop() error {
	select {
	case <-in.exited:
	default:
		_ = in.cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-in.exited:
		case <-time.After(10 * time.Second):
			_ = in.cmd.Process.Kill()
			<-in.exited
			return errors.New("kvq: inline: the server did not stop within 10 s of SIGTERM: killed (its data directory is left)")
		}
	}
	if st := in.cmd.ProcessState; st != nil && !st.Success() {
		return fmt.Errorf("kvq: inline: the server exited with %v; its output:\n%s", st, in.output.String())
	}
	return nil
}

// Handle sets the handler of jobs of type typ, run by Drain, DrainDue and Result.
func (in *Inline) Handle(typ string, h HandlerFunc) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if _, ok := in.handlers[typ]; !ok {
		in.types = append(in.types, typ)
	}
	in.handlers[typ] = h
}

// worker returns a Worker over the handlers, counting the runs it starts in runs.
func (in *Inline) worker(burst bool, runs *int64, mu *sync.Mutex) (*Worker, []string, error) {
	in.mu.Lock()
	defer in.mu.Unlock()
	if len(in.types) == 0 {
		return nil, nil, errors.New("kvq: inline: no handler: call Handle first")
	}
	o := in.wopts
	o.Burst = burst
	w := NewWorker(in.Client, o)
	for _, typ := range in.types {
		h := in.handlers[typ]
		w.Handle(typ, func(ctx context.Context, job *Job) (any, error) {
			mu.Lock()
			*runs++
			mu.Unlock()
			return h(ctx, job)
		})
	}
	return w, append([]string(nil), in.types...), nil
}

// DrainDue runs the handlers on the due jobs of their types, and on those that fall due as it
// runs (a retry with no delay), until none is due and none running (a Worker's Burst). It
// returns the number of runs. Jobs scheduled later are left pending.
func (in *Inline) DrainDue(ctx context.Context) (int, error) {
	n, _, err := in.drainDue(ctx)
	return n, err
}

func (in *Inline) drainDue(ctx context.Context) (int, []string, error) {
	var runs int64
	var mu sync.Mutex
	w, types, err := in.worker(true, &runs, &mu)
	if err != nil {
		return 0, nil, err
	}
	err = w.Run(ctx)
	mu.Lock()
	defer mu.Unlock()
	return int(runs), types, err
}

// Drain runs the handlers until their types have no pending job left, waiting in real time
// for the jobs scheduled later (retries after their backoff, At, After, snoozes) to fall due.
// ctx bounds it: a job scheduled far ahead, or a paused type, keeps it waiting until then. It
// returns the number of runs.
func (in *Inline) Drain(ctx context.Context) (int, error) {
	total := 0
	for {
		n, types, err := in.drainDue(ctx)
		total += n
		if err != nil {
			return total, err
		}
		left := false
		for _, typ := range types {
			c, err := in.Counts(ctx, typ)
			if err != nil {
				return total, err
			}
			left = left || c.Pending > 0 || c.Running > 0
		}
		if !left {
			return total, nil
		}
		if err := sleep(ctx, 20*time.Millisecond); err != nil {
			return total, fmt.Errorf("kvq: inline: Drain: jobs are still pending: %w", err)
		}
	}
}

// Result runs the handlers (a Worker) until the job typ/id ends, then returns what
// Client.Result returns for it.
func (in *Inline) Result(ctx context.Context, typ, id string) (json.RawMessage, error) {
	var runs int64
	var mu sync.Mutex
	w, _, err := in.worker(false, &runs, &mu)
	if err != nil {
		return nil, err
	}
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	ran := make(chan error, 1)
	go func() { ran <- w.Run(wctx) }()
	type answer struct {
		result json.RawMessage
		err    error
	}
	got := make(chan answer, 1)
	go func() {
		r, err := in.Client.Result(wctx, typ, id)
		got <- answer{r, err}
	}()
	select {
	case a := <-got:
		stop()
		<-ran
		return a.result, a.err
	case err := <-ran: // it failed to start (a handler's type does not exist): nothing runs
		stop()
		<-got
		if err == nil {
			err = ctx.Err()
		}
		return nil, err
	}
}

// tail keeps the last 64 KiB written to it: the server's output, for error messages.
type tail struct {
	mu  sync.Mutex
	buf []byte
}

func (t *tail) Write(p []byte) (int, error) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.buf = append(t.buf, p...)
	if over := len(t.buf) - 64<<10; over > 0 {
		t.buf = append(t.buf[:0], t.buf[over:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	t.mu.Lock()
	defer t.mu.Unlock()
	return string(t.buf)
}
