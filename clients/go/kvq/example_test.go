// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// A producer adds a job and awaits its result.
func ExampleClient() {
	ctx := context.Background()
	c, err := kvq.NewClient("http://127.0.0.1:7411")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := c.SetType(ctx, "email", kvq.TypeConfig{Timeout: 30 * time.Second, MaxAttempts: 5}); err != nil {
		log.Fatal(err)
	}
	if _, err := c.Add(ctx, "email", "welcome-42", map[string]string{"to": "ada@example.com"}); err != nil {
		log.Fatal(err)
	}
	result, err := c.Result(ctx, "email", "welcome-42")
	fmt.Println(string(result), err)
}

// A worker serves one type with eight handlers at once until SIGTERM.
func ExampleWorker() {
	c, err := kvq.NewClient("http://127.0.0.1:7411")
	if err != nil {
		log.Fatal(err)
	}
	w := kvq.NewWorker(c, kvq.WorkerOptions{Concurrency: 8})
	w.Handle("email", func(ctx context.Context, job *kvq.Job) (any, error) {
		var in struct{ To string }
		if err := job.Decode(&in); err != nil {
			return nil, kvq.NoRetry(err) // bad input: retrying will not help
		}
		return map[string]string{"sent_to": in.To}, nil
	})
	if err := kvq.RunWithSignals(w); err != nil {
		log.Fatal(err)
	}
}

// Inline runs the same handlers in a unit test, on a kvq server of its own (kvq serve
// --ephemeral: the binary from $KVQ_BIN, else kvq on $PATH).
func ExampleInline() {
	ctx := context.Background()
	in, err := kvq.NewInline(ctx, kvq.InlineOptions{})
	if err != nil {
		log.Fatal(err)
	}
	defer in.Close()
	in.Handle("email", func(ctx context.Context, job *kvq.Job) (any, error) {
		return "sent", nil
	})
	_, _ = in.SetType(ctx, "email", kvq.TypeConfig{Timeout: 30 * time.Second})
	_, _ = in.Add(ctx, "email", "welcome-42", nil)
	result, err := in.Result(ctx, "email", "welcome-42") // runs the handler until the job ends
	fmt.Println(string(result), err)
	// Output: "sent" <nil>
}

// Schedules, a pause and a group, on a server.
func ExampleClient_PutSchedule() {
	ctx := context.Background()
	c, _ := kvq.NewClient("http://127.0.0.1:7411")
	_, _ = c.PutSchedule(ctx, "nightly-report", kvq.ScheduleConfig{Type: "report", Cron: "0 3 * * *",
		Timezone: "Europe/Paris", Data: map[string]string{"kind": "daily"}})
	_, _ = c.PauseType(ctx, "report", time.Hour) // nothing handed out for an hour
	_, _ = c.SetType(ctx, "report", kvq.TypeConfig{MaxRunningPerGroup: 1})
	_, _ = c.Add(ctx, "report", "r-1", nil, kvq.WithGroup("tenant-42"))
}
