package controllers_test

import (
	"fmt"
	"net/http"
	"net/http/httputil"
	"net/url"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/nettest"
)

func TestRegisterMakesTheQueryReadyWithItsQueryID(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	q := h.query(h.namespace(h.tenant("acme")), "orders-per-minute", func(q *v1.StreamQuery) { q.Spec.QueryName = "orders.per_minute" })

	q = h.reason(q, v1.ReasonRegistered)
	row, ok := h.registration(h.tenant("acme"), "orders.per_minute")
	if !ok {
		t.Fatal("no registration row for tenant acme")
	}
	if q.Status.QueryID != row.ID || q.Status.Tenant != h.tenant("acme") || q.Status.RegisteredHash != "h1" {
		t.Fatalf("status queryId=%q tenant=%q registeredHash=%q, want %q, acme, h1", q.Status.QueryID, q.Status.Tenant, q.Status.RegisteredHash, row.ID)
	}
	if row.Source != "orders" || row.Sink != "orders.out" || row.Hash != "h1" {
		t.Fatalf("registration %+v, want source orders, sink orders.out, hash h1", row)
	}
	if q.Status.Lag == nil || *q.Status.Lag != 0 || q.Status.StateRows == nil || *q.Status.StateRows != 0 {
		t.Fatalf("progress lag=%v stateRows=%v, want 0 and 0", q.Status.Lag, q.Status.StateRows)
	}
	h.wantEvent(q, v1.ReasonRegistered, fmt.Sprintf(`query "orders.per_minute" is registered for tenant %q`, h.tenant("acme")))
}

func TestQueryNameDefaultsToTheStreamQueryName(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{})
	if row, ok := h.registration(h.tenant("acme"), "clicks"); !ok || row.ID != q.Status.QueryID {
		t.Fatalf("registration named after metadata.name: %+v, %v; status queryId %q", row, ok, q.Status.QueryID)
	}
}

func TestTenantIsTheNamespaceNameWithoutTheLabelWhenTenancyIsOn(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{})
	ns := h.namespace("")
	h.grant(ns)
	q := h.reason(h.query(ns, "clicks"), v1.ReasonRegistered)
	if q.Status.Tenant != ns {
		t.Fatalf("tenant %q, want the namespace name %q", q.Status.Tenant, ns)
	}
	if _, ok := h.registration(ns, "clicks"); !ok {
		t.Fatalf("no registration under tenant %q", ns)
	}
}

func TestTenancyOffPutsEveryQueryOnTheDefaultTenant(t *testing.T) {
	h := newHarness(t, func(c *config.Config) { c.Auth, c.Tenancy = "off", false })
	h.startOperator(operatorOpts{tenancy: ptr.To(false), noSecret: true})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks"), v1.ReasonRegistered)
	if q.Status.Tenant != v1.DefaultTenant {
		t.Fatalf("tenant %q, want default: with tenancy off the label cannot take effect", q.Status.Tenant)
	}
	if row, ok := h.registration(v1.DefaultTenant, "clicks"); !ok || row.ID != q.Status.QueryID {
		t.Fatalf("registration under default: %+v, %v", row, ok)
	}
}

func TestRelabellingTheNamespaceMovesItsQueriesToTheNewTenant(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.grant(h.tenant("globex"))
	h.startOperator(operatorOpts{})
	ns := h.namespace(h.tenant("acme"))
	q := h.reason(h.query(ns, "clicks"), v1.ReasonRegistered)

	edit(h, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, func(n *corev1.Namespace) { n.Labels[v1.TenantLabel] = h.tenant("globex") })
	q = eventually(h, q, "moved to globex", func(q *v1.StreamQuery) bool { return q.Status.Tenant == h.tenant("globex") })
	if row, ok := h.registration(h.tenant("globex"), "clicks"); !ok || row.ID != q.Status.QueryID {
		t.Fatalf("registration under globex: %+v, %v; status queryId %q", row, ok, q.Status.QueryID)
	}
	h.wantEvent(q, "TenantChanged", fmt.Sprintf(`registration under tenant %q is left as it is`, h.tenant("acme")))
}

