package main

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/uuid"
)

// Env is what a scenario gets: the parameters, an HTTP client and the
// recorder of request latencies and errors.
type Env struct {
	URL, Token, Queue string
	C, B, P, N, Size  int
	// Keys, when positive, gives every pushed payload an "id", a "key" of
	// Keys and an "amount" (the stock worker's events), in place of "i".
	Keys      int
	Prefilled bool
	// TxIDs: every pushed item carries a transactionId of its own, a
	// UUIDv7, as Queen's stock JavaScript client stamps on every message.
	TxIDs bool
	// Sink is where the emit scenario's outputs go: queue, or table (a
	// table sink in the cell database at DatabaseURL, created there as the
	// operator's createTable does).
	Sink, DatabaseURL string
	// The processes watched from /proc; 0 is none.
	BrokerPID, PostgresPID int
	// NodePIDs are the postmasters of a Citus cluster's nodes, by name, each
	// reported as PostgresPID is (-node-pids).
	NodePIDs map[string]int
	// made are the queues the run made besides Queue (a sink), for Drop.
	made []string

	host   string     // of URL, for the Host header
	prefix string     // URL's path, before every route
	conns  chan *conn // idle persistent connections

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
	Keys         int     `json:"keys,omitempty"`
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
	// Push's: whether the items carried transactionIds.
	TransactionIDs *bool `json:"transaction_ids,omitempty"`
	// The broker's largest resident set, sampled through the run (setup
	// included), in MiB.
	BrokerRSSPeakMB float64 `json:"broker_rss_peak_mb,omitempty"`
	// CPU of the broker, of PostgreSQL (all its processes) and of the tool,
	// in the measured window: in seconds, and in milliseconds per request
	// counted in Requests (a push; a pop or an ack; a cycle, its pop
	// included).
	CPUSeconds      map[string]float64 `json:"cpu_s,omitempty"`
	CPUMsPerRequest map[string]float64 `json:"cpu_ms_per_request,omitempty"`
	// The same CPU in milliseconds per 1,000 messages: what a worker's
	// events cost each process, whatever its requests.
	CPUMsPer1000Msgs map[string]float64 `json:"cpu_ms_per_1000_msgs,omitempty"`
}

// init checks URL and makes room for the idle connections.
func (e *Env) init() error {
	u, err := url.Parse(e.URL)
	if err != nil || u.Scheme != "http" || u.Host == "" {
		return fmt.Errorf("-url must be an http:// URL, got %q", e.URL)
	}
	e.host, e.prefix = u.Host, strings.TrimSuffix(u.Path, "/")
	e.conns = make(chan *conn, 4*e.C)
	return nil
}

// run runs scenario s; the scenario measures its own window with begin and
// measured, since setup (such as pre-filling a queue) is not part of it.
func (e *Env) run(ctx context.Context, name string, s scenario) *Result {
	e.latencies, e.errors, e.lastErr = e.latencies[:0], 0, ""
	res := &Result{Scenario: name, Queue: e.Queue, Clients: e.C, Batch: e.B, Partitions: e.P, Keys: e.Keys, Messages: e.N}
	var peak <-chan int64
	stop := make(chan struct{})
	if e.BrokerPID > 0 {
		peak = e.watchRSS(stop)
	}
	if err := s(ctx, e, res); err != nil {
		res.Error = err.Error()
	}
	close(stop)
	if peak != nil {
		res.BrokerRSSPeakMB = float64(<-peak) / (1 << 20)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	if len(e.latencies) > 0 { // else the scenario counted its own
		res.Requests = len(e.latencies)
	}
	if res.CPUSeconds != nil && res.Requests > 0 {
		res.CPUMsPerRequest = map[string]float64{}
		for k, v := range res.CPUSeconds {
			res.CPUMsPerRequest[k] = v * 1000 / float64(res.Requests)
		}
	}
	if res.CPUSeconds != nil && res.Messages > 0 {
		res.CPUMsPer1000Msgs = map[string]float64{}
		for k, v := range res.CPUSeconds {
			res.CPUMsPer1000Msgs[k] = v * 1e6 / float64(res.Messages)
		}
	}
	res.Errors, res.LastError = e.errors, e.lastErr
	if res.Seconds > 0 {
		res.MsgsPerSec = float64(res.Messages) / res.Seconds
	}
	sort.Slice(e.latencies, func(i, j int) bool { return e.latencies[i] < e.latencies[j] })
	res.P50Ms = percentile(e.latencies, 0.50)
	res.P99Ms = percentile(e.latencies, 0.99)
	return res
}

// mark is the start of a scenario's measured window.
type mark struct {
	at  time.Time
	cpu cpuReading
}

// begin opens the measured window; setup, such as pre-filling a queue, is
// done before it.
func (e *Env) begin() mark {
	cpu, err := e.readCPU()
	if err != nil {
		e.fail(err)
	}
	return mark{time.Now(), cpu}
}

// measured closes the window that began at m and whose work ended at end:
// the run's seconds, and the CPU each process spent since m.
func (e *Env) measured(res *Result, m mark, end time.Time) {
	res.Seconds = end.Sub(m.at).Seconds()
	cpu, err := e.readCPU()
	if err != nil {
		e.fail(err)
		return
	}
	if m.cpu == nil {
		return
	}
	res.CPUSeconds = map[string]float64{}
	for k, v := range cpu {
		res.CPUSeconds[k] = (v - m.cpu[k]).Seconds()
	}
}

func percentile(sorted []time.Duration, q float64) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := int(q*float64(len(sorted))+0.5) - 1
	i = max(0, min(i, len(sorted)-1))
	return float64(sorted[i].Microseconds()) / 1000
}

