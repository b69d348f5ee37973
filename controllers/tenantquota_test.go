package controllers_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/test/brokertest"
)

// quotaRow is the tenant's grant row: whether it exists, and its values.
type quotaRow struct {
	Exists  bool
	Enabled bool
	Max     *int32
}

func (h *harness) quotaRow(tenant string) quotaRow {
	h.t.Helper()
	q, err := h.broker.DB.Quota(h.ctx, tenant)
	if err != nil {
		h.t.Fatal(err)
	}
	return quotaRow{Exists: q.Exists, Enabled: q.Enabled, Max: q.MaxQueries}
}

// wantQuotaRow polls until the grant row is want.
func (h *harness) wantQuotaRow(tenant string, want quotaRow) {
	h.t.Helper()
	brokertest.Eventually(h.t, wait, func() error {
		if got := h.quotaRow(tenant); got.Exists != want.Exists || got.Enabled != want.Enabled || !ptr.Equal(got.Max, want.Max) {
			return fmt.Errorf("quota row of %q is %+v (max %v), want %+v (max %v)", tenant, got, ptr.Deref(got.Max, -1), want, ptr.Deref(want.Max, -1))
		}
		return nil
	})
}

func TestTenantQuotaWritesTheRowAndCountsRegisteredQueries(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	tq := h.quotaReason(h.quota(h.tenant("umbrella"), ptr.To[int32](5)), v1.ReasonApplied)
	h.wantQuotaRow(h.tenant("umbrella"), quotaRow{Exists: true, Enabled: true, Max: ptr.To[int32](5)})
	if m := message(tq.Status.Conditions); !strings.Contains(m, "up to 5 queries") {
		t.Fatalf("message %q", m)
	}
	if !controllerutil.ContainsFinalizer(tq, "streams.regent.dev/quota") {
		t.Fatalf("finalizers %v, want the quota finalizer", tq.Finalizers)
	}
	h.wantEvent(tq, v1.ReasonApplied, "up to 5 queries")

	edit(h, tq, func(tq *v1.TenantQuota) { tq.Spec.Enabled, tq.Spec.MaxQueries = ptr.To(false), nil })
	tq = h.quotaReason(tq, v1.ReasonApplied)
	h.wantQuotaRow(h.tenant("umbrella"), quotaRow{Exists: true, Enabled: false})
	if m := message(tq.Status.Conditions); !strings.Contains(m, "disabled") {
		t.Fatalf("message %q should say the grant is disabled", m)
	}

	h.reason(h.query(h.namespace(h.tenant("umbrella")), "clicks"), v1.ReasonQuotaDenied)
	if _, err := h.broker.DB.PutStreamQuery(h.ctx, h.tenant("umbrella"), "direct", "orders"); err != nil {
		t.Fatal(err)
	}
	eventually(h, tq, "counting one query", func(tq *v1.TenantQuota) bool {
		return tq.Status.RegisteredQueries != nil && *tq.Status.RegisteredQueries == 1
	})
}

func TestDeletingTheTenantQuotaRemovesTheRowAndKeepsQueriesReady(t *testing.T) {
	h := newHarness(t)
	p := h.proxy()
	h.startOperator(operatorOpts{brokerURL: p.URL, resync: 300 * time.Millisecond})
	tq := h.quotaReason(h.quota(h.tenant("hooli"), nil), v1.ReasonApplied)
	ns := h.namespace(h.tenant("hooli"))
	running := h.reason(h.query(ns, "running"), v1.ReasonRegistered)

	h.delete(tq)
	h.gone(tq)
	h.wantQuotaRow(h.tenant("hooli"), quotaRow{})
	h.wantEvent(tq, "Deleted", "new query names are refused")

	denied := h.reason(h.query(ns, "new"), v1.ReasonQuotaDenied)
	if m := message(denied.Status.Conditions); !strings.Contains(m, "no quota grant") {
		t.Fatalf("message %q", m)
	}
	// Several resyncs re-register the running query without the grant.
	n := p.requests.Load() + 6
	brokertest.Eventually(t, wait, func() error {
		if got := p.requests.Load(); got < n {
			return fmt.Errorf("the operator re-registered %d times of 6", 6-(n-got))
		}
		return nil
	})
	if ok, reason := ready(h.reason(running, v1.ReasonRegistered).Status.Conditions); !ok {
		t.Fatalf("the running query became %s", reason)
	}
}

