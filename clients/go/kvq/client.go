// SPDX-License-Identifier: Apache-2.0

package kvq

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Client talks to one kvq server (or to any of several sharing a store: they are
// interchangeable). It is safe for concurrent use; make one and share it.
//
// Every call takes a context.Context, which bounds the whole call including its retries.
// A call answered 503 (`unavailable`: the store is busy or unreachable) or that fails in the
// network is retried with jittered exponential backoff for up to the client's retry time
// (WithRetryTime, default 30 s); an answer the server gave otherwise is returned as an
// *APIError.
type Client struct {
	base      string // scheme://host[:port][/prefix], no trailing slash
	hc        *http.Client
	token     string
	retryTime time.Duration
	// traceparentFrom, when set, gives an add's `traceparent` header (WithTraceparentFrom).
	traceparentFrom func(ctx context.Context) string
}

// Option configures a Client made by NewClient.
type Option func(*Client)

// WithToken sends `Authorization: Bearer token` on every request, for a server started with
// --token or KVQ_TOKEN.
func WithToken(token string) Option { return func(c *Client) { c.token = token } }

// WithHTTPClient makes the client send its requests through hc (for TLS settings, a proxy or a
// custom transport). hc should have no Timeout shorter than the long polls it will carry
// (accept and wait hold a request open for up to their timeout); contexts bound calls instead.
func WithHTTPClient(hc *http.Client) Option { return func(c *Client) { c.hc = hc } }

// WithRetryTime sets how long a call keeps retrying 503 answers and network errors before it
// returns the last of them (default 30 s); 0 turns retries off. The call's context still
// bounds it.
func WithRetryTime(d time.Duration) Option { return func(c *Client) { c.retryTime = d } }

// NewClient returns a client of the server at baseURL, such as "http://127.0.0.1:7411".
// It fails only on a URL that is not http:// or https:// with a host.
func NewClient(baseURL string, opts ...Option) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, fmt.Errorf("kvq: bad server URL %q: %w", baseURL, err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, fmt.Errorf("kvq: bad server URL %q: want http://host:port or https://host:port", baseURL)
	}
	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = 64
	c := &Client{
		base:      strings.TrimRight(u.Scheme+"://"+u.Host+u.EscapedPath(), "/"),
		hc:        &http.Client{Transport: transport},
		retryTime: 30 * time.Second,
	}
	for _, opt := range opts {
		opt(c)
	}
	return c, nil
}

// URL returns the server's base URL, as given to NewClient (without a trailing slash).
func (c *Client) URL() string { return c.base }

// APIError is an error answer of the server: its HTTP status, its error code (`not_found`,
// `halted`, `invalid_argument`, ...; docs/http-api.md lists them) and its message.
type APIError struct {
	Status  int
	Code    string
	Message string
}

// Error renders the error as "kvq: STATUS CODE: MESSAGE".
func (e *APIError) Error() string {
	return fmt.Sprintf("kvq: %d %s: %s", e.Status, e.Code, e.Message)
}

// ErrorCode returns the code of the *APIError in err's chain, or "" if there is none.
func ErrorCode(err error) string {
	var e *APIError
	if errors.As(err, &e) {
		return e.Code
	}
	return ""
}

// IsHalted reports whether err is a 409 `halted`: the caller no longer holds the job (it was
// removed, cancelled, re-enqueued after a lost run, or its worker was declared dead) or the
// worker registration. Stop working on it.
func IsHalted(err error) bool { return ErrorCode(err) == "halted" }

// IsNotFound reports whether err is a 404 `not_found`: the job or type does not exist.
func IsNotFound(err error) bool { return ErrorCode(err) == "not_found" }

// IsWrongState reports whether err is a 409 `wrong_state`: cancel of a finished job, rerun of
// one that is not finished.
func IsWrongState(err error) bool { return ErrorCode(err) == "wrong_state" }

// IsAlreadyExists reports whether err is a 409 `already_exists`: a worker id registered and
// alive elsewhere.
func IsAlreadyExists(err error) bool { return ErrorCode(err) == "already_exists" }

// IsInvalid reports whether err is a 400 answer (`invalid_argument`, `unknown_field`,
// `malformed_json`): the request is wrong and retrying it will not help.
func IsInvalid(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusBadRequest
}

// IsUnavailable reports whether err is a 503 (`unavailable` or `resource_exhausted`) that
// outlasted the client's retries.
func IsUnavailable(err error) bool {
	var e *APIError
	return errors.As(err, &e) && e.Status == http.StatusServiceUnavailable
}

// errorBody is the server's error answer.
type errorBody struct {
	Error   string `json:"error"`
	Message string `json:"message"`
}

// request is one call: what do sends.
type request struct {
	method string
	path   string     // already escaped, starting with /
	query  url.Values // may be nil
	body   any        // marshalled as JSON when not nil
	// The body of every retry, when not nil: a finish with "next" is retried without it, so
	// that a retry after a lost answer never takes a second job (the first attempt may have
	// taken one; it is then lost to this worker and runs again after its timeout).
	retryBody any
	header    map[string]string // more request headers
}