// Drop deletes the run's queue and the queues it made, so that the next
// run and point start from a broker that holds none of them: without it,
// by the last run at P=10,000 the broker's caches held the partitions of
// every earlier run (60,000), and PostgreSQL's tables carried them too.
func (e *Env) Drop(ctx context.Context) error {
	for _, q := range append([]string{e.Queue}, e.made...) {
		status, body, err := e.Do(ctx, "DELETE", "/api/v1/resources/queues/"+url.PathEscape(q), nil, false)
		if err != nil {
			return fmt.Errorf("delete queue %s: %w", q, err)
		}
		if status != http.StatusOK {
			return fmt.Errorf("delete queue %s (-keep-queues keeps them): %d %s", q, status, body)
		}
	}
	e.made = e.made[:0]
	return nil
}

// Do sends one request and records its latency (when record is true) or
// its failure. It returns the status and body.
func (e *Env) Do(ctx context.Context, method, path string, body []byte, record bool) (int, []byte, error) {
	return e.DoInto(ctx, nil, method, path, body, record)
}

// DoInto is Do reading the answer into dst's storage, so that a loop can
// reuse one buffer.
func (e *Env) DoInto(ctx context.Context, dst []byte, method, path string, body []byte, record bool) (int, []byte, error) {
	start := time.Now()
	status, out, err := e.roundTrip(ctx, dst, method, path, body)
	took := time.Since(start)
	if err == nil && status >= 300 {
		err = fmt.Errorf("%s %s: %d %s", method, path, status, bytes.TrimSpace(out))
	}
	if err != nil {
		if ctx.Err() == nil { // a request the run itself cancelled is no error
			e.fail(err)
		}
		return status, out, err
	}
	if record {
		e.mu.Lock()
		e.latencies = append(e.latencies, took)
		e.mu.Unlock()
	}
	return status, out, nil
}

// conn is a persistent HTTP/1.1 connection to the broker, used by one
// request at a time on the caller's goroutine. net/http's Transport hands
// each request to two goroutines of its own per connection; on a small
// machine the tool's share of the CPU is taken from the broker under test,
// and the hand-offs were most of the tool's.
type conn struct {
	net.Conn
	r *bufio.Reader
	w *bufio.Writer
}

// roundTrip sends one request on an idle connection (or a new one) and
// reads the answer into dst's storage. The connection goes back to the
// idle ones only after a complete exchange that leaves it reusable.
func (e *Env) roundTrip(ctx context.Context, dst []byte, method, path string, body []byte) (int, []byte, error) {
	var c *conn
	select {
	case c = <-e.conns:
	default:
		var d net.Dialer
		nc, err := d.DialContext(ctx, "tcp", e.host)
		if err != nil {
			return 0, nil, err
		}
		c = &conn{Conn: nc, r: bufio.NewReaderSize(nc, 64<<10), w: bufio.NewWriterSize(nc, 16<<10)}
	}
	// A cancelled run interrupts a parked long-poll through the deadline.
	stop := context.AfterFunc(ctx, func() { c.SetDeadline(time.Now()) })
	status, out, reuse, err := c.exchange(dst, e, method, path, body)
	if !stop() || !reuse || err != nil {
		c.Close()
		if err == nil && ctx.Err() != nil {
			err = ctx.Err()
		}
		return status, out, err
	}
	select {
	case e.conns <- c:
	default:
		c.Close()
	}
	return status, out, nil
}

func (c *conn) exchange(dst []byte, e *Env, method, path string, body []byte) (status int, out []byte, reuse bool, err error) {
	w := c.w
	w.WriteString(method)
	w.WriteByte(' ')
	w.WriteString(e.prefix)
	w.WriteString(path)
	w.WriteString(" HTTP/1.1\r\nHost: ")
	w.WriteString(e.host)
	if body != nil {
		w.WriteString("\r\nContent-Type: application/json\r\nContent-Length: ")
		w.WriteString(strconv.Itoa(len(body)))
	}
	if e.Token != "" {
		w.WriteString("\r\nAuthorization: Bearer ")
		w.WriteString(e.Token)
	}
	w.WriteString("\r\n\r\n")
	w.Write(body)
	if err := w.Flush(); err != nil {
		return 0, nil, false, err
	}
	resp, err := http.ReadResponse(c.r, nil)
	if err != nil {
		return 0, nil, false, err
	}
	buf := bytes.NewBuffer(dst[:0])
	_, err = buf.ReadFrom(resp.Body)
	resp.Body.Close()
	return resp.StatusCode, buf.Bytes(), !resp.Close, err
}

func (e *Env) fail(err error) {
	e.mu.Lock()
	e.errors++
	e.lastErr = err.Error()
	e.mu.Unlock()
}

// pushBody builds a push request of n messages to one partition, numbered
// from first; with txids each item carries a fresh UUIDv7 transactionId.
func (e *Env) pushBody(partition string, first, n int, txids bool) []byte {
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
		fmt.Fprintf(&b, `{"queue":%q,"partition":%q,`, e.Queue, partition)
		if txids {
			fmt.Fprintf(&b, `"transactionId":"%s",`, uuid.Must(uuid.NewV7()))
		}
		if e.Keys > 0 {
			id := first + i
			fmt.Fprintf(&b, `"payload":{"id":%d,"key":"k%d","amount":%d,"pad":%q}}`, id, id%e.Keys, id%100, pad)
		} else {
			fmt.Fprintf(&b, `"payload":{"i":%d,"pad":%q}}`, first+i, pad)
		}
	}
	b.WriteString(`]}`)
	return b.Bytes()
}

// partition names partition i of P.
func partition(i int) string { return fmt.Sprintf("p%d", i) }
