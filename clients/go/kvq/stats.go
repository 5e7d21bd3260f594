// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"fmt"
)

// Counts is how many jobs of a type are in each state, each counted up to 100,000. Pending
// includes Scheduled (pending, not yet due); Finished includes Dead and Cancelled.
type Counts struct {
	Pending   int64 `json:"pending"`
	Scheduled int64 `json:"scheduled"`
	Running   int64 `json:"running"`
	Finished  int64 `json:"finished"`
	Dead      int64 `json:"dead"`
	Cancelled int64 `json:"cancelled"`
}

// TypeStats is one type in Stats: its counts and what this server did with it since it
// started.
type TypeStats struct {
	Type string `json:"type"`
	Counts
	Accepts  int64 `json:"accepts"`
	Finishes int64 `json:"finishes"`
	Paused   bool  `json:"paused"`
}

// WorkerTypeStats is one worker type in Stats: its live workers and membership version.
type WorkerTypeStats struct {
	Type    string `json:"type"`
	Version int64  `json:"version"`
	Workers int    `json:"workers"`
}

// Stats is the answer of GET /v1/stats: the server's clock, its accept and finish counters
// since it started, every type (in name order) and every worker type.
type Stats struct {
	Time        Millis            `json:"time"`
	Accepts     int64             `json:"accepts"`
	Finishes    int64             `json:"finishes"`
	Types       []TypeStats       `json:"types"`
	WorkerTypes []WorkerTypeStats `json:"worker_types"`
}

// Stats reads the server's counters and every type's counts in one read-only call.
func (c *Client) Stats(ctx context.Context) (*Stats, error) {
	out := &Stats{}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/stats"}, out); err != nil {
		return nil, err
	}
	return out, nil
}

// Counts returns how many jobs of typ are in each state (from Stats); an *APIError
// `not_found` (IsNotFound) if the type does not exist.
func (c *Client) Counts(ctx context.Context, typ string) (*Counts, error) {
	s, err := c.Stats(ctx)
	if err != nil {
		return nil, err
	}
	for i := range s.Types {
		if s.Types[i].Type == typ {
			return &s.Types[i].Counts, nil
		}
	}
	return nil, &APIError{Status: 404, Code: "not_found", Message: fmt.Sprintf("type '%s' does not exist", typ)}
}
