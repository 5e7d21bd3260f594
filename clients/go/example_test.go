package kvq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	kvq "github.com/kvq/kvq/clients/go"
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

// Inline runs the same handlers in a unit test, without a server.
func ExampleInline() {
	ctx := context.Background()
	in := kvq.NewInline()
	in.Handle("email", func(ctx context.Context, job *kvq.Job) (any, error) {
		return "sent", nil
	})
	_, _ = in.Add(ctx, "email", "welcome-42", nil)
	result, err := in.Result(ctx, "email", "welcome-42")
	fmt.Println(string(result), err)
	// Output: "sent" <nil>
}
