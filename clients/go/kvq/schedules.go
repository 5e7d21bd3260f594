// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"context"
	"encoding/json"
)

// ScheduleConfig is what PutSchedule sets: a job of Type added at every time Cron names.
type ScheduleConfig struct {
	// Type is the jobs' type; it must exist.
	Type string
	// Cron is five crontab fields (minute hour day-of-month month day-of-week), six with a
	// seconds field first, or @yearly, @monthly, @weekly, @daily, @hourly.
	Cron string
	// Timezone is an IANA zone the cron's times are wall times in ("" for UTC).
	Timezone string
	// Data is each job's data: anything encoding/json renders as an object (nil for {}).
	Data any
	// Priority is each job's priority (default 0).
	Priority int64
	// CatchUp says what becomes of occurrences found late: "one" ("" is the server's default,
	// one), "all" or "none".
	CatchUp string
}

// Schedule is a schedule as the server reports it. Times are 0 where the server has null.
type Schedule struct {
	Name     string          `json:"name"`
	Type     string          `json:"type"`
	Cron     string          `json:"cron"`
	Timezone string          `json:"timezone"`
	Data     json.RawMessage `json:"data"`
	Priority int64           `json:"priority"`
	CatchUp  string          `json:"catch_up"`
	// NextRun is the next occurrence to enqueue (0 once the cron names no later time).
	NextRun Millis `json:"next_run"`
	// LastRun and LastJobID are the latest occurrence enqueued and its job's id.
	LastRun   Millis `json:"last_run"`
	LastJobID string `json:"last_job_id"`
	// Enqueued and Skipped count the occurrences enqueued, and those left out (catch-up, or an
	// add that failed: LastError says why).
	Enqueued  int64  `json:"enqueued"`
	Skipped   int64  `json:"skipped"`
	LastError string `json:"last_error"`
	CreatedAt Millis `json:"created_at"`
	UpdatedAt Millis `json:"updated_at"`
	// NextRuns previews the next five times after now that the cron names (GetSchedule and
	// PutSchedule only; nil in ListSchedules).
	NextRuns []Millis `json:"next_runs"`
}

func schedulePath(name string) string { return "/v1/schedules/" + seg(name) }

// PutSchedule creates or replaces the schedule name (1..128 bytes of A-Z a-z 0-9 _ . : -) and
// returns it. Every server enqueues each occurrence once, as the job NAME@YYYY-MM-DDTHH:MM:SSZ
// (the time in UTC). A 400 (IsInvalid) names a bad cron, timezone or catch-up; 404
// `not_found` if the type does not exist.
//
//	s, err := c.PutSchedule(ctx, "nightly-report", kvq.ScheduleConfig{
//		Type: "report", Cron: "0 3 * * *", Timezone: "Europe/Paris", Data: map[string]any{"kind": "daily"}})
func (c *Client) PutSchedule(ctx context.Context, name string, cfg ScheduleConfig) (*Schedule, error) {
	body := map[string]any{"type": cfg.Type, "cron": cfg.Cron}
	if cfg.Timezone != "" {
		body["timezone"] = cfg.Timezone
	}
	if cfg.Data != nil {
		body["data"] = cfg.Data
	}
	if cfg.Priority != 0 {
		body["priority"] = cfg.Priority
	}
	if cfg.CatchUp != "" {
		body["catch_up"] = cfg.CatchUp
	}
	s := &Schedule{}
	if _, err := c.do(ctx, request{method: "PUT", path: schedulePath(name), body: body}, s); err != nil {
		return nil, err
	}
	s.Data = rawOrNull(s.Data)
	return s, nil
}

// GetSchedule returns the schedule name, with NextRuns; 404 `not_found` if there is none.
func (c *Client) GetSchedule(ctx context.Context, name string) (*Schedule, error) {
	s := &Schedule{}
	if _, err := c.do(ctx, request{method: "GET", path: schedulePath(name)}, s); err != nil {
		return nil, err
	}
	s.Data = rawOrNull(s.Data)
	return s, nil
}

// ListSchedules returns every schedule, by name (without NextRuns).
func (c *Client) ListSchedules(ctx context.Context) ([]*Schedule, error) {
	var out struct {
		Schedules []*Schedule `json:"schedules"`
	}
	if _, err := c.do(ctx, request{method: "GET", path: "/v1/schedules"}, &out); err != nil {
		return nil, err
	}
	for _, s := range out.Schedules {
		s.Data = rawOrNull(s.Data)
	}
	return out.Schedules, nil
}

// DeleteSchedule deletes the schedule name; the jobs it enqueued stay. 404 `not_found` if
// there is none.
func (c *Client) DeleteSchedule(ctx context.Context, name string) error {
	_, err := c.do(ctx, request{method: "DELETE", path: schedulePath(name)}, nil)
	return err
}
