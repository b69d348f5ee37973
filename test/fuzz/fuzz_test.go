// Package fuzz_test fuzzes the decoder of every route the broker serves, one
// target per route, against a real broker on a real PostgreSQL. The property
// is the broker's promise about bad input: no panic, no 5xx, and every answer
// of status 400 or more is a JSON object with an "error" string.
//
// `go test ./test/fuzz/` runs the committed seed corpus (testdata/fuzz); `make
// test` fuzzes each target for a few seconds and `make fuzz` for longer.
package fuzz_test

import (
	"encoding/json"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.Main(m) }

// maxBody bounds one input's body, so one input stays cheap; bodies above the
// broker's limit are the body limit's business, tested elsewhere.
const maxBody = 64 << 10

// broker is the one broker a fuzz target drives, for all of its inputs.
type broker struct {
	b      *brokertest.Broker
	client *http.Client
}

// start starts the target's broker, with a queue that holds messages so that
// pops, acks and cycles get past "nothing to do".
func start(f *testing.F) *broker {
	b := brokertest.Start(f)
	// Fuzzing runs the inputs in worker processes, which inherit the
	// environment: pointing them at this cluster spares each an initdb.
	if os.Getenv("REGENT_TEST_DATABASE_URL") == "" {
		f.Setenv("REGENT_TEST_DATABASE_URL", b.DatabaseURL)
	}
	items := `{"items":[{"queue":"q1","payload":{"n":1}},{"queue":"q1","partition":"p1","payload":"x"},` +
		`{"queue":"q1","partition":"p1","payload":null,"transactionId":"t1"}]}`
	if r := b.Do(f, "POST", "/api/v1/push", "", items); r.Status != http.StatusCreated {
		f.Fatalf("seed push = %d %s", r.Status, r.Body)
	}
	return &broker{b: b, client: &http.Client{
		// No input may hold a request this long; pops that wait are cut to 50 ms (see boundWait).
		Timeout:       10 * time.Second,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}}
}

// check sends one request and fails on a 5xx or an error answer that is not
// {"error": "..."}. path is already escaped; rawQuery goes on the wire as it
// is, but for the bytes a request line cannot carry.
func (br *broker) check(t *testing.T, method, path, rawQuery, body string) {
	t.Helper()
	if len(body) > maxBody {
		body = body[:maxBody]
	}
	var rd io.Reader
	if method != http.MethodGet && method != http.MethodDelete {
		rd = strings.NewReader(body)
	}
	req, err := http.NewRequest(method, br.b.URL+path, rd)
	if err != nil {
		t.Fatalf("build request %s %s: %v", method, path, err)
	}
	req.URL.RawQuery = wireQuery(rawQuery)
	if rd != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if br.b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+br.b.Token)
	}
	resp, err := br.client.Do(req)
	if err != nil {
		t.Fatalf("%s %s?%s: %v", method, path, req.URL.RawQuery, err)
	}
	defer resp.Body.Close()
	got, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("%s %s?%s: read answer: %v", method, path, req.URL.RawQuery, err)
	}
	if resp.StatusCode >= 500 {
		t.Fatalf("%s %s?%s body %q: %d %s", method, path, req.URL.RawQuery, body, resp.StatusCode, got)
	}
	if resp.StatusCode >= 400 {
		var e struct {
			Error *string `json:"error"`
		}
		if err := json.Unmarshal(got, &e); err != nil || e.Error == nil {
			t.Fatalf("%s %s?%s body %q: %d answer is not {\"error\": string}: %s",
				method, path, req.URL.RawQuery, body, resp.StatusCode, got)
		}
	}
}

// wireQuery percent-encodes the bytes a request line cannot carry (controls,
// space, non-ASCII, '#') and leaves the rest, malformed escapes included, for
// the broker to decode.
func wireQuery(raw string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(raw); i++ {
		c := raw[i]
		if c <= ' ' || c >= 0x7f || c == '#' {
			b.WriteByte('%')
			b.WriteByte(hex[c>>4])
			b.WriteByte(hex[c&15])
			continue
		}
		b.WriteByte(c)
	}
	return b.String()
}

