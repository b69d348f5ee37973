package streamworker

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"sync/atomic"
	"time"

	json "github.com/goccy/go-json"
)

// client speaks JSON to the broker and rides out its outages: a request
// that fails in transport or answers 5xx is sent again, unchanged, until it
// gets an answer. That is safe for every call the worker makes: a cycle is
// one transaction guarded by its lease (or, for a flush, by the emits'
// transaction ids), and a repeated pop at worst leaves a lease to expire.
type client struct {
	base  string
	token string
	http  *http.Client
	log   *slog.Logger
	// lastFailure and lastAnswer are when the broker last failed to
	// answer, and last answered (unix nanoseconds).
	lastFailure, lastAnswer atomic.Int64
}

func newClient(base, token string, log *slog.Logger) *client {
	return &client{base: base, token: token, log: log, http: &http.Client{Timeout: time.Minute}}
}

// call sends body (nil for none) and decodes a JSON answer into out unless
// the status is 204. It returns the status of the first answer below 500.
func (c *client) call(ctx context.Context, method, path string, body, out any) (int, error) {
	status, _, err := c.callHeader(ctx, method, path, body, out)
	return status, err
}

// callHeader is call, which also returns the answer's header.
func (c *client) callHeader(ctx context.Context, method, path string, body, out any) (int, http.Header, error) {
	var payload []byte
	if body != nil {
		var err error
		if payload, err = json.Marshal(body); err != nil {
			return 0, nil, fmt.Errorf("encode %s: %w", path, err)
		}
	}
	backoff := 50 * time.Millisecond
	for {
		status, header, answer, err := c.send(ctx, method, path, payload)
		if err == nil && status < 500 {
			c.lastAnswer.Store(time.Now().UnixNano())
			if out != nil && status != http.StatusNoContent {
				if err := json.Unmarshal(answer, out); err != nil {
					return status, header, fmt.Errorf("%s answered %d with %q: %w", path, status, answer, err)
				}
			}
			return status, header, nil
		}
		if ctx.Err() != nil {
			return 0, nil, ctx.Err()
		}
		c.lastFailure.Store(time.Now().UnixNano())
		c.log.Debug("broker unavailable; retrying", "path", path, "status", status, "err", err, "in", backoff)
		select {
		case <-ctx.Done():
			return 0, nil, ctx.Err()
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, time.Second)
	}
}

func (c *client) send(ctx context.Context, method, path string, payload []byte) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, bytes.NewReader(payload))
	if err != nil {
		return 0, nil, nil, err
	}
	if payload != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, answer, err
}
