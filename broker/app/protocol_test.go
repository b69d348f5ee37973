package app_test

import (
	"bufio"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
)

// net/http answers these itself, before any handler; the broker's answer is
// JSON all the same.
func TestProtocolGarbageGetsAJSONError(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for name, tc := range map[string]struct {
		request string
		status  int
	}{
		"broken request line":            {"GARBAGE\r\n\r\n", http.StatusBadRequest},
		"request line without a version": {"GET /health\r\n\r\n", http.StatusBadRequest},
		"no Host":                        {"GET /health HTTP/1.1\r\n\r\n", http.StatusBadRequest},
		"malformed Host":                 {"GET /health HTTP/1.1\r\nHost: a b\r\n\r\n", http.StatusBadRequest},
		"invalid header name":            {"GET /health HTTP/1.1\r\nHost: x\r\nBad Name: 1\r\n\r\n", http.StatusBadRequest},
		"header line without colon":      {"GET /health HTTP/1.1\r\nHost: x\r\nnocolon\r\n\r\n", http.StatusBadRequest},
		"unknown HTTP version":           {"GET /health HTTP/9.9\r\nHost: x\r\n\r\n", http.StatusHTTPVersionNotSupported},
		"unknown transfer coding":        {"POST /api/v1/push HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip\r\n\r\n", http.StatusNotImplemented},
		"oversized headers": {"GET /health HTTP/1.1\r\nHost: x\r\nX-Big: " + strings.Repeat("a", 1<<20+8<<10) + "\r\n\r\n",
			http.StatusRequestHeaderFieldsTooLarge},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, b)
			go func() { _, _ = io.WriteString(c, tc.request) }()
			_ = c.SetReadDeadline(time.Now().Add(5 * time.Second))
			resp, err := http.ReadResponse(bufio.NewReader(c), nil)
			if err != nil {
				t.Fatalf("read answer: %v", err)
			}
			defer resp.Body.Close()
			body, err := io.ReadAll(resp.Body)
			if err != nil {
				t.Fatalf("read body: %v", err)
			}
			var e struct{ Error string }
			if resp.StatusCode != tc.status || resp.Header.Get("Content-Type") != "application/json" ||
				json.Unmarshal(body, &e) != nil || e.Error == "" {
				t.Fatalf("answer %d %q %q, want %d with a JSON error", resp.StatusCode, resp.Header.Get("Content-Type"), body, tc.status)
			}
			t.Logf("%d %s", resp.StatusCode, body)
		})
	}
}