func TestDuplicateTenantQuotaIsAConflictAndNeverWritesOrDeletesTheRow(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{})
	older := h.quotaReason(h.quota(h.tenant("vandelay"), ptr.To[int32](5)), v1.ReasonApplied)
	younger := h.quotaReason(h.quota(h.tenant("vandelay"), ptr.To[int32](1)), v1.ReasonConflict)
	if m := message(younger.Status.Conditions); !strings.Contains(m, older.Name) {
		t.Fatalf("message %q should name the older TenantQuota %s", m, older.Name)
	}
	if len(younger.Finalizers) != 0 {
		t.Fatalf("the younger holds finalizers %v", younger.Finalizers)
	}
	h.wantEvent(younger, v1.ReasonConflict, "already grants tenant")
	h.wantQuotaRow(h.tenant("vandelay"), quotaRow{Exists: true, Enabled: true, Max: ptr.To[int32](5)})

	h.delete(younger)
	h.gone(younger)
	h.wantQuotaRow(h.tenant("vandelay"), quotaRow{Exists: true, Enabled: true, Max: ptr.To[int32](5)})

	// Once the older is gone, the next in line owns the tenant.
	next := h.quotaReason(h.quota(h.tenant("vandelay"), ptr.To[int32](2)), v1.ReasonConflict)
	h.delete(older)
	h.gone(older)
	h.quotaReason(next, v1.ReasonApplied)
	h.wantQuotaRow(h.tenant("vandelay"), quotaRow{Exists: true, Enabled: true, Max: ptr.To[int32](2)})
}

func TestTenantQuotaForTheDefaultTenantIsAcceptedAndNotSubjectToQuotas(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{})
	tq := h.quotaReason(h.quota(v1.DefaultTenant, ptr.To[int32](0)), v1.ReasonApplied)
	if ok, _ := ready(tq.Status.Conditions); !ok {
		t.Fatal("a quota for default must be Ready")
	}
	if m := message(tq.Status.Conditions); !strings.Contains(m, "the default tenant is not subject to quotas") {
		t.Fatalf("message %q", m)
	}
	h.wantQuotaRow(v1.DefaultTenant, quotaRow{})
	// maxQueries 0 would refuse everything; the default tenant registers anyway.
	h.reason(h.query(h.namespace(v1.DefaultTenant), "clicks"), v1.ReasonRegistered)
	h.delete(tq)
	h.gone(tq)
}

func TestMetricsCountRegistrationsAndQuotas(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	denied := metricValue(t, "regent_operator_registrations_total", "result", "denied")
	registered := metricValue(t, "regent_operator_registrations_total", "result", "registered")
	q := h.reason(h.query(h.namespace("metrics-tenant"), "clicks"), v1.ReasonQuotaDenied)
	h.quotaReason(h.quota("metrics-tenant", ptr.To[int32](7)), v1.ReasonApplied)
	h.reason(q, v1.ReasonRegistered)

	if v := metricValue(t, "regent_operator_registrations_total", "result", "denied"); v < denied+1 {
		t.Fatalf("denied registrations %v, want at least %v", v, denied+1)
	}
	if v := metricValue(t, "regent_operator_registrations_total", "result", "registered"); v < registered+1 {
		t.Fatalf("registered registrations %v, want at least %v", v, registered+1)
	}
	if v := metricValue(t, "regent_tenantquota_max_queries", "tenant", "metrics-tenant"); v != 7 {
		t.Fatalf("regent_tenantquota_max_queries = %v, want 7", v)
	}
	brokertest.Eventually(t, wait, func() error {
		if v := metricValue(t, "regent_tenantquota_registered_queries", "tenant", "metrics-tenant"); v != 1 {
			return fmt.Errorf("regent_tenantquota_registered_queries is %v, want 1", v)
		}
		return nil
	})
}

// metricValue reads one series from controller-runtime's registry, which
// the operator's metrics endpoint serves; a missing series reads as 0.
func metricValue(t *testing.T, name, label, value string) float64 {
	t.Helper()
	families, err := metrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.Metric {
			if hasLabel(m, label, value) {
				if m.Counter != nil {
					return m.Counter.GetValue()
				}
				return m.Gauge.GetValue()
			}
		}
	}
	return 0
}