// boundWait caps the timeout of a pop that would park, so that no input
// holds the fuzzer for the default 30 s. Pops that do not wait keep their
// query byte for byte.
func boundWait(raw string) string {
	q, _ := url.ParseQuery(raw) // the broker ignores malformed pairs the same way
	if w := q.Get("wait"); w != "true" && w != "1" {
		return raw
	}
	q.Set("timeout", "50")
	return q.Encode()
}

func FuzzConfigure(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/configure", "", body) })
}

func FuzzDeleteQueue(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, queue, query string) {
		br.check(t, "DELETE", "/api/v1/resources/queues/"+url.PathEscape(queue), query, "")
	})
}

func FuzzPush(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/push", "", body) })
}

func FuzzPopQueue(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, queue, query string) {
		br.check(t, "GET", "/api/v1/pop/queue/"+url.PathEscape(queue), boundWait(query), "")
	})
}

func FuzzPopPartition(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, queue, partition, query string) {
		path := "/api/v1/pop/queue/" + url.PathEscape(queue) + "/partition/" + url.PathEscape(partition)
		br.check(t, "GET", path, boundWait(query), "")
	})
}

func FuzzAck(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/ack", "", body) })
}

func FuzzAckBatch(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/ack/batch", "", body) })
}

func FuzzLeaseExtend(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, lease, body string) {
		br.check(t, "POST", "/api/v1/lease/"+url.PathEscape(lease)+"/extend", "", body)
	})
}

func FuzzTransaction(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/api/v1/transaction", "", body) })
}

func FuzzDLQ(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, query string) { br.check(t, "GET", "/api/v1/dlq", query, "") })
}

// FuzzConsumerGroup drives the routes that name a group in their path and
// read no body: describe it, and delete it from one queue or from all.
func FuzzConsumerGroup(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, group, queue string) {
		path := "/api/v1/consumer-groups/" + url.PathEscape(group)
		br.check(t, "GET", path, "", "")
		br.check(t, "DELETE", path+"/queues/"+url.PathEscape(queue), "", "")
		br.check(t, "DELETE", path, "", "")
	})
}

// FuzzSeek drives the routes that move a group's cursors: the queue's seek,
// one partition's, and the subscription start.
func FuzzSeek(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, group, queue, partition, body string) {
		path := "/api/v1/consumer-groups/" + url.PathEscape(group)
		onQueue := path + "/queues/" + url.PathEscape(queue)
		br.check(t, "POST", onQueue+"/seek", "", body)
		br.check(t, "POST", onQueue+"/partitions/"+url.PathEscape(partition)+"/seek", "", body)
		br.check(t, "POST", path+"/subscription", "", body)
	})
}

func FuzzRegisterQuery(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/streams/v1/queries", "", body) })
}

func FuzzStateGet(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/streams/v1/state/get", "", body) })
}

func FuzzCycle(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, body string) { br.check(t, "POST", "/streams/v1/cycle", "", body) })
}

func FuzzHealth(f *testing.F) {
	br := start(f)
	f.Fuzz(func(t *testing.T, query string) { br.check(t, "GET", "/health", query, "") })
}

func FuzzMessages(f *testing.F) {
	br := start(f)
	f.Add("from=2026-05-06T12:00:00Z&to=2026-05-06T13:00:00.5%2B02:00&limit=5&offset=1&status=pending&queue=q1&ns=q1&task=")
	f.Fuzz(func(t *testing.T, query string) { br.check(t, "GET", "/api/v1/messages", query, "") })
}

func FuzzMessage(f *testing.F) {
	br := start(f)
	f.Add("0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f", "t1")
	f.Fuzz(func(t *testing.T, partition, tx string) {
		path := "/api/v1/messages/" + url.PathEscape(partition) + "/" + url.PathEscape(tx)
		br.check(t, "GET", path, "", "")
		br.check(t, "DELETE", path, "", "")
	})
}

func FuzzStatus(f *testing.F) {
	br := start(f)
	f.Add("from=2026-05-06T12:00:00Z&to=2026-05-16T12:00:00Z&queue=q1&namespace=x&task=y")
	f.Fuzz(func(t *testing.T, query string) { br.check(t, "GET", "/api/v1/status", query, "") })
}
