package app_test

import (
	"bufio"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// shortTimeouts gives clients 300ms for headers, for a body and between requests.
func shortTimeouts(c *config.Config) {
	c.ReadHeaderTimeout, c.ReadTimeout, c.IdleTimeout = 300*time.Millisecond, 300*time.Millisecond, 300*time.Millisecond
}

// dial opens a raw connection to b's listener.
func dial(t *testing.T, b *brokertest.Broker) net.Conn {
	t.Helper()
	c, err := net.Dial("tcp", strings.TrimPrefix(b.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// requireClosedWithin reads what the broker sends until it closes the
// connection, failing when that takes longer than within.
func requireClosedWithin(t *testing.T, c net.Conn, within time.Duration) string {
	t.Helper()
	_ = c.SetReadDeadline(time.Now().Add(within))
	got, err := io.ReadAll(c)
	if err != nil {
		t.Fatalf("the broker kept the connection open for %v (%v); read so far: %q", within, err, got)
	}
	return string(got)
}

func TestAClientStalledMidBodyHasItsConnectionClosed(t *testing.T) {
	t.Parallel()
	b := timeouts.Shared(t)
	conns := make([]net.Conn, 10)
	for i := range conns {
		conns[i] = dial(t, b)
		if _, err := io.WriteString(conns[i], "POST /api/v1/push HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"+
			"Content-Length: 100\r\n\r\n{\"items\":"); err != nil {
			t.Fatal(err)
		}
	}
	for i, c := range conns {
		got := requireClosedWithin(t, c, 5*time.Second)
		if !strings.HasPrefix(got, "HTTP/1.1 4") {
			t.Errorf("connection %d: answer %q, want a 4xx", i, got)
		}
	}
}

func TestAClientStalledMidHeadersHasItsConnectionClosed(t *testing.T) {
	t.Parallel()
	b := timeouts.Shared(t)
	c := dial(t, b)
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n"); err != nil {
		t.Fatal(err)
	}
	requireClosedWithin(t, c, 5*time.Second)
}

func TestAnIdleKeepAliveConnectionIsClosed(t *testing.T) {
	t.Parallel()
	b := timeouts.Shared(t)
	c := dial(t, b)
	if _, err := io.WriteString(c, "GET /health HTTP/1.1\r\nHost: x\r\n\r\n"); err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(c)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := io.Copy(io.Discard, resp.Body); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || resp.Close {
		t.Fatalf("health = %d (close %v), want a 200 on a kept-alive connection", resp.StatusCode, resp.Close)
	}
	_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
	if n, err := r.Read(make([]byte, 1)); err != io.EOF {
		t.Fatalf("the idle connection was not closed within 5s: read %d, %v", n, err)
	}
}

func TestALongPollParksForItsFullTimeoutWhateverTheReadTimeouts(t *testing.T) {
	t.Parallel()
	b := timeouts.Shared(t)
	lp := b.Q("lp")
	if r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []map[string]any{
		{"queue": lp, "payload": 1}}}); r.Status != http.StatusCreated {
		t.Fatalf("push = %d %s", r.Status, r.Body)
	}
	b.Do(t, "GET", "/api/v1/pop/queue/"+lp+"?autoAck=true", "", nil) // empties it
	start := time.Now()
	r := b.Do(t, "GET", "/api/v1/pop/queue/"+lp+"?wait=true&timeout=1500", "", nil)
	if took := time.Since(start); r.Status != http.StatusNoContent || took < 1400*time.Millisecond {
		t.Fatalf("long-poll of 1.5s with 300ms read timeouts = %d %s after %v", r.Status, r.Body, took)
	}
	// A request with a body on the same broker still works after its wait.
	if r := b.Do(t, "POST", "/api/v1/push", "", map[string]any{"items": []map[string]any{
		{"queue": lp, "payload": 2}}}); r.Status != http.StatusCreated {
		t.Fatalf("push after the long-poll = %d %s", r.Status, r.Body)
	}
}
