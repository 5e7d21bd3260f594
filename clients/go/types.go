package kvq

import (
	"context"
	"encoding/json"
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
	// MaxLostRuns is 0 when lost runs are re-enqueued for ever.
	MaxLostRuns int
	MaxAttempts int
	Backoff     BackoffConfig
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
	return out
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
