package stockworker

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"time"
)

// Call sends a request until it is answered below 500, as the stock
// clients do: a 503 while the machine is loaded, or a connection lost, is
// retried, and the broker's one-transaction cycle makes that safe.
func (s *Worker) Call(ctx context.Context, method, path string, body, out any) (int, error) {
	var buf []byte
	if body != nil {
		var err error
		if buf, err = json.Marshal(body); err != nil {
			return 0, err
		}
	}
	for {
		status, err := s.send(ctx, method, path, buf, out)
		if err == nil && status < 500 || ctx.Err() != nil {
			return status, err
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func (s *Worker) send(ctx context.Context, method, path string, body []byte, out any) (int, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, s.Base+path, rd)
	if err != nil {
		return 0, err
	}
	req.Header.Set("Content-Type", "application/json")
	if s.Token != "" {
		req.Header.Set("Authorization", "Bearer "+s.Token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		return 0, err
	}
	if out != nil && resp.StatusCode == http.StatusOK {
		if err := json.Unmarshal(raw, out); err != nil {
			return resp.StatusCode, fmt.Errorf("%s %s: %w: %s", method, path, err, raw)
		}
	}
	return resp.StatusCode, nil
}

func (s *Worker) state(ctx context.Context, partition string, ripe *int64, keys []string) ([]StateRow, error) {
	req := map[string]any{"query_id": s.queryID, "partition_id": partition}
	if keys != nil {
		req["keys"] = keys
	}
	if ripe != nil {
		req["ripe_at_or_before"] = *ripe
	}
	var out struct {
		Rows []StateRow `json:"rows"`
	}
	st, err := s.Call(ctx, "POST", "/streams/v1/state/get", req, &out)
	if err != nil {
		return nil, err
	}
	if st != http.StatusOK {
		return nil, fmt.Errorf("state/get: status %d", st)
	}
	return out.Rows, nil
}

// cycle commits. A refusal (success false) is an error, as for the stock
// runners; a worker that sends if_updated_at (fresh) asked to be refused,
// and goes on as Regent's own does.
func (s *Worker) cycle(ctx context.Context, p string, ops, emits []map[string]any, ack map[string]any) error {
	if ops == nil {
		ops = []map[string]any{}
	}
	if emits == nil {
		emits = []map[string]any{}
	}
	var out struct {
		Success  bool   `json:"success"`
		Error    string `json:"error"`
		Deferred string `json:"deferred"`
	}
	defer func() {
		// What a failed run prints: each cycle's time, partition, kind,
		// the windows it emitted and its verdict.
		var ws []int64
		for _, e := range emits {
			ws = append(ws, e["payload"].(*Window).WindowStart)
		}
		s.mu.Lock()
		s.trace = append(s.trace, fmt.Sprintf("  %s %s %s emits %v: success %v %s%s",
			time.Now().Format("15:04:05.000"), s.name[p], kind(ack), ws, out.Success, out.Error, out.Deferred))
		s.mu.Unlock()
	}()
	st, err := s.Call(ctx, "POST", "/streams/v1/cycle", map[string]any{
		"query_id": s.queryID, "partition_id": p, "consumer_group": s.group,
		"state_ops": ops, "push_items": emits, "ack": ack}, &out)
	switch {
	case err != nil:
		return err
	case st != http.StatusOK:
		return fmt.Errorf("cycle: status %d", st)
	case !out.Success && !s.Fresh:
		return fmt.Errorf("%s failed: %s", kind(ack), out.Error)
	case out.Deferred != "":
		Deferrals.Add(1)
		if strings.Contains(out.Deferred, "changed since a ripe read") {
			Raced.Add(1)
		}
	}
	return nil
}

// Deferrals counts the flushes the broker deferred, and Raced those it
// deferred for a fold that changed a window after the flush read it.
var Deferrals, Raced atomic.Int64

func kind(ack map[string]any) string {
	if ack != nil {
		return "fold"
	}
	return "flush"
}
