// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"encoding/json"
	"net/url"
	"strconv"
	"time"
)

// TypeConfig is what SetType sets on a job type. A zero field leaves that setting as it is
// (for a new type: the server's default), so a TypeConfig with only MaxAttempts changes only
// that. Timeout is required to create a type.
type TypeConfig struct {
	// Timeout is how long a worker may go without a heartbeat (update) before its run is lost.
	Timeout time.Duration
	// FinishedRetention, when positive, removes finished jobs that long after they finished.
	FinishedRetention time.Duration
	// MaxLostRuns, when positive, ends a job dead once that many of its runs were lost in a row.
	MaxLostRuns int
	// MaxAttempts is the number of attempts before a failing job ends dead (server default 25).
	MaxAttempts int
	// Backoff is the delay between failed attempts; nil leaves it as it is.
	Backoff *BackoffConfig
	// MaxRunning, when positive, lets at most that many of the type's jobs run at once across
	// every server (1..1,000,000); NoLimit clears it.
	MaxRunning int
	// Rate, when not nil, sets the most accepts per window (RateLimit); a RateLimit with Limit
	// 0 clears it.
	Rate *RateLimit
	// MaxRunningPerGroup, when positive, lets at most that many jobs of any one group
	// (WithGroup) run at once; NoLimit clears it. Jobs without a group are not limited by it.
	MaxRunningPerGroup int
}

// NoLimit, as TypeConfig.MaxRunning or MaxRunningPerGroup, clears that limit.
const NoLimit = -1

// RateLimit is at most Limit accepts (1..1,000) of a type in any window of Period (1 ms to a
// day, whole milliseconds), across every server.
type RateLimit struct {
	Limit  int
	Period time.Duration
}

// BackoffConfig is a type's retry delay: after the n-th failure, min(Cap, Base·Factor^(n−1)),
// drawn from [d·(1−Jitter), d]. A zero field leaves that setting as it is (server defaults:
// 1 s, 2, 1 h, 0.2).
type BackoffConfig struct {
	Base   time.Duration
	Factor float64
	Cap    time.Duration
	Jitter float64
}

// Type is a job type as the server reports it.
type Type struct {
	Name    string
	Timeout time.Duration
	// FinishedRetention is 0 when finished jobs are kept until removed.
	FinishedRetention time.Duration
	// MaxLostRuns is 0 when lost runs in a row have no limit (each still counts as an attempt).
	MaxLostRuns int
	MaxAttempts int
	Backoff     BackoffConfig
	// Paused is true while accepts of the type get nothing (PauseType); PausedUntil is when a
	// pause given a duration ends by itself (0 otherwise).
	Paused      bool
	PausedUntil Millis
	// MaxRunning is 0 when the type has no limit of running jobs.
	MaxRunning int
	// Rate is nil when the type has no rate limit.
	Rate *RateLimit
	// MaxRunningPerGroup is 0 when a group's running jobs are not limited.
	MaxRunningPerGroup int
}

type typeJSON struct {
	Type              string   `json:"type"`
	Timeout           float64  `json:"timeout"`
	FinishedRetention *float64 `json:"finished_retention"`
	MaxLostRuns       *int     `json:"max_lost_runs"`
	MaxAttempts       int      `json:"max_attempts"`
	Backoff           struct {
		Base   float64 `json:"base"`
		Factor float64 `json:"factor"`
		Cap    float64 `json:"cap"`
		Jitter float64 `json:"jitter"`
	} `json:"backoff"`
	Paused      bool    `json:"paused"`
	PausedUntil *Millis `json:"paused_until"`
	MaxRunning  *int    `json:"max_running"`
	Rate        *struct {
		Limit    int   `json:"limit"`
		PeriodMS int64 `json:"period_ms"`
	} `json:"rate"`
	MaxRunningPerGroup *int `json:"max_running_per_group"`
}