func TestChangedHashIsAConfigConflictUnderBlock(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{})
	h.writeState(q.Status.QueryID, "a", "b")

	edit(h, q, func(q *v1.StreamQuery) { q.Spec.ConfigHash = "h2" })
	q = h.reason(q, v1.ReasonConfigConflict)
	if m := message(q.Status.Conditions); !strings.Contains(m, "different config_hash") || !strings.Contains(m, "upgradeMode is Block") {
		t.Fatalf("message %q should carry the broker's error and say the policy is Block", m)
	}
	if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Hash != "h1" {
		t.Fatalf("registered hash %q, want h1 left alone", row.Hash)
	}
	if keys := h.stateKeys(q.Status.QueryID); !slices.Equal(keys, []string{"a", "b"}) {
		t.Fatalf("state %q, want [a b] untouched", keys)
	}
	h.wantEvent(q, v1.ReasonConfigConflict, "different config_hash")
}

func TestQuotaAbsentIsQuotaDeniedUntilATenantQuotaGrantsIt(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{}) // resync a minute: only the TenantQuota watch can retry in time
	q := h.reason(h.query(h.namespace(h.tenant("globex")), "clicks"), v1.ReasonQuotaDenied)
	if m := message(q.Status.Conditions); !strings.Contains(m, fmt.Sprintf(`tenant '%s' has no quota grant`, h.tenant("globex"))) {
		t.Fatalf("message %q should be the broker's reason", m)
	}
	h.wantEvent(q, v1.ReasonQuotaDenied, "no quota grant")

	h.quota(h.tenant("globex"), nil)
	q = h.reason(q, v1.ReasonRegistered)
	if _, ok := h.registration(h.tenant("globex"), "clicks"); !ok {
		t.Fatal("no registration after the grant")
	}
}

func TestQuotaCapDeniesTheNextQuery(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{})
	tq := h.quotaReason(h.quota(h.tenant("initech"), ptr.To[int32](2)), v1.ReasonApplied)
	ns := h.namespace(h.tenant("initech"))
	h.reason(h.query(ns, "q1"), v1.ReasonRegistered)
	h.reason(h.query(ns, "q2"), v1.ReasonRegistered)
	q3 := h.reason(h.query(ns, "q3"), v1.ReasonQuotaDenied)
	if m := message(q3.Status.Conditions); !strings.Contains(m, "reached its quota cap of 2") {
		t.Fatalf("message %q should say the cap is reached", m)
	}

	edit(h, tq, func(tq *v1.TenantQuota) { tq.Spec.MaxQueries = ptr.To[int32](3) })
	h.reason(q3, v1.ReasonRegistered)
}

