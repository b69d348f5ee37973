package streams_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
)

// tenantBroker is the tenancy broker as a tenant of the test's own, with
// no quota grant yet, and a read-write token of that tenant.
func tenantBroker(t testing.TB) (*brokertest.Broker, string) {
	t.Helper()
	b := tenancy.Shared(t)
	return b, brokertest.Mint(t, b.Tenant, auth.ReadWrite)
}

func registerAs(t testing.TB, b *brokertest.Broker, token, name, hash string, reset bool) brokertest.Response {
	t.Helper()
	return b.Do(t, "POST", "/streams/v1/queries", token, map[string]any{
		"name": name, "source_queue": "src", "config_hash": hash, "reset": reset})
}

// applyQuota writes the grant of b's tenant as the operator does for its
// TenantQuota (which also tells the brokers).
func applyQuota(t testing.TB, b *brokertest.Broker, q celldb.Quota) {
	t.Helper()
	q.Tenant = b.Tenant
	if _, err := celldb.New(b.Pool).ApplyQuota(t.Context(), q); err != nil {
		t.Fatal(err)
	}
}

// tenantQueries counts the queries b's tenant has registered.
func tenantQueries(t testing.TB, b *brokertest.Broker) int64 {
	t.Helper()
	n, err := celldb.New(b.Pool).CountQueries(t.Context(), b.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// wantDenied requires a 403 refusal whose error contains why.
func wantDenied(t testing.TB, r brokertest.Response, why string) {
	t.Helper()
	wantStatus(t, r, 403)
	m := r.Map(t)
	if m["success"] != false || m["denied"] != true || !strings.Contains(fmt.Sprint(m["error"]), why) {
		t.Fatalf("403 body %s, want success false, denied true and an error saying %q", r.Body, why)
	}
}

func TestQuotaNewNameWithoutAGrantIs403(t *testing.T) {
	t.Parallel()
	b, tok := tenantBroker(t)
	wantDenied(t, registerAs(t, b, tok, "q", "h", false), "no quota grant")
	if n := tenantQueries(t, b); n != 0 {
		t.Fatalf("a denied registration inserted %d rows", n)
	}
}

func TestQuotaDisabledGrantIs403(t *testing.T) {
	t.Parallel()
	b, tok := tenantBroker(t)
	applyQuota(t, b, celldb.Quota{Enabled: false})
	wantDenied(t, registerAs(t, b, tok, "q", "h", false), "disabled")
}

func TestQuotaFullCapIs403AndNothingIsInserted(t *testing.T) {
	t.Parallel()
	b, tok := tenantBroker(t)
	two := 2
	grant(t, b, b.Tenant, &two)
	wantStatus(t, registerAs(t, b, tok, "a", "h", false), 200)
	wantStatus(t, registerAs(t, b, tok, "b", "h", false), 200)
	wantDenied(t, registerAs(t, b, tok, "c", "h", false), "cap")
	if n := tenantQueries(t, b); n != 2 {
		t.Fatalf("%d queries for acme, want 2", n)
	}
	zero := 0
	grant(t, b, b.Tenant, &zero)
	wantDenied(t, registerAs(t, b, tok, "d", "h", false), "cap")
}

func TestQuotaCapIsExactWhenRegistrationsRace(t *testing.T) {
	t.Parallel()
	b, tok := tenantBroker(t)
	three := 3
	grant(t, b, b.Tenant, &three)
	var wg sync.WaitGroup
	codes := make([]int, 12)
	for i := range codes {
		wg.Go(func() { codes[i] = registerAs(t, b, tok, fmt.Sprintf("q%d", i), "h", false).Status })
	}
	wg.Wait()
	ok, denied := 0, 0
	for _, c := range codes {
		switch c {
		case 200:
			ok++
		case 403:
			denied++
		}
	}
	if ok != 3 || denied != 9 {
		t.Fatalf("%d registered and %d denied of 12 racing new names under a cap of 3 (codes %v)", ok, denied, codes)
	}
	if n := tenantQueries(t, b); n != 3 {
		t.Fatalf("%d queries stored, want exactly the cap", n)
	}
}

func TestQuotaReRegisteringAnExistingNameAlwaysPasses(t *testing.T) {
	t.Parallel()
	b, tok := tenantBroker(t)
	one := 1
	grant(t, b, b.Tenant, &one)
	wantStatus(t, registerAs(t, b, tok, "q", "h", false), 200)
	var zero int32
	for _, revoke := range []func(){
		func() { applyQuota(t, b, celldb.Quota{Enabled: true, MaxQueries: &zero}) },
		func() { applyQuota(t, b, celldb.Quota{Enabled: false, MaxQueries: &zero}) },
		func() {
			if err := celldb.New(b.Pool).DeleteQuota(t.Context(), b.Tenant); err != nil {
				t.Fatal(err)
			}
		},
	} {
		revoke()
		wantStatus(t, registerAs(t, b, tok, "q", "h", false), 200)
		wantStatus(t, registerAs(t, b, tok, "q", "h2", true), 200)
		wantStatus(t, registerAs(t, b, tok, "q", "h", true), 200)
	}
	wantDenied(t, registerAs(t, b, tok, "new", "h", false), "no quota grant")
}

func TestQuotaDefaultTenantNeverReadsTheGrantTable(t *testing.T) {
	t.Parallel()
	// It locks the grant table of the whole database, so it keeps a
	// broker of its own.
	b := brokertest.Start(t, brokertest.WithJWT(true))
	tok := brokertest.Mint(t, auth.DefaultTenant, auth.ReadWrite)
	// A transaction holding the grant table exclusively blocks every read
	// of it: a default-tenant registration must not wait for it.
	ctx := context.Background()
	tx, err := b.Pool.Begin(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback(ctx)
	if _, err := tx.Exec(ctx, `LOCK TABLE queen_streams.quota IN ACCESS EXCLUSIVE MODE`); err != nil {
		t.Fatal(err)
	}
	done := make(chan brokertest.Response, 1)
	go func() {
		defer close(done) // also when the request fails the test and exits the goroutine
		done <- registerAs(t, b, tok, "q", "h", false)
	}()
	select {
	case r := <-done:
		wantStatus(t, r, 200)
	case <-time.After(10 * time.Second):
		t.Fatal("a default-tenant registration waited on the quota table")
	}
}

// The tenant quota's maxStateRows (issue 18): a cycle that would bring the
// tenant's state rows past the cap fails as a whole, success false with an
// error naming the quota, and changes nothing: no state, no sink message,
// no ack. Rewriting existing keys always passes; deleting frees room.
func TestQuotaStateRowsCapFailsTheCycleAsAWhole(t *testing.T) {
	t.Parallel()
	b := tenancy.Shared(t)
	b.Token = brokertest.Mint(t, b.Tenant, auth.ReadWrite)
	applyQuota(t, b, celldb.Quota{Enabled: true, MaxStateRows: new(int64(2))})
	f := fixtureOn(t, b)
	upserts := func(keys ...string) []any {
		ops := make([]any, len(keys))
		for i, k := range keys {
			ops[i] = map[string]any{"type": "upsert", "key": k, "value": map[string]any{"n": i}}
		}
		return ops
	}
	cycle := func(ops []any) map[string]any {
		t.Helper()
		b.PushN(t, f.src, "", 0, 1)
		p := pop(t, b, f.src, 10, "consumerGroup=g")
		r := post(t, b, "/streams/v1/cycle", f.body(map[string]any{"consumer_group": "g", "state_ops": ops,
			"push_items": []any{map[string]any{"queue": f.out, "payload": 1}}, "ack": ack(p.LeaseID, "completed", nil)}))
		wantStatus(t, r, 200)
		m := r.Map(t)
		if m["success"] != true {
			// Settle the batch, so that the next pop is served.
			r := post(t, b, "/streams/v1/cycle", f.body(map[string]any{"consumer_group": "g",
				"ack": ack(p.LeaseID, "completed", nil)}))
			if wantStatus(t, r, 200); r.Map(t)["success"] != true {
				t.Fatalf("settling the batch: %s", r.Body)
			}
		}
		return m
	}

	m := cycle(upserts("a", "b", "c"))
	if m["success"] != false || !strings.Contains(fmt.Sprint(m["error"]), "maxStateRows") {
		t.Fatalf("a cycle of 3 new keys under a cap of 2 answered %v, want success false naming maxStateRows", m)
	}
	if len(f.state(t)) != 0 || sinkMessages(t, b, f.out) != 0 {
		t.Fatalf("the refused cycle left state %v and %d sink messages", f.state(t), sinkMessages(t, b, f.out))
	}
	// The broker knows the refusal by its code, not its wording, and
	// counts it against the quota.
	if m := b.Scrape(t); !strings.Contains(m, fmt.Sprintf(`regent_quota_refusals_total{quota="maxStateRows",tenant=%q} 1`, b.Tenant)) {
		t.Fatalf("the refusal is not counted as a maxStateRows refusal:\n%s", m)
	}
	if m := cycle(upserts("a", "b")); m["success"] != true {
		t.Fatalf("a cycle of 2 new keys under a cap of 2: %v", m)
	}
	if m := cycle(upserts("c")); m["success"] != false {
		t.Fatalf("a third key passed the cap of 2: %v", m)
	}
	if m := cycle(upserts("a", "b")); m["success"] != true {
		t.Fatalf("rewriting the existing keys at the cap: %v", m)
	}
	if m := cycle([]any{map[string]any{"type": "delete", "key": "a"}, upserts("c")[0]}); m["success"] != true {
		t.Fatalf("a delete and a new key at the cap: %v", m)
	}
	if got := f.state(t); len(got) != 2 || got["b"] == "" || got["c"] == "" {
		t.Fatalf("state %v, want b and c", got)
	}
	if u, err := celldb.New(b.Pool).Usage(t.Context(), b.Tenant, time.Minute); err != nil || u.StateRows != 2 {
		t.Fatalf("the state-row counter says %d (%v), want 2", u.StateRows, err)
	}
}

// The tenant quota's maxStoredBytes holds for a cycle's sink emits too: a
// cycle that would store past it fails as a whole, naming the quota; one
// that emits nothing still commits.
func TestQuotaStoredBytesCapFailsACycleThatEmits(t *testing.T) {
	t.Parallel()
	b := tenancy.Shared(t)
	b.Token = brokertest.Mint(t, b.Tenant, auth.ReadWrite)
	grant(t, b, b.Tenant, nil)
	f := fixtureOn(t, b)
	b.PushN(t, f.src, "", 0, 3)
	applyQuota(t, b, celldb.Quota{Enabled: true, MaxStoredBytes: new(int64(1))})
	// Once a push is refused, the broker has read the cap.
	brokertest.Eventually(t, 10*time.Second, func() error {
		if r := post(t, b, "/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": f.src, "payload": 1}}}); r.Status != 429 {
			return fmt.Errorf("pushes past maxStoredBytes still pass: %d %s", r.Status, r.Body)
		}
		return nil
	})
	before := b.Stored(t, f.out).Segments
	p := pop(t, b, f.src, 1, "consumerGroup=g")
	r := post(t, b, "/streams/v1/cycle", f.body(map[string]any{"consumer_group": "g",
		"push_items": []any{map[string]any{"queue": f.out, "payload": 1}}, "ack": ack(p.LeaseID, "completed", nil)}))
	wantStatus(t, r, 200)
	if m := r.Map(t); m["success"] != false || !strings.Contains(fmt.Sprint(m["error"]), "maxStoredBytes") {
		t.Fatalf("a cycle emitting past maxStoredBytes answered %s, want success false naming maxStoredBytes", r.Body)
	}
	if n := b.Stored(t, f.out).Segments; n != before {
		t.Fatalf("the refused cycle stored %d segments", n-before)
	}
	r = post(t, b, "/streams/v1/cycle", f.body(map[string]any{"consumer_group": "g", "ack": ack(p.LeaseID, "completed", nil)}))
	if wantStatus(t, r, 200); r.Map(t)["success"] != true {
		t.Fatalf("a cycle that emits nothing past maxStoredBytes: %s", r.Body)
	}
}
