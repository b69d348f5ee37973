package main

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"net/http"
	"sort"
	"sync"
	"time"
)

// Env is what a scenario gets: the parameters, an HTTP client and the
// recorder of request latencies and errors.
type Env struct {
	URL, Token, Queue string
	C, B, P, N, Size  int
	Prefilled         bool

	client *http.Client

	mu        sync.Mutex
	latencies []time.Duration
	errors    int
	lastErr   string
}

// Result is the JSON line of one run.
type Result struct {
	Scenario     string  `json:"scenario"`
	Queue        string  `json:"queue"`
	Clients      int     `json:"clients"`
	Batch        int     `json:"batch"`
	Partitions   int     `json:"partitions"`
	Messages     int     `json:"messages"`
	Seconds      float64 `json:"seconds"`
	MsgsPerSec   float64 `json:"msgs_per_sec"`
	CyclesPerSec float64 `json:"cycles_per_sec,omitempty"` // the cycle scenario's
	Requests     int     `json:"requests"`
	P50Ms        float64 `json:"p50_ms"`
	P99Ms        float64 `json:"p99_ms"`
	Errors       int     `json:"errors"`
	LastError    string  `json:"last_error,omitempty"`
	Verified     *bool   `json:"verified,omitempty"`
	Verification string  `json:"verification,omitempty"`
	Error        string  `json:"error,omitempty"`
}

func (e *Env) init() {
	e.client = &http.Client{Transport: &http.Transport{
		MaxIdleConns:        4 * e.C,
		MaxIdleConnsPerHost: 4 * e.C,
		IdleConnTimeout:     time.Minute,
	}}
}

// run runs scenario s; the scenario measures its own window with Start and
// Stop, since setup (such as pre-filling a queue) is not part of it.
func (e *Env) run(ctx context.Context, name string, s scenario) *Result {
	e.latencies, e.errors, e.lastErr = e.latencies[:0], 0, ""
	res := &Result{Scenario: name, Queue: e.Queue, Clients: e.C, Batch: e.B, Partitions: e.P, Messages: e.N}
	if err := s(ctx, e, res); err != nil {
		res.Error = err.Error()
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	res.Requests = len(e.latencies)
	res.Errors, res.LastError = e.errors, e.lastErr
	if res.Seconds > 0 {
		res.MsgsPerSec = float64(res.Messages) / res.Seconds
	}
	sort.Slice(e.latencies, func(i, j int) bool { return e.latencies[i] < e.latencies[j] })
	res.P50Ms = percentile(e.latencies, 0.50)
	res.P99Ms = percentile(e.latencies, 0.99)
	return res
}

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// Do sends one request and records its latency (when record is true) or
// its failure. It returns the status and body.
func (e *Env) Do(ctx context.Context, method, path string, body []byte, record bool) (int, []byte, error) {
	return e.DoInto(ctx, nil, method, path, body, record)
}

// DoInto is Do reading the answer into dst's storage, so that a loop can
// reuse one buffer.
func (e *Env) DoInto(ctx context.Context, dst []byte, method, path string, body []byte, record bool) (int, []byte, error) {
	var rd io.Reader
	if body != nil {
		rd = bytes.NewReader(body)
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, rd)
	if err != nil {
		return 0, nil, err
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if e.Token != "" {
		req.Header.Set("Authorization", "Bearer "+e.Token)
	}
	start := time.Now()
	resp, err := e.client.Do(req)
	if err != nil {
		if ctx.Err() == nil { // a request the run itself cancelled is no error
			e.fail(err)
		}
		return 0, nil, err
	}
	buf := bytes.NewBuffer(dst[:0])
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	out := buf.Bytes()
	took := time.Since(start)
	if err == nil && resp.StatusCode >= 300 {
		err = fmt.Errorf("%s %s: %d %s", method, path, resp.StatusCode, bytes.TrimSpace(out))
	}
	if err != nil {
		e.fail(err)
		return resp.StatusCode, out, err
	}
	if record {
		e.mu.Lock()
		e.latencies = append(e.latencies, took)
		e.mu.Unlock()
	}
	return resp.StatusCode, out, nil
}

func (e *Env) fail(err error) {
	e.mu.Lock()
	e.errors++
	e.lastErr = err.Error()
	e.mu.Unlock()
}

// pushBody builds a push request of n messages to one partition, numbered
// from first.
func (e *Env) pushBody(partition string, first, n int) []byte {
	pad := make([]byte, max(0, e.Size-24))
	for i := range pad {
		pad[i] = 'x'
	}
	var b bytes.Buffer
	b.WriteString(`{"items":[`)
	for i := 0; i < n; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `{"queue":%q,"partition":%q,"payload":{"i":%d,"pad":%q}}`, e.Queue, partition, first+i, pad)
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// partition names partition i of P.
func partition(i int) string { return fmt.Sprintf("p%d", i) }