// do sends r, retrying 503 and network errors, and decodes a 2xx JSON answer into out (when
// out is not nil and the answer has a body). It returns the status of the final answer.
func (c *Client) do(ctx context.Context, r request, out any) (int, error) {
	resp, err := c.send(ctx, r)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		return resp.StatusCode, fmt.Errorf("kvq: %s %s: reading the answer: %w", r.method, r.path, err)
	}
	if out != nil && len(data) > 0 && resp.StatusCode != http.StatusNoContent {
		if err := json.Unmarshal(data, out); err != nil {
			return resp.StatusCode, fmt.Errorf("kvq: %s %s: bad answer: %w", r.method, r.path, err)
		}
	}
	return resp.StatusCode, nil
}

// send sends r until it gets an answer that is not to be retried, and returns it unread when
// it is a success (2xx); otherwise it returns the error (an *APIError for an answer).
func (c *Client) send(ctx context.Context, r request) (*http.Response, error) {
	var payload []byte
	if r.body != nil {
		var err error
		if payload, err = json.Marshal(r.body); err != nil {
			return nil, fmt.Errorf("kvq: %s %s: cannot encode the body: %w", r.method, r.path, err)
		}
	}
	target := c.base + r.path
	if len(r.query) > 0 {
		target += "?" + r.query.Encode()
	}
	giveUp := time.Now().Add(c.retryTime)
	for attempt := 0; ; attempt++ {
		if attempt == 1 && r.retryBody != nil {
			var err error
			if payload, err = json.Marshal(r.retryBody); err != nil {
				return nil, fmt.Errorf("kvq: %s %s: cannot encode the body: %w", r.method, r.path, err)
			}
		}
		req, err := http.NewRequestWithContext(ctx, r.method, target, bytes.NewReader(payload))
		if err != nil {
			return nil, fmt.Errorf("kvq: %s %s: %w", r.method, r.path, err)
		}
		if payload != nil {
			req.Header.Set("Content-Type", "application/json")
		}
		if c.token != "" {
			req.Header.Set("Authorization", "Bearer "+c.token)
		}
		for k, v := range r.header {
			req.Header.Set(k, v)
		}
		resp, err := c.hc.Do(req)
		var failure error
		var retryAfter time.Duration
		if err != nil {
			if ctx.Err() != nil {
				return nil, ctx.Err()
			}
			failure = fmt.Errorf("kvq: %s %s: %w", r.method, r.path, err)
		} else if resp.StatusCode < 300 {
			return resp, nil
		} else {
			apiErr := readAPIError(resp)
			if resp.StatusCode != http.StatusServiceUnavailable || apiErr.Code == "resource_exhausted" {
				return nil, apiErr
			}
			failure = apiErr
			if s, err := strconv.Atoi(resp.Header.Get("Retry-After")); err == nil && s > 0 {
				retryAfter = time.Duration(s) * time.Second
			}
		}
		delay := backoff(attempt, 50*time.Millisecond, 2*time.Second)
		if retryAfter > delay {
			delay = retryAfter
		}
		if time.Now().Add(delay).After(giveUp) {
			return nil, failure
		}
		if err := sleep(ctx, delay); err != nil {
			return nil, err
		}
	}
}

// readAPIError reads and closes an error answer.
func readAPIError(resp *http.Response) *APIError {
	defer resp.Body.Close()
	data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	e := &APIError{Status: resp.StatusCode}
	var body errorBody
	if json.Unmarshal(data, &body) == nil && body.Error != "" {
		e.Code, e.Message = body.Error, body.Message
	} else {
		e.Code = strings.ToLower(strings.ReplaceAll(http.StatusText(resp.StatusCode), " ", "_"))
		e.Message = strings.TrimSpace(string(data))
	}
	return e
}

var (
	jitterMu sync.Mutex
	jitter   = rand.New(rand.NewSource(time.Now().UnixNano()))
)

// backoff returns the delay before retry `attempt` (0-based): first ~base, doubling up to
// ceiling, drawn uniformly from [d/2, d].
func backoff(attempt int, base, ceiling time.Duration) time.Duration {
	d := base
	for i := 0; i < attempt && d < ceiling; i++ {
		d *= 2
	}
	if d > ceiling {
		d = ceiling
	}
	jitterMu.Lock()
	defer jitterMu.Unlock()
	return d/2 + time.Duration(jitter.Int63n(int64(d/2)+1))
}

// sleep waits d or until ctx is done, whichever is first; it returns ctx's error in the latter
// case.
func sleep(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// seg escapes one path segment (a type, an id or a worker id).
func seg(s string) string { return url.PathEscape(s) }

// seconds renders a duration as the server's fractional seconds.
func seconds(d time.Duration) float64 { return d.Seconds() }

// fromSeconds turns the server's fractional seconds into a duration.
func fromSeconds(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