func TestDuplicateQueryNameTheOlderWinsAndTheYoungerNeverTouchesTheRegistration(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	ns1, ns2 := h.namespace(h.tenant("acme")), h.namespace(h.tenant("acme"))
	shared := func(hash string, more ...func(*v1.StreamQuery)) func(*v1.StreamQuery) {
		return func(q *v1.StreamQuery) {
			q.Spec.QueryName, q.Spec.ConfigHash = "shared", hash
			for _, m := range more {
				m(q)
			}
		}
	}
	older := h.reason(h.query(ns1, "older", shared("h1")), v1.ReasonRegistered)
	h.writeState(older.Status.QueryID, "kept")

	// Wants another hash, a reset and deletion of the registration: it
	// gets none of them.
	younger := h.reason(h.query(ns2, "younger", shared("h2", func(q *v1.StreamQuery) {
		q.Spec.OnConfigChange, q.Spec.DeletionPolicy = v1.OnConfigChangeReset, v1.DeletionPolicyDelete
	})), v1.ReasonDuplicateName)
	if m := message(younger.Status.Conditions); !strings.Contains(m, ns1+"/older") {
		t.Fatalf("message %q should name the older StreamQuery", m)
	}
	if younger.Status.QueryID != "" || controllerutil.ContainsFinalizer(younger, "streams.regent.dev/registration") {
		t.Fatalf("the younger holds queryId %q and finalizers %v; it must hold neither", younger.Status.QueryID, younger.Finalizers)
	}
	h.wantEvent(younger, v1.ReasonDuplicateName, "already declares")
	if row, _ := h.registration(h.tenant("acme"), "shared"); row.Hash != "h1" || row.ID != older.Status.QueryID {
		t.Fatalf("registration %+v changed; want hash h1 and id %s", row, older.Status.QueryID)
	}

	h.delete(younger)
	h.gone(younger)
	if row, ok := h.registration(h.tenant("acme"), "shared"); !ok || row.Hash != "h1" {
		t.Fatalf("deleting the younger touched the registration: %+v, %v", row, ok)
	}
	if keys := h.stateKeys(older.Status.QueryID); !slices.Equal(keys, []string{"kept"}) {
		t.Fatalf("state %q, want [kept]", keys)
	}

	// A later duplicate takes over once the older (Retain) is gone, with
	// the same registration.
	next := h.reason(h.query(ns2, "next", shared("h1")), v1.ReasonDuplicateName)
	h.delete(older)
	next = h.reason(next, v1.ReasonRegistered)
	if next.Status.QueryID != older.Status.QueryID {
		t.Fatalf("successor queryId %q, want the retained %q", next.Status.QueryID, older.Status.QueryID)
	}
}

func TestSameQueryNameUnderTwoTenantsIsTwoQueries(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.grant(h.tenant("globex"))
	h.startOperator(operatorOpts{})
	a := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks"), v1.ReasonRegistered)
	b := h.reason(h.query(h.namespace(h.tenant("globex")), "clicks"), v1.ReasonRegistered)
	if a.Status.QueryID == b.Status.QueryID {
		t.Fatalf("both tenants got query %s", a.Status.QueryID)
	}
}

func TestDeletionPolicyDeleteRemovesTheRegistrationAndItsState(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{}, func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyDelete })
	if !controllerutil.ContainsFinalizer(q, "streams.regent.dev/registration") {
		t.Fatalf("finalizers %v, want the registration finalizer", q.Finalizers)
	}
	id := q.Status.QueryID
	h.writeState(id, "a")

	h.delete(q)
	h.gone(q)
	if _, ok := h.registration(h.tenant("acme"), "clicks"); ok {
		t.Fatal("the registration survived deletionPolicy Delete")
	}
	if n := h.broker.StateRows(t, id); n != 0 {
		t.Fatalf("%d state rows survived", n)
	}
}

func TestDeletionPolicyRetainLeavesTheRegistrationAndItsState(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{})
	if len(q.Finalizers) != 0 {
		t.Fatalf("finalizers %v, want none under Retain", q.Finalizers)
	}
	h.writeState(q.Status.QueryID, "a")

	h.delete(q)
	h.gone(q)
	if row, ok := h.registration(h.tenant("acme"), "clicks"); !ok || row.ID != q.Status.QueryID {
		t.Fatalf("registration %+v, %v; want it retained", row, ok)
	}
	if keys := h.stateKeys(q.Status.QueryID); !slices.Equal(keys, []string{"a"}) {
		t.Fatalf("state %q, want [a] retained", keys)
	}
}

func TestChangingTheDeletionPolicyAddsAndRemovesTheFinalizer(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{})
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyDelete })
	eventually(h, q, "finalized", func(q *v1.StreamQuery) bool { return len(q.Finalizers) == 1 })
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyRetain })
	eventually(h, q, "unfinalized", func(q *v1.StreamQuery) bool { return len(q.Finalizers) == 0 })
}

