// SPDX-License-Identifier: Apache-2.0

package kvq_test

import (
	"testing"
	"time"

	"github.com/kvq/kvq/clients/go/kvq"
)

// The defaults are the three clients' one set (docs/clients.md); the Python and TypeScript
// suites check theirs against the same numbers.
func TestWorkerDefaultsAreTheClientsOneSet(t *testing.T) {
	got := []any{kvq.DefaultConcurrency, kvq.DefaultPollTimeout, kvq.DefaultGrace, kvq.DefaultHealthTimeout}
	want := []any{1, 10 * time.Second, 10 * time.Second, 10 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("defaults %v, want %v", got, want)
			break
		}
	}
}
