package streams_test

import (
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestRegisterNewNameIsFresh(t *testing.T) {
	t.Parallel()
	b := shared(t)
	r := register(t, b, "orders.per_minute", "orders", "orders.out", "h1", false)
	if !r.Success || !r.Fresh || r.Reset || r.Name != b.Q("orders.per_minute") || r.ConfigHash != "h1" {
		t.Fatalf("answer %+v, want a fresh success echoing name and hash", r)
	}
	got := b.StreamQuery(t, r.QueryID)
	if want := (dbtest.StreamQuery{Exists: true, Tenant: b.Tenant, Name: b.Q("orders.per_minute"), Source: b.Q("orders"),
		Sink: new(b.Q("orders.out")), ConfigHash: "h1"}); !reflect.DeepEqual(got, want) {
		t.Fatalf("stored %+v, want %+v", got, want)
	}
}

func TestRegisterNewNameWithResetIsFreshAndAnswersReset(t *testing.T) {
	t.Parallel()
	b := shared(t)
	r := register(t, b, "q", "src", "", "h", true)
	if !r.Success || !r.Fresh || !r.Reset {
		t.Fatalf("answer %+v, want fresh and reset", r)
	}
}

func TestRegisterAnswersExactlyTheSeedShape(t *testing.T) {
	t.Parallel()
	b := shared(t)
	r := post(t, b, "/streams/v1/queries", map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"), "config_hash": "h"})
	wantStatus(t, r, 200)
	m := r.Map(t)
	var keys []string
	for k := range m {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	if want := []string{"config_hash", "fresh", "name", "query_id", "reset", "success"}; !slices.Equal(keys, want) {
		t.Fatalf("body keys %v, want exactly %v", keys, want)
	}
}

func TestRegisterQueryIdIsUUIDv7(t *testing.T) {
	t.Parallel()
	b := shared(t)
	r := register(t, b, "q", "src", "", "h", false)
	id, err := uuid.Parse(r.QueryID)
	if err != nil || id.Version() != 7 {
		t.Fatalf("query_id %q is not a UUIDv7 (%v)", r.QueryID, err)
	}
}

func TestRegisterSameHashUpdatesSourceAndSinkAndKeepsState(t *testing.T) {
	t.Parallel()
	b := shared(t)
	first := register(t, b, "q", "src", "sink1", "h", false)
	putState(t, b, first.QueryID, "k", `{"acc": 41}`)
	again := register(t, b, "q", "src2", "sink2", "h", false)
	if !again.Success || again.Fresh || again.Reset || again.QueryID != first.QueryID {
		t.Fatalf("re-registration %+v, want the same query, not fresh, no reset", again)
	}
	if got := b.StreamQuery(t, first.QueryID); got.Source != b.Q("src2") || got.Sink == nil || *got.Sink != b.Q("sink2") {
		t.Fatalf("stored %+v, want the new source and sink", got)
	}
	if n := b.StateRows(t, first.QueryID); n != 1 {
		t.Fatalf("%d state rows after a same-hash registration, want the accumulator kept", n)
	}
}

func TestRegisterDifferentHashWithoutResetIs409NamingTheQuery(t *testing.T) {
	t.Parallel()
	b := shared(t)
	first := register(t, b, "orders.per_minute", "src", "", "h1", false)
	putState(t, b, first.QueryID, "k", `{"acc": 1}`)
	name := b.Q("orders.per_minute")
	for _, body := range []map[string]any{
		{"name": name, "source_queue": b.Q("src"), "config_hash": "h2"},
		{"name": name, "source_queue": b.Q("src"), "config_hash": "h2", "reset": false},
	} {
		r := post(t, b, "/streams/v1/queries", body)
		wantStatus(t, r, 409)
		m := r.Map(t)
		if m["success"] != false || !strings.Contains(fmt.Sprint(m["error"]), name) {
			t.Fatalf("409 body %s, want success false and an error naming the query", r.Body)
		}
		want := "config_hash mismatch: operator chain changed for queryId '" + name + "'. " +
			"Pass reset:true to wipe existing state, or use a new queryId."
		if e := fmt.Sprint(m["error"]); !strings.HasPrefix(e, want) {
			t.Fatalf("409 error %q, want it to start with the phrase the SDKs match: %q", e, want)
		}
		if m["query_id"] != first.QueryID {
			t.Fatalf("409 names query_id %v, want %s", m["query_id"], first.QueryID)
		}
	}
	if h := b.StreamQuery(t, first.QueryID).ConfigHash; h != "h1" {
		t.Fatalf("a 409 changed the hash to %q", h)
	}
	if n := b.StateRows(t, first.QueryID); n != 1 {
		t.Fatalf("a 409 touched the state: %d rows", n)
	}
}

func TestRegisterResetAfter409DeletesStateAndLeavesTheCursor(t *testing.T) {
	t.Parallel()
	b := shared(t)
	first := register(t, b, "q", "src", "", "h1", false)
	putState(t, b, first.QueryID, "a", `{"acc": 1}`)
	putState(t, b, first.QueryID, "b", `{"acc": 2}`)
	sourcePartition(t, b, "src")
	b.PlaceCursor(t, b.Q("src"), "Default", "streams."+b.Q("q"), 17)

	wantStatus(t, post(t, b, "/streams/v1/queries", map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"), "config_hash": "h2"}), 409)
	r := register(t, b, "q", "src", "", "h2", true)
	if !r.Success || !r.Reset || r.Fresh || r.QueryID != first.QueryID || r.ConfigHash != "h2" {
		t.Fatalf("reset answer %+v, want success, reset true, same query, new hash", r)
	}
	if n := b.StateRows(t, first.QueryID); n != 0 {
		t.Fatalf("%d state rows after reset, want none", n)
	}
	if c := b.Cursor(t, b.Q("src")); c.Committed != 17 {
		t.Fatalf("reset moved the source cursor to %d", c.Committed)
	}
	if h := b.StreamQuery(t, first.QueryID).ConfigHash; h != "h2" {
		t.Fatalf("stored hash %q after reset, want h2", h)
	}
}

func TestRegisterResetWithMatchingHashStillDeletesState(t *testing.T) {
	t.Parallel()
	b := shared(t)
	first := register(t, b, "q", "src", "", "h", false)
	putState(t, b, first.QueryID, "a", `{"acc": 1}`)
	r := register(t, b, "q", "src", "", "h", true)
	if !r.Reset || r.Fresh {
		t.Fatalf("answer %+v, want reset true", r)
	}
	if n := b.StateRows(t, first.QueryID); n != 0 {
		t.Fatalf("%d state rows after a reset with the same hash, want none", n)
	}
}

func TestRegisterMissingOrEmptyConfigHashIs400BeforeAnythingRuns(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q := b.Q("q")
	want400(t, b, "/streams/v1/queries", map[string]string{
		`{"name": "` + q + `", "source_queue": "src"}`:                      "config_hash",
		`{"name": "` + q + `", "source_queue": "src", "config_hash": ""}`:   "config_hash",
		`{"name": "` + q + `", "source_queue": "src", "config_hash": null}`: "config_hash",
		`{"config_hash": ""}`: "config_hash",
	})
	if n := b.StreamQueries(t, q); n != 0 {
		t.Fatalf("%d queries stored by rejected registrations", n)
	}
}

func TestRegisterMissingNameOrSourceQueueIs400(t *testing.T) {
	t.Parallel()
	b := shared(t)
	want400(t, b, "/streams/v1/queries", map[string]string{
		`{"source_queue": "src", "config_hash": "h"}`:                            "name",
		`{"name": "", "source_queue": "src", "config_hash": "h"}`:                "name",
		`{"name": "q", "config_hash": "h"}`:                                      "source_queue",
		`{"name": "q", "source_queue": 5, "config_hash": "h"}`:                   "source_queue",
		`{"name": "q", "source_queue": "s", "config_hash": "h", "reset": "yes"}`: "reset",
		``:      "Empty request body",
		`{nope`: "Invalid JSON",
	})
}

func TestRegisterEmptySinkQueueIsStoredAsNull(t *testing.T) {
	t.Parallel()
	b := shared(t)
	r := register(t, b, "q", "src", "", "h", false)
	if sink := b.StreamQuery(t, r.QueryID).Sink; sink != nil {
		t.Fatalf("empty sink_queue was stored as %q, not NULL", *sink)
	}
	register(t, b, "q", "src", "out", "h", false)
	register(t, b, "q", "src", "", "h", false)
	if sink := b.StreamQuery(t, r.QueryID).Sink; sink != nil {
		t.Fatalf("re-registering with an empty sink_queue stored %q, not NULL", *sink)
	}
}

func TestRegisterNameIsUniquePerTenantNotGlobal(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	grant(t, x.b, x.redTenant, nil)
	if red, blue := queryAs(t, x.b, x.red), queryAs(t, x.b, x.blue); red == blue {
		t.Fatal("two tenants registering one name share one query")
	}
	for _, tenant := range []string{x.redTenant, x.blueTenant} {
		if n, err := x.b.DB.StreamQueries(t.Context(), tenant, x.b.Q("q")); err != nil || n != 1 {
			t.Fatalf("%d queries named q of tenant %s (%v), want one per tenant", n, tenant, err)
		}
	}
}

func TestRegisterRacingRegistrationsOfOneNewNameConvergeOnOneQuery(t *testing.T) {
	t.Parallel()
	b := shared(t)
	var wg sync.WaitGroup
	ids := make([]string, 8)
	fresh := make([]bool, 8)
	for i := range ids {
		wg.Go(func() {
			r := post(t, b, "/streams/v1/queries", map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"), "config_hash": "h"})
			var out registered
			if r.Status == 200 {
				_ = json.Unmarshal(r.Body, &out)
			}
			ids[i], fresh[i] = out.QueryID, out.Fresh
		})
	}
	wg.Wait()
	nFresh := 0
	for i, id := range ids {
		if id == "" || id != ids[0] {
			t.Fatalf("registration %d answered query %q, want all %q", i, id, ids[0])
		}
		if fresh[i] {
			nFresh++
		}
	}
	if nFresh != 1 {
		t.Fatalf("%d registrations were fresh, want exactly 1", nFresh)
	}
}

func TestQueriesAndCycleNeedReadWriteAndStateGetReadOnly(t *testing.T) {
	t.Parallel()
	b := alone(t)
	q, p := queryAs(t, b, ""), sourcePartition(t, b, "src")
	ro := brokertest.Mint(t, b.Tenant, auth.ReadOnly)
	for _, path := range []string{"/streams/v1/queries", "/streams/v1/cycle"} {
		r := b.Do(t, "POST", path, ro, `{}`)
		wantStatus(t, r, 403)
	}
	r := b.Do(t, "POST", "/streams/v1/state/get", ro, map[string]any{"query_id": q, "partition_id": p})
	wantStatus(t, r, 200)
	for _, path := range []string{"/streams/v1/queries", "/streams/v1/state/get", "/streams/v1/cycle"} {
		wantStatus(t, b.Do(t, "POST", path, brokertest.NoToken, `{}`), 401)
	}
}

// putState writes a state row of a partition of its own, the way a
// committed cycle leaves it.
func putState(t testing.TB, b *brokertest.Broker, queryID, key, value string) {
	t.Helper()
	b.PutState(t, queryID, uuid.NewString(), key, value)
}

// sourcePartition creates queue's partition Default and returns its id.
func sourcePartition(t testing.TB, b *brokertest.Broker, queue string) string {
	t.Helper()
	return partitionAs(t, b, "", queue)
}

// Issue 15, defect 8: a query's source and sink queues follow the queue-name
// rule, so a registration can never name a queue that cannot exist.
func TestRegistrationRefusesQueueNamesThatCanNeverExist(t *testing.T) {
	t.Parallel()
	b := shared(t)
	for _, body := range []map[string]any{
		{"name": "n", "source_queue": "ünïcode", "config_hash": "h"},
		{"name": "n", "source_queue": strings.Repeat("q", 300), "config_hash": "h"},
		{"name": "n", "source_queue": "src", "sink_queue": "has space", "config_hash": "h"},
		{"name": "n\u0000", "source_queue": "src", "config_hash": "h"},
		{"name": "n", "source_queue": "src", "config_hash": "h\u0000"},
	} {
		r := post(t, b, "/streams/v1/queries", body)
		wantStatus(t, r, 400)
	}
}