// A StreamQuery stuck in a conflict is still deleted at once: deletion is
// looked at before registration.
func TestDeletionIsHandledBeforeRegistration(t *testing.T) {
	h, p, _, q := registered(t, operatorOpts{}, func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyDelete })
	edit(h, q, func(q *v1.StreamQuery) { q.Spec.ConfigHash = "h2" })
	h.reason(q, v1.ReasonConfigConflict)
	before := p.requests.Load()

	h.delete(q)
	h.gone(q)
	if _, ok := h.registration(h.tenant("acme"), "clicks"); ok {
		t.Fatal("the registration survived")
	}
	if n := p.requests.Load() - before; n != 0 {
		t.Fatalf("the deletion sent %d registrations to the broker, want none", n)
	}
}

func TestBrokerDownIsBrokerUnavailableThenRecovers(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	port := nettest.Refusing(t) // the broker is down
	h.startOperator(operatorOpts{brokerURL: "http://" + port.Addr})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks"), v1.ReasonBrokerUnavailable)
	if m := message(q.Status.Conditions); !strings.Contains(m, "connection refused") {
		t.Fatalf("message %q should say why", m)
	}
	h.wantEvent(q, v1.ReasonBrokerUnavailable, "connection refused")

	// The broker comes back on the same address.
	l, err := port.Listen()
	if err != nil {
		t.Fatal(err)
	}
	target, _ := url.Parse(h.broker.URL)
	srv := &http.Server{Handler: httputil.NewSingleHostReverseProxy(target)}
	go func() { _ = srv.Serve(l) }()
	t.Cleanup(func() { _ = srv.Close() })
	q = h.reason(q, v1.ReasonRegistered)
	if _, ok := h.registration(h.tenant("acme"), "clicks"); !ok {
		t.Fatal("no registration after recovery")
	}
}

func TestResyncRepairsDrift(t *testing.T) {
	h, _, _, q := registered(t, operatorOpts{resync: 300 * time.Millisecond})

	if err := h.broker.DB.MoveStreamQuery(h.ctx, h.tenant("acme"), "clicks", "elsewhere", nil); err != nil {
		t.Fatal(err)
	}
	brokertest.Eventually(t, wait, func() error {
		if row, _ := h.registration(h.tenant("acme"), "clicks"); row.Source != "orders" || row.Sink != "orders.out" {
			return fmt.Errorf("registration %+v is not repaired", row)
		}
		return nil
	})

	old := q.Status.QueryID
	if _, err := celldb.New(h.broker.Pool).DeleteQuery(h.ctx, h.tenant("acme"), "clicks"); err != nil {
		t.Fatal(err)
	}
	q = eventually(h, q, "registered again", func(q *v1.StreamQuery) bool { return q.Status.QueryID != old })
	if row, ok := h.registration(h.tenant("acme"), "clicks"); !ok || row.ID != q.Status.QueryID {
		t.Fatalf("registration %+v, %v; want the new id %s", row, ok, q.Status.QueryID)
	}
	h.wantEvent(q, "Recreated", "was missing from the broker")
}

