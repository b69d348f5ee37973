package quota_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

// Limits are a TenantQuota's, as the operator writes them; nil: no limit.
type Limits struct {
	MaxQueues                                                  *int
	PushMessages, PushMessagesBurst, PushBytes, PushBytesBurst *int64
	PopMessages, MaxStoredBytes, MaxStateRows                  *int64
}

func n64(v int64) *int64 { return &v }

// grant writes tenant's quota row through the function the operator calls.
func grant(t testing.TB, b *brokertest.Broker, tenant string, l Limits) {
	t.Helper()
	var maxQueues *int32
	if l.MaxQueues != nil {
		maxQueues = new(int32(*l.MaxQueues))
	}
	_, err := celldb.New(b.Pool).ApplyQuota(context.Background(), celldb.Quota{Tenant: tenant, Enabled: true, MaxQueues: maxQueues,
		PushMessagesPerSecond: l.PushMessages, PushMessagesBurst: l.PushMessagesBurst, PushBytesPerSecond: l.PushBytes,
		PushBytesBurst: l.PushBytesBurst, PopMessagesPerSecond: l.PopMessages, MaxStoredBytes: l.MaxStoredBytes, MaxStateRows: l.MaxStateRows})
	if err != nil {
		t.Fatalf("grant %s: %v", tenant, err)
	}
}

// tenanted is the broker of the quota tests: tenancy on, a tenant of its
// own per test.
var tenanted = brokertest.NewGroup(brokertest.WithJWT(true))

// tenancy gives the test the broker with tenancy on, acting as a tenant of
// its own (b.Tenant), and a read-write token of that tenant.
func tenancy(t testing.TB) (*brokertest.Broker, string) {
	t.Helper()
	b := tenanted.Shared(t)
	return b, brokertest.Mint(t, b.Tenant, auth.ReadWrite)
}

func items(queue string, n int) map[string]any {
	out := make([]map[string]any, n)
	for i := range out {
		out[i] = map[string]any{"queue": queue, "payload": map[string]any{"n": i, "pad": strings.Repeat("x", 64)}}
	}
	return map[string]any{"items": out}
}

// wantRefused requires the 429 of quota for tenant.
func wantRefused(t testing.TB, r brokertest.Response, tenant, quota string) {
	t.Helper()
	if r.Status != http.StatusTooManyRequests {
		t.Fatalf("status %d, want 429: %s", r.Status, r.Body)
	}
	m := r.Map(t)
	if m["quota"] != quota || m["tenant"] != tenant || !strings.Contains(fmt.Sprint(m["error"]), quota) {
		t.Fatalf("429 body %s, want quota %q, tenant %q and an error naming the quota", r.Body, quota, tenant)
	}
}

// untilRefused repeats the request until quota refuses it, and returns
// that answer: the brokers read a new quota row within a second (at once on
// its NOTIFY).
func untilRefused(t testing.TB, b *brokertest.Broker, quota, method, path, token string, body any) brokertest.Response {
	t.Helper()
	return untilAnswered(t, b, http.StatusTooManyRequests, quota, method, path, token, body)
}

// untilAnswered repeats the request until quota refuses it with status.
func untilAnswered(t testing.TB, b *brokertest.Broker, status int, quota, method, path, token string, body any) brokertest.Response {
	t.Helper()
	var r brokertest.Response
	brokertest.Eventually(t, 10*time.Second, func() error {
		if r = b.Do(t, method, path, token, body); r.Status != status || !strings.Contains(string(r.Body), `"quota":"`+quota+`"`) {
			return fmt.Errorf("%s %s was not refused by %s: %d %s", method, path, quota, r.Status, r.Body)
		}
		return nil
	})
	return r
}

func TestMaxQueuesIsExactUnderRacingCreates(t *testing.T) {
	t.Parallel()
	b, tok := tenancy(t)
	three := 3
	grant(t, b, b.Tenant, Limits{MaxQueues: &three})
	var wg sync.WaitGroup
	resps := make([]brokertest.Response, 12)
	for i := range resps {
		wg.Go(func() { resps[i] = b.Do(t, "POST", "/api/v1/push", tok, items(fmt.Sprintf("q%d", i), 1)) })
	}
	wg.Wait()
	var created int
	for _, r := range resps {
		switch r.Status {
		case http.StatusCreated:
			created++
		default:
			wantRefused(t, r, b.Tenant, "maxQueues")
		}
	}
	if created != 3 {
		t.Fatalf("%d racing creates passed, want exactly 3", created)
	}
	queues, err := b.DB.Queues(t.Context(), b.Tenant)
	if err != nil || len(queues) != 3 {
		t.Fatalf("acme has the queues %v (%v), want 3", queues, err)
	}
	// Configure counts as a create, and an existing queue always passes.
	wantRefused(t, b.Do(t, "POST", "/api/v1/configure", tok, map[string]any{"queue": "more"}), b.Tenant, "maxQueues")
	existing := queues[0]
	if r := b.Do(t, "POST", "/api/v1/configure", tok, map[string]any{"queue": existing}); r.Status != http.StatusOK {
		t.Fatalf("configure of an existing queue at the cap: %d %s", r.Status, r.Body)
	}
	if r := b.Do(t, "POST", "/api/v1/push", tok, items(existing, 2)); r.Status != http.StatusCreated {
		t.Fatalf("push to an existing queue at the cap: %d %s", r.Status, r.Body)
	}
	wantMetric(t, b, fmt.Sprintf(`regent_quota_refusals_total{quota="maxQueues",tenant=%q} 10`, b.Tenant))
}

