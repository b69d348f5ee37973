package quota

import (
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// quotasWith is a Quotas that has read one tenant with the given limits
// and holdings, without a database.
func quotasWith(name string, l *limits) *Quotas {
	q := &Quotas{refusals: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "t"}, []string{"tenant", "quota"}), kick: make(chan struct{}, 1)}
	t := &tenant{name: name}
	t.limits.Store(l)
	q.tenants.Store(&map[string]*tenant{name: t})
	return q
}

// A push refused by its bytes spends nothing of its messages: a refused
// request takes no share of any rate.
func TestAPushRefusedByOneRateSpendsNothingOfAnother(t *testing.T) {
	msgs := &bucket{kind: "push_messages", rate: 100, burst: 100, tokens: 10}
	bytes := &bucket{kind: "push_bytes", rate: 100, burst: 100, tokens: 5}
	q := quotasWith("acme", &limits{pushMessages: msgs, pushBytes: bytes, maxStored: -1})
	err := q.AdmitPush("acme", 3, 10)
	if r, ok := err.(*Refusal); !ok || r.Quota != PushBytes {
		t.Fatalf("AdmitPush = %v, want a refusal by %s", err, PushBytes)
	}
	if msgs.tokens != 10 || bytes.tokens != 5 {
		t.Fatalf("holdings %d messages, %d bytes after the refusal, want 10 and 5", msgs.tokens, bytes.tokens)
	}
	if err := q.AdmitPush("acme", 3, 5); err != nil {
		t.Fatalf("a push the holdings cover: %v", err)
	}
	if msgs.tokens != 7 || bytes.tokens != 0 {
		t.Fatalf("holdings %d messages, %d bytes after the push, want 7 and 0", msgs.tokens, bytes.tokens)
	}
}

// A tenant without a row, and the default tenant, which never has one in
// the map, cost a lookup and no allocation.
func TestTheQuotaAbsentPathAllocatesNothing(t *testing.T) {
	q := quotasWith("acme", &limits{maxStored: -1})
	if n := testing.AllocsPerRun(100, func() {
		if q.AdmitPush("default", 10, 1000) != nil || q.AdmitPop("other") != nil {
			t.Fatal("refused a tenant without a quota")
		}
		q.Popped("default", 10)
	}); n != 0 {
		t.Fatalf("%.1f allocations per push and pop without a quota, want 0", n)
	}
}

// BenchmarkAdmitPush is the in-memory part of the checks a push pays: for a
// tenant without a quota, and for one with every limit whose holdings
// cover the push (the leases are not timed; they run in the background).
func BenchmarkAdmitPush(b *testing.B) {
	huge := int64(1) << 60
	for _, v := range []struct {
		name   string
		limits *limits
	}{
		{"quota=absent", &limits{maxStored: -1}},
		{"quota=present", &limits{
			pushMessages: &bucket{kind: "push_messages", rate: huge, burst: huge, tokens: huge},
			pushBytes:    &bucket{kind: "push_bytes", rate: huge, burst: huge, tokens: huge},
			maxStored:    huge,
		}},
	} {
		b.Run(v.name, func(b *testing.B) {
			q := quotasWith("acme", v.limits)
			name := "acme"
			if v.name == "quota=absent" {
				name = "other"
			}
			for b.Loop() {
				if err := q.AdmitPush(name, 10, 1000); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
