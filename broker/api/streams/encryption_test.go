package streams_test

import (
	"strings"
	"testing"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestCycleSealsSinkPayloadsOfAnEncryptedQueueAndPopOpensThem(t *testing.T) {
	t.Parallel()
	key, _ := brokertest.KeyFile(t)
	f := newFixture(t, func(c *config.Config) { c.EncryptionKey = key })
	wantStatus(t, post(t, f.b, "/api/v1/configure", map[string]any{"queue": f.out, "options": map[string]any{"encryptionEnabled": true}}), 200)
	committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": f.out, "payload": map[string]any{"n": 4111}}}}))
	frames := f.b.Frames(t, f.b.Tenant, f.out)
	if len(frames) != 1 || !frames[0].Sealed() || strings.Contains(string(frames[0].Payload), "4111") {
		t.Fatalf("stored sink frame %+v, want it sealed", frames)
	}
	if got := pop(t, f.b, f.out, 1, "").Ns(); len(got) != 1 || got[0] != 4111 {
		t.Fatalf("pop opened %v, want [4111]", got)
	}
}

func TestCycleSinkSealingFailureStoresPlaintextAndTheCycleCommits(t *testing.T) {
	t.Parallel()
	f := newFixture(t) // no key: sealing fails
	// The count is the whole broker's: no other test of it fails to seal.
	before := f.b.Metric(t, "regent_encryption_failures_total")
	wantStatus(t, post(t, f.b, "/api/v1/configure", map[string]any{"queue": f.out, "options": map[string]any{"encryptionEnabled": true}}), 200)
	committed(t, f.b, f.body(map[string]any{"push_items": []any{map[string]any{"queue": f.out, "payload": 7}}}))
	frames := f.b.Frames(t, f.b.Tenant, f.out)
	if len(frames) != 1 || frames[0].Sealed() || string(frames[0].Payload) != "7" {
		t.Fatalf("stored sink frame %+v, want plaintext 7", frames)
	}
	if n := f.b.Metric(t, "regent_encryption_failures_total"); n != before+1 {
		t.Fatalf("%v sealing failures counted, want %v", n, before+1)
	}
}

func TestCycleWithTenancyReadsEncryptionFromTheRequestTenantsQueue(t *testing.T) {
	t.Parallel()
	key, _ := brokertest.KeyFile(t)
	x := twoTenants(t, func(c *config.Config) { c.EncryptionKey = key })
	wantStatus(t, x.b.Do(t, "POST", "/api/v1/configure", x.red, map[string]any{"queue": x.b.Q("out"), "options": map[string]any{"encryptionEnabled": true}}), 200)
	q, p := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.blue, "src")
	r := x.b.Do(t, "POST", "/streams/v1/cycle", x.blue, map[string]any{"query_id": q, "partition_id": p,
		"push_items": []any{map[string]any{"queue": x.b.Q("out"), "payload": 1}}})
	wantStatus(t, r, 200)
	if frames := x.b.Frames(t, x.blueTenant, x.b.Q("out")); len(frames) != 1 || frames[0].Sealed() {
		t.Fatalf("blue's sink frame %+v was sealed by red's same-named queue's option", frames)
	}
}