func wantMetric(t testing.TB, b *brokertest.Broker, line string) {
	t.Helper()
	if m := b.Scrape(t); !strings.Contains(m, "\n"+line+"\n") {
		t.Fatalf("/metrics lacks %s", line)
	}
}

// A refused push stores nothing of the request: no message of any of its
// queues, even when the limit is only passed by the last item.
func TestARefusedPushIs429AndStoresNothing(t *testing.T) {
	t.Parallel()
	b, tok := tenancy(t)
	for _, q := range []string{"a", "b"} {
		if r := b.Do(t, "POST", "/api/v1/push", tok, items(q, 1)); r.Status != http.StatusCreated {
			t.Fatalf("push: %d %s", r.Status, r.Body)
		}
	}
	// A burst of 6 at 1 a second, drained until a push of one message is
	// refused: the bucket then holds less than one, and a push of 6 is
	// refused for the 5 s it takes to refill. (Drained only until a push of
	// 6 was refused, it could hold 5.99, and refill within the next push.)
	grant(t, b, b.Tenant, Limits{PushMessages: n64(1), PushMessagesBurst: n64(6)})
	untilRefused(t, b, "push.messagesPerSecond", "POST", "/api/v1/push", tok, items("a", 6))
	untilRefused(t, b, "push.messagesPerSecond", "POST", "/api/v1/push", tok, items("a", 1))

	stored := func() int {
		n := 0
		for _, q := range []string{"a", "b"} {
			s, err := b.DB.Queue(t.Context(), b.Tenant, q)
			if err != nil {
				t.Fatal(err)
			}
			n += s.Frames
		}
		return n
	}
	before := stored()
	body := items("a", 3)
	body["items"] = append(body["items"].([]map[string]any), items("b", 3)["items"].([]map[string]any)...)
	r := b.Do(t, "POST", "/api/v1/push", tok, body)
	wantRefused(t, r, b.Tenant, "push.messagesPerSecond")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("a 429 without Retry-After: %v", r.Header)
	}
	if after := stored(); after != before {
		t.Fatalf("the refused push stored %d messages", after-before)
	}

	// The same whole-request rule for the stored bytes.
	grant(t, b, b.Tenant, Limits{MaxStoredBytes: n64(1)})
	untilRefused(t, b, "maxStoredBytes", "POST", "/api/v1/push", tok, items("a", 1))
	before = stored()
	wantRefused(t, b.Do(t, "POST", "/api/v1/push", tok, body), b.Tenant, "maxStoredBytes")
	if after := stored(); after != before {
		t.Fatalf("the push refused by maxStoredBytes stored %d messages", after-before)
	}
}

func TestTheDefaultTenantIsNeverLimited(t *testing.T) {
	t.Parallel()
	b, acme := tenancy(t)
	def := brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite)
	zero := 0
	tiny := Limits{MaxQueues: &zero, PushMessages: n64(1), PopMessages: n64(1), MaxStoredBytes: n64(0), MaxStateRows: n64(0)}
	grant(t, b, "default", tiny)
	grant(t, b, b.Tenant, Limits{PushMessages: n64(1)})
	// Once acme is refused, the brokers have read both rows.
	untilAnswered(t, b, http.StatusRequestEntityTooLarge, "push.messagesPerSecond", "POST", "/api/v1/push", acme, items("x", 2))
	for i := range 5 {
		if r := b.Do(t, "POST", "/api/v1/push", def, items(fmt.Sprintf("d%d", i), 20)); r.Status != http.StatusCreated {
			t.Fatalf("push %d of the default tenant: %d %s", i, r.Status, r.Body)
		}
		if r := b.Do(t, "GET", fmt.Sprintf("/api/v1/pop/queue/d%d?batch=20&autoAck=true", i), def, nil); r.Status != http.StatusOK {
			t.Fatalf("pop %d of the default tenant: %d %s", i, r.Status, r.Body)
		}
	}
}

func TestPopRateRefusesOncePopsSpendIt(t *testing.T) {
	t.Parallel()
	b, tok := tenancy(t)
	if r := b.Do(t, "POST", "/api/v1/push", tok, items("q", 200)); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	grant(t, b, b.Tenant, Limits{PopMessages: n64(5)})
	r := untilRefused(t, b, "pop.messagesPerSecond", "GET", "/api/v1/pop/queue/q?batch=20&autoAck=true", tok, nil)
	wantRefused(t, r, b.Tenant, "pop.messagesPerSecond")
	if r.Header.Get("Retry-After") == "" {
		t.Fatalf("a 429 without Retry-After: %v", r.Header)
	}
}

// A push larger than its rate's burst can never pass, so it is not a 429
// that asks for a retry: it is a 413 without Retry-After that says to split
// it.
func TestAPushLargerThanTheBurstIs413WithoutRetryAfter(t *testing.T) {
	t.Parallel()
	b, tok := tenancy(t)
	grant(t, b, b.Tenant, Limits{PushBytes: n64(100), PushBytesBurst: n64(100)})
	r := untilAnswered(t, b, http.StatusRequestEntityTooLarge, "push.bytesPerSecond", "POST", "/api/v1/push", tok, items("q", 50))
	if m := r.Map(t); m["tenant"] != b.Tenant || !strings.Contains(fmt.Sprint(m["error"]), "burst") ||
		!strings.Contains(fmt.Sprint(m["error"]), "split") {
		t.Fatalf("the refusal of a push larger than the burst does not say so: %s", r.Body)
	}
	if ra := r.Header.Get("Retry-After"); ra != "" {
		t.Fatalf("a push that no retry can pass carries Retry-After: %s", ra)
	}
}
