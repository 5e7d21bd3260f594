// SPDX-License-Identifier: Apache-2.0

package kvq_test

// The tests run against a real `kvq serve` ($KVQ_BIN, else the tree's release build): TestMain
// starts one with kvq.NewInline that most tests share. Some tests start servers of their own
// (a restart on the same data directory, other flags), and the shutdown tests re-run this
// test binary as a worker process (KVQ_GO_HELPER).

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"log"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

var serverURL string

func TestMain(m *testing.M) {
	if os.Getenv("KVQ_GO_HELPER") != "" {
		os.Exit(helperWorker())
	}
	bin, err := kvqBin()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	os.Setenv("KVQ_BIN", bin) // for the examples, which find it as a user's tests would
	srv, err := kvq.NewInline(context.Background(), kvq.InlineOptions{Bin: bin})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	serverURL = srv.URL()
	code := m.Run()
	if err := srv.Close(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// kvqBin is the server binary: $KVQ_BIN, else the tree's release build.
func kvqBin() (string, error) {
	if bin := os.Getenv("KVQ_BIN"); bin != "" {
		return bin, nil
	}
	bin, _ := filepath.Abs("../../../build/release/src/cli/kvq")
	if _, err := os.Stat(bin); err != nil {
		return "", fmt.Errorf("no kvq binary: set KVQ_BIN to the kvq binary (tried %s)", bin)
	}
	return bin, nil
}

type server struct {
	url     string
	dataDir string
	cmd     *exec.Cmd
	ownDir  bool
	mu      sync.Mutex
	output  strings.Builder
}

var listenRE = regexp.MustCompile(`listening on (https?://\S+)`)

// startServer starts `kvq serve` on listen with dataDir ("" for a new temporary one) and any
// further flags.
func startServer(listen, dataDir string, flags ...string) (*server, error) {
	bin, err := kvqBin()
	if err != nil {
		return nil, err
	}
	s := &server{dataDir: dataDir}
	if dataDir == "" {
		if s.dataDir, err = os.MkdirTemp("", "kvq-go-test-"); err != nil {
			return nil, err
		}
		s.ownDir = true
	}
	args := append([]string{"serve", "--listen", listen, "--data", s.dataDir, "--durability", "nosync"}, flags...)
	s.cmd = exec.Command(bin, args...)
	s.cmd.Env = withoutEnv(os.Environ(), "KVQ_TOKEN")
	stdout, _ := s.cmd.StdoutPipe()
	stderr, _ := s.cmd.StderrPipe()
	if err := s.cmd.Start(); err != nil {
		return nil, fmt.Errorf("cannot start %s: %w", bin, err)
	}
	found := make(chan string, 2)
	pump := func(r io.Reader) {
		sc := bufio.NewScanner(r)
		for sc.Scan() {
			line := sc.Text()
			s.mu.Lock()
			if s.output.Len() < 64<<10 {
				s.output.WriteString(line + "\n")
			}
			s.mu.Unlock()
			if m := listenRE.FindStringSubmatch(line); m != nil {
				found <- strings.TrimRight(m[1], "/")
			}
		}
	}
	go pump(stdout)
	go pump(stderr)
	select {
	case s.url = <-found:
		return s, nil
	case <-time.After(30 * time.Second):
		s.stop()
		return nil, fmt.Errorf("kvq serve did not say where it listens; its output:\n%s", s.out())
	}
}

func (s *server) out() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.output.String()
}

// stop ends the server (SIGTERM, then SIGKILL) and removes its own data directory.
func (s *server) stop() {
	if s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan struct{})
		go func() {
			_ = s.cmd.Wait()
			close(done)
		}()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-done
		}
	}
	if s.ownDir {
		os.RemoveAll(s.dataDir)
	}
}

func withoutEnv(env []string, name string) []string {
	var out []string
	for _, kv := range env {
		if !strings.HasPrefix(kv, name+"=") {
			out = append(out, kv)
		}
	}
	return out
}

var ids int64

// uniq returns a name unique in this run, valid as a type, id or worker id.
func uniq(prefix string) string {
	return fmt.Sprintf("%s-%d-%d", prefix, os.Getpid(), atomic.AddInt64(&ids, 1))
}

func newClient(t *testing.T) *kvq.Client {
	t.Helper()
	c, err := kvq.NewClient(serverURL)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newType makes a fresh job type with cfg (a 30 s timeout unless cfg gives one).
func newType(t *testing.T, c *kvq.Client, cfg kvq.TypeConfig) string {
	t.Helper()
	if cfg.Timeout == 0 {
		cfg.Timeout = 30 * time.Second
	}
	name := uniq("t")
	if _, err := c.SetType(context.Background(), name, cfg); err != nil {
		t.Fatal(err)
	}
	return name
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// logger is where test workers log: nowhere, unless KVQ_GO_VERBOSE is set.
func logger() *log.Logger {
	if os.Getenv("KVQ_GO_VERBOSE") != "" {
		return log.New(os.Stderr, "worker: ", log.Lmicroseconds)
	}
	return log.New(io.Discard, "", 0)
}

// runWorker runs w until the test ends (or the returned stop is called, which waits for Run to
// return and fails the test if Run failed or took longer than limit).
func runWorker(t *testing.T, w *kvq.Worker) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("worker Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Errorf("worker Run did not return 30 s after its context was cancelled")
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// waitJob polls the job until cond holds, failing the test after timeout.
func waitJob(t *testing.T, c *kvq.Client, typ, id string, timeout time.Duration, what string,
	cond func(*kvq.JobInfo) bool) *kvq.JobInfo {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		j, err := c.Get(context.Background(), typ, id)
		if err == nil && cond(j) {
			return j
		}
		if time.Now().After(deadline) {
			t.Fatalf("job %s/%s: timed out after %v waiting for %s; last: %+v (err %v)", typ, id, timeout, what, j, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// freePort returns a local port nothing listens on now.
func freePort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}