func (t typeJSON) toType() *Type {
	out := &Type{
		Name:        t.Type,
		Timeout:     fromSeconds(t.Timeout),
		MaxAttempts: t.MaxAttempts,
		Backoff: BackoffConfig{
			Base:   fromSeconds(t.Backoff.Base),
			Factor: t.Backoff.Factor,
			Cap:    fromSeconds(t.Backoff.Cap),
			Jitter: t.Backoff.Jitter,
		},
	}
	if t.FinishedRetention != nil {
		out.FinishedRetention = fromSeconds(*t.FinishedRetention)
	}
	if t.MaxLostRuns != nil {
		out.MaxLostRuns = *t.MaxLostRuns
	}
	out.Paused = t.Paused
	if t.PausedUntil != nil {
		out.PausedUntil = *t.PausedUntil
	}
	if t.MaxRunning != nil {
		out.MaxRunning = *t.MaxRunning
	}
	if t.Rate != nil {
		out.Rate = &RateLimit{Limit: t.Rate.Limit, Period: time.Duration(t.Rate.PeriodMS) * time.Millisecond}
	}
	if t.MaxRunningPerGroup != nil {
		out.MaxRunningPerGroup = *t.MaxRunningPerGroup
	}
	return out
}

func limitJSON(n int) any {
	if n == NoLimit {
		return nil
	}
	return n
}

// SetType creates the job type name or changes its settings (PUT /v1/types/{type}) and
// returns it as it now is. A type must exist, with a timeout, before jobs are added to it.
func (c *Client) SetType(ctx context.Context, name string, cfg TypeConfig) (*Type, error) {
	body := map[string]any{}
	if cfg.Timeout > 0 {
		body["timeout"] = seconds(cfg.Timeout)
	}
	if cfg.FinishedRetention > 0 {
		body["finished_retention"] = seconds(cfg.FinishedRetention)
	}
	if cfg.MaxLostRuns > 0 {
		body["max_lost_runs"] = cfg.MaxLostRuns
	}
	if cfg.MaxAttempts > 0 {
		body["max_attempts"] = cfg.MaxAttempts
	}
	if b := cfg.Backoff; b != nil {
		backoff := map[string]any{}
		if b.Base > 0 {
			backoff["base"] = seconds(b.Base)
		}
		if b.Factor > 0 {
			backoff["factor"] = b.Factor
		}
		if b.Cap > 0 {
			backoff["cap"] = seconds(b.Cap)
		}
		if b.Jitter > 0 {
			backoff["jitter"] = b.Jitter
		}
		body["backoff"] = backoff
	}
	if cfg.MaxRunning != 0 {
		body["max_running"] = limitJSON(cfg.MaxRunning)
	}
	if cfg.MaxRunningPerGroup != 0 {
		body["max_running_per_group"] = limitJSON(cfg.MaxRunningPerGroup)
	}
	if r := cfg.Rate; r != nil {
		if r.Limit == 0 {
			body["rate"] = nil
		} else {
			body["rate"] = map[string]any{"limit": r.Limit, "period_ms": r.Period.Milliseconds()}
		}
	}
	var t typeJSON
	if _, err := c.do(ctx, request{method: "PUT", path: "/v1/types/" + seg(name), body: body}, &t); err != nil {
		return nil, err
	}
	return t.toType(), nil
}

// GetType returns the job type name; an *APIError `not_found` (IsNotFound) if it does not exist.
func (c *Client) GetType(ctx context.Context, name string) (*Type, error) {
	var t typeJSON
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/types/" + seg(name)}, &t); err != nil {
		return nil, err
	}
	return t.toType(), nil
}