// The progress a real worker makes: messages pushed to the source, a pop by
// the query's consumer group, and a cycle that writes state and acks.
func TestProgressIsReadFromTheDatabase(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks-per-minute", func(q *v1.StreamQuery) { q.Spec.SourceQueue = "clicks" }), v1.ReasonRegistered)
	tok := h.token(h.tenant("acme"))

	var items []map[string]any
	for i := range 5 {
		items = append(items, map[string]any{"queue": "clicks", "partition": "p1", "payload": map[string]any{"n": i}})
	}
	if r := h.broker.Do(t, "POST", "/api/v1/push", tok, map[string]any{"items": items}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	eventually(h, q, "lagging by 5", func(q *v1.StreamQuery) bool { return q.Status.Lag != nil && *q.Status.Lag == 5 })

	r := h.broker.Do(t, "GET", "/api/v1/pop/queue/clicks?batch=2&subscriptionMode=all&consumerGroup=streams.clicks-per-minute", tok, nil)
	if r.Status != http.StatusOK {
		t.Fatalf("pop: %d %s", r.Status, r.Body)
	}
	var pop struct {
		LeaseID     string `json:"leaseId"`
		PartitionID string `json:"partitionId"`
		Messages    []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	r.JSON(t, &pop)
	if len(pop.Messages) != 2 {
		t.Fatalf("popped %d messages, want 2", len(pop.Messages))
	}
	r = h.broker.Do(t, "POST", "/streams/v1/cycle", tok, map[string]any{
		"query_id": q.Status.QueryID, "partition_id": pop.PartitionID, "consumer_group": "streams.clicks-per-minute",
		"state_ops": []map[string]any{{"type": "upsert", "key": "k1", "value": map[string]any{"acc": 1}}, {"type": "upsert", "key": "k2", "value": map[string]any{"acc": 1}}},
		"ack":       map[string]any{"transactionId": pop.Messages[1].TransactionID, "leaseId": pop.LeaseID, "status": "completed", "count": 2},
	})
	if r.Status != http.StatusOK || !strings.Contains(string(r.Body), `"success":true`) {
		t.Fatalf("cycle: %d %s", r.Status, r.Body)
	}
	q = eventually(h, q, "caught up with the cycle", func(q *v1.StreamQuery) bool {
		return q.Status.Lag != nil && *q.Status.Lag == 3 && q.Status.StateRows != nil && *q.Status.StateRows == 2 && q.Status.LastCycleTime != nil
	})
	if age := time.Since(q.Status.LastCycleTime.Time); age < -time.Second || age > time.Minute {
		t.Fatalf("lastCycleTime %s is not the cycle's time", q.Status.LastCycleTime)
	}
}

func TestEverySecureBrokerCallCarriesATokenOfTheQueryTenant(t *testing.T) {
	// A broker with auth on refuses a token-less registration, so an
	// operator without the signing secret can only report it.
	h := newHarness(t) // the shared broker has auth on
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{noSecret: true})
	q := h.reason(h.query(h.namespace(h.tenant("acme")), "clicks"), v1.ReasonBrokerUnavailable)
	if m := message(q.Status.Conditions); !strings.Contains(m, "HTTP 401") {
		t.Fatalf("message %q should carry the broker's 401", m)
	}
}

// A duplicate made after the registered query loses even when its namespace
// sorts first, also when both were made within one second (the precision of
// creation times; TestTiesInCreationTimeGoToTheHolder pins that case).
func TestALaterDuplicateLosesEvenWhenItsNamespaceSortsFirst(t *testing.T) {
	h := newHarness(t)
	h.grant(h.tenant("acme"))
	h.startOperator(operatorOpts{})
	ns1, ns2 := h.namespace(h.tenant("acme")), h.namespace(h.tenant("acme"))
	first, second := max(ns1, ns2), min(ns1, ns2)
	named := func(q *v1.StreamQuery) { q.Spec.QueryName = "shared" }
	holder := h.reason(h.query(first, "holder", named), v1.ReasonRegistered)
	late := h.reason(h.query(second, "late", named, func(q *v1.StreamQuery) { q.Spec.ConfigHash = "h2" }), v1.ReasonDuplicateName)
	if row, _ := h.registration(h.tenant("acme"), "shared"); row.ID != holder.Status.QueryID || row.Hash != "h1" {
		t.Fatalf("registration %+v was touched by the late duplicate", row)
	}
	if ok, reason := ready(h.reason(holder, v1.ReasonRegistered).Status.Conditions); !ok {
		t.Fatalf("the holder became %s", reason)
	}
	h.noEvent(late, v1.ReasonRegistered)
}
