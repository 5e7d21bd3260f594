// SPDX-License-Identifier: Apache-2.0

// Package kvq is the Go client of kvq, a durable background-job system served over HTTP/JSON
// by `kvq serve` (docs/http-api.md in the kvq repository is the contract this package follows).
//
// Import it as "github.com/kvq/kvq/clients/go/kvq" (the module github.com/kvq/kvq/clients/go).
//
// It has three parts:
//
//   - Client: every route of the HTTP API as a method taking a context.Context: job types and
//     their flow control (PauseType, ResumeType, MaxRunning, Rate, MaxRunningPerGroup),
//     schedules (PutSchedule, GetSchedule, ListSchedules, DeleteSchedule), groups (WithGroup,
//     Groups), adding jobs (one or many, with IfExists), reading, listing, waiting for and following
//     jobs, removing, cancelling and rerunning them, awaiting a job's result, and the low-level
//     calls a worker makes (accept, update, finish, fail, snooze, worker registration).
//   - Worker: a runner that does what a correct kvq worker must do — long-poll accept, heartbeats
//     well inside the type's timeout, registration with the workers layer, stopping a handler
//     whose job is fenced, failing with the error, handing jobs back on shutdown and backing off
//     when the server is unavailable — around one handler per job type.
//   - Inline: a kvq server of a unit test's own (`kvq serve --ephemeral`, started by NewInline
//     and stopped by Close) and a Client of it, which also runs the test's handlers (Drain,
//     DrainDue, Result), so a test sees the server's own rules.
//
// A producer:
//
//	c, _ := kvq.NewClient("http://127.0.0.1:7411")
//	_, err := c.SetType(ctx, "email", kvq.TypeConfig{Timeout: 30 * time.Second})
//	_, err = c.Add(ctx, "email", "welcome-42", map[string]any{"to": "ada@example.com"})
//	result, err := c.Result(ctx, "email", "welcome-42")
//
// A worker:
//
//	w := kvq.NewWorker(c, kvq.WorkerOptions{Concurrency: 8})
//	w.Handle("email", func(ctx context.Context, job *kvq.Job) (any, error) {
//		var in struct{ To string }
//		if err := job.Decode(&in); err != nil {
//			return nil, kvq.NoRetry(err)
//		}
//		return map[string]any{"sent": in.To}, send(ctx, in.To)
//	})
//	if err := kvq.RunWithSignals(w); err != nil { // nil after SIGTERM or SIGINT drained it
//		log.Fatal(err)
//	}
//
// Every method is safe for concurrent use by several goroutines unless its comment says
// otherwise.
package kvq