func TestTenantQuotaCountsAQueryAsSoonAsItIsRegisteredOrDeleted(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{}) // resync a minute: only the watch can count in time
	tq := h.quotaReason(h.quota(h.tenant("hooli"), ptr.To[int32](5)), v1.ReasonApplied)
	counting := func(n int64) func(*v1.TenantQuota) bool {
		return func(tq *v1.TenantQuota) bool {
			return tq.Status.RegisteredQueries != nil && *tq.Status.RegisteredQueries == n
		}
	}
	eventually(h, tq, "counting no query", counting(0))
	q := h.reason(h.query(h.namespace(h.tenant("hooli")), "clicks", func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyDelete }), v1.ReasonRegistered)
	eventually(h, tq, "counting the registered query", counting(1))
	h.delete(q)
	h.gone(q)
	eventually(h, tq, "counting no query once it is deleted", counting(0))
}

func hasLabel(m *dto.Metric, name, value string) bool {
	for _, l := range m.Label {
		if l.GetName() == name && l.GetValue() == value {
			return true
		}
	}
	return false
}

func TestDeletingAQueryFreesItsSlotForADeniedOne(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{}) // resync a minute: only the watch can retry in time
	h.quotaReason(h.quota("pied-piper", ptr.To[int32](1)), v1.ReasonApplied)
	ns := h.namespace("pied-piper")
	first := h.reason(h.query(ns, "first", func(q *v1.StreamQuery) { q.Spec.DeletionPolicy = v1.DeletionPolicyDelete }), v1.ReasonRegistered)
	second := h.reason(h.query(ns, "second"), v1.ReasonQuotaDenied)

	h.delete(first)
	h.gone(first)
	h.reason(second, v1.ReasonRegistered)
}

// pushAs pushes n messages to queue as tenant and returns the status.
func (h *harness) pushAs(tenant, queue string, n int) int {
	h.t.Helper()
	items := make([]map[string]any, n)
	for i := range items {
		items[i] = map[string]any{"queue": queue, "payload": i}
	}
	return h.broker.Do(h.t, "POST", "/api/v1/push", h.token(tenant), map[string]any{"items": items}).Status
}

func TestTenantQuotaWritesItsLimitsAndShowsUsageInStatus(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	tq := h.quotaReason(h.quota(h.tenant("initech"), ptr.To[int32](5), func(tq *v1.TenantQuota) {
		tq.Spec.MaxQueues = ptr.To[int32](10)
		tq.Spec.Push = &v1.PushQuota{MessagesPerSecond: ptr.To[int64](1000), MessagesBurst: ptr.To[int64](2000), BytesPerSecond: ptr.To[int64](1 << 20)}
		tq.Spec.Pop = &v1.PopQuota{MessagesPerSecond: ptr.To[int64](500)}
		tq.Spec.MaxStoredBytes, tq.Spec.MaxStateRows = ptr.To[int64](1<<30), ptr.To[int64](100)
	}), v1.ReasonApplied)
	quota, err := h.broker.DB.Quota(h.ctx, h.tenant("initech"))
	if err != nil {
		t.Fatal(err)
	}
	row := []*int64{quota.MaxQueues, quota.PushMessagesPerSecond, quota.PushMessagesBurst, quota.PushBytesPerSecond,
		quota.PushBytesBurst, quota.PopMessagesPerSecond, quota.MaxStoredBytes, quota.MaxStateRows}
	want := []*int64{ptr.To[int64](10), ptr.To[int64](1000), ptr.To[int64](2000), ptr.To[int64](1 << 20), nil, ptr.To[int64](500), ptr.To[int64](1 << 30), ptr.To[int64](100)}
	for i := range want {
		if !ptr.Equal(row[i], want[i]) {
			t.Fatalf("quota row column %d is %v, want %v", i, ptr.Deref(row[i], -1), ptr.Deref(want[i], -1))
		}
	}

	// The brokers count a tenant's pushes once they have read its row,
	// which the pushes before cannot know.
	pushed := 0
	eventually(h, tq, "showing pushes", func(tq *v1.TenantQuota) bool {
		if h.pushAs(h.tenant("initech"), "orders", 3) == 201 {
			pushed += 3
		}
		return tq.Status.Usage != nil && tq.Status.Usage.PushedLastMinute > 0
	})
	if h.pushAs(h.tenant("initech"), "payments", 2) != 201 {
		t.Fatal("push to a second queue refused")
	}
	id, err := h.broker.DB.PutStreamQuery(h.ctx, h.tenant("initech"), "q", "orders")
	if err != nil {
		t.Fatal(err)
	}
	if err := h.broker.DB.PutStateRows(h.ctx, id, 7); err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, queue := range []string{"orders", "payments"} {
		sizes, err := h.broker.DB.SegmentSizes(h.ctx, h.tenant("initech"), queue)
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range sizes {
			stored += n
		}
	}
	tq = eventually(h, tq, "showing the usage", func(tq *v1.TenantQuota) bool {
		u := tq.Status.Usage
		return u != nil && u.Queues == 2 && u.Queries == 1 && u.StateRows == 7 && u.StoredBytes == stored &&
			u.PushedLastMinute >= 2 && u.PushedLastMinute <= int64(pushed+2) && !u.RefreshedAt.IsZero()
	})
	if c := meta.FindStatusCondition(tq.Status.Conditions, v1.ConditionQuotaExceeded); c == nil || c.Status != metav1.ConditionFalse || c.Reason != v1.ReasonWithinLimits {
		t.Fatalf("QuotaExceeded is %+v, want False with reason WithinLimits", c)
	}
}