// ListTypes returns every job type.
func (c *Client) ListTypes(ctx context.Context) ([]*Type, error) {
	var out struct {
		Types []typeJSON `json:"types"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/types"}, &out); err != nil {
		return nil, err
	}
	types := make([]*Type, 0, len(out.Types))
	for _, t := range out.Types {
		types = append(types, t.toType())
	}
	return types, nil
}

// DeleteType deletes the job type name. It fails with 409 `type_has_jobs` while the type has
// any job: RemoveAll them first.
func (c *Client) DeleteType(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: "DELETE", path: "/v1/types/" + seg(name)}, nil)
	return err
}

// RemoveAll removes every job of the type, in any state, and returns how many it removed.
// It is not atomic: after an error, the jobs already removed stay removed; call it again.
func (c *Client) RemoveAll(ctx context.Context, typ string) (int, error) {
	var out struct {
		Removed int `json:"removed"`
	}
	_, err := c.do(ctx, request{method: "DELETE", path: "/v1/types/" + seg(typ) + "/jobs"}, &out)
	return out.Removed, err
}

// RerunAll reruns every job of the type that ended with outcome (OutcomeDead, or
// OutcomeCancelled) and returns how many it reran.
func (c *Client) RerunAll(ctx context.Context, typ string, outcome string) (int, error) {
	body := map[string]any{}
	if outcome != "" {
		body["outcome"] = outcome
	}
	var out struct {
		Rerun int `json:"rerun"`
	}
	_, err := c.do(ctx, request{method: "POST", path: "/v1/types/" + seg(typ) + "/rerun", body: body}, &out)
	return out.Rerun, err
}

// PauseType pauses the type: its accepts get nothing (waiting long-polls included) until
// ResumeType, or for d when d > 0 (Type.PausedUntil). Adds are still taken, and running jobs go
// on. It returns the type as it now is; 404 `not_found` if it does not exist.
//
//	t, err := c.PauseType(ctx, "email", time.Minute) // 0: until resumed
func (c *Client) PauseType(ctx context.Context, typ string, d time.Duration) (*Type, error) {
	body := map[string]any{}
	if d > 0 {
		ms := d.Milliseconds()
		if ms < 1 {
			ms = 1
		}
		body["for_ms"] = ms
	}
	var t typeJSON
	if _, err := c.do(ctx, request{method: "POST", path: "/v1/types/" + seg(typ) + "/pause", body: body}, &t); err != nil {
		return nil, err
	}
	return t.toType(), nil
}

// ResumeType ends the type's pause (nothing if it is not paused): waiting accepts get its jobs
// at once. It returns the type as it now is.
func (c *Client) ResumeType(ctx context.Context, typ string) (*Type, error) {
	var t typeJSON
	if _, err := c.do(ctx, request{method: "POST", path: "/v1/types/" + seg(typ) + "/resume"}, &t); err != nil {
		return nil, err
	}
	return t.toType(), nil
}

// GroupInfo is one group of a type (jobs added WithGroup), as Groups lists it.
type GroupInfo struct {
	Group string `json:"group"`
	// Running and Pending count its running and pending (due or not) jobs.
	Running int   `json:"running"`
	Pending int64 `json:"pending"`
	// Full is true while it holds the type's MaxRunningPerGroup running jobs.
	Full bool `json:"full"`
	// InTurnAt is when it is next in turn while it has pending jobs and is not full, else 0.
	InTurnAt Millis `json:"in_turn_at"`
}

// GroupOptions selects a page of Groups.
type GroupOptions struct {
	// Limit is the page size (server default 100, at most 1,000).
	Limit int
	// After starts the page after this group (exclusive): the previous page's NextAfter.
	After string
}

// GroupPage is one page of Groups.
type GroupPage struct {
	Groups []GroupInfo `json:"groups"`
	// NextAfter is "" on the last page; otherwise pass it as GroupOptions.After.
	NextAfter string `json:"next_after"`
}

// Groups returns a page of the type's groups that have pending or running jobs, by name; 404
// `not_found` if the type does not exist.
//
//	page, err := c.Groups(ctx, "report", kvq.GroupOptions{Limit: 50})
//	for _, g := range page.Groups { fmt.Println(g.Group, g.Running, g.Pending, g.Full) }
func (c *Client) Groups(ctx context.Context, typ string, o GroupOptions) (*GroupPage, error) {
	q := url.Values{}
	if o.Limit > 0 {
		q.Set("limit", strconv.Itoa(o.Limit))
	}
	if o.After != "" {
		q.Set("after", o.After)
	}
	var out struct {
		Groups    []GroupInfo `json:"groups"`
		NextAfter *string     `json:"next_after"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/types/" + seg(typ) + "/groups", query: q}, &out); err != nil {
		return nil, err
	}
	page := &GroupPage{Groups: out.Groups}
	if out.NextAfter != nil {
		page.NextAfter = *out.NextAfter
	} else if n := len(out.Groups); n > 0 && n == pageSize(o.Limit) {
		// A server that does not say where the next page starts: a full page may have one.
		page.NextAfter = out.Groups[n-1].Group
	}
	return page, nil
}

func pageSize(limit int) int {
	if limit > 0 {
		return limit
	}
	return 100
}

// Pending counts the type's due pending jobs (up to 100,000).
func (c *Client) Pending(ctx context.Context, typ string) (int, error) {
	var out struct {
		Pending int `json:"pending"`
	}
	_, err := c.do(ctx, request{method: "GET", path: "/v1/types/" + seg(typ) + "/pending"}, &out)
	return out.Pending, err
}

// rawOrNull returns v's JSON, or nil for JSON null, so a RawMessage field is empty exactly
// when the server sent null.
func rawOrNull(v json.RawMessage) json.RawMessage {
	if len(v) == 0 || string(v) == "null" {
		return nil
	}
	return v
}