func TestTenantQuotaExceededIsTrueWhileALimitRefusesWithEventsAsItStartsAndStops(t *testing.T) {
	h := newHarness(t)
	h.startOperator(operatorOpts{resync: 300 * time.Millisecond})
	tq := h.quotaReason(h.quota(h.tenant("globex"), nil, func(tq *v1.TenantQuota) {
		tq.Spec.Push = &v1.PushQuota{MessagesPerSecond: ptr.To[int64](1)}
	}), v1.ReasonApplied)
	exceeded := func(tq *v1.TenantQuota) *metav1.Condition {
		return meta.FindStatusCondition(tq.Status.Conditions, v1.ConditionQuotaExceeded)
	}
	// Two items pass a burst of one never.
	tq = eventually(h, tq, "QuotaExceeded", func(tq *v1.TenantQuota) bool {
		h.pushAs(h.tenant("globex"), "orders", 2)
		c := exceeded(tq)
		return c != nil && c.Status == metav1.ConditionTrue
	})
	if c := exceeded(tq); c.Reason != v1.ReasonRefusing || !strings.Contains(c.Message, "push.messagesPerSecond") {
		t.Fatalf("QuotaExceeded %+v, want reason Refusing naming push.messagesPerSecond", c)
	}
	h.wantEvent(tq, v1.ConditionQuotaExceeded, "push.messagesPerSecond")
	// No more refusals: the condition clears within a refresh and 5 s.
	tq = eventually(h, tq, "within its limits", func(tq *v1.TenantQuota) bool {
		c := exceeded(tq)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == v1.ReasonWithinLimits
	})
	h.wantEvent(tq, v1.ReasonWithinLimits, "no limit refused")
}

func TestTenantQuotaRefusesABurstBelowItsRate(t *testing.T) {
	h := newHarness(t)
	for name, push := range map[string]*v1.PushQuota{
		"messagesBurst must be at least messagesPerSecond": {MessagesPerSecond: ptr.To[int64](10), MessagesBurst: ptr.To[int64](5)},
		"bytesBurst needs bytesPerSecond":                  {BytesBurst: ptr.To[int64](5)},
	} {
		tq := &v1.TenantQuota{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", h.id, seq.Add(1))},
			Spec:       v1.TenantQuotaSpec{Tenant: "soylent", Push: push},
		}
		if err := h.k8s.Create(h.ctx, tq); err == nil || !strings.Contains(err.Error(), name) {
			t.Fatalf("creating a TenantQuota with push %+v: %v, want a refusal saying %q", push, err, name)
		}
	}
	tq := &v1.TenantQuota{
		ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("%s-%d", h.id, seq.Add(1))},
		Spec:       v1.TenantQuotaSpec{Tenant: "soylent", MaxStoredBytes: ptr.To[int64](-1)},
	}
	if err := h.k8s.Create(h.ctx, tq); err == nil {
		t.Fatal("a negative maxStoredBytes was accepted")
	}
}
