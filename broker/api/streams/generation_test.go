package streams_test

import (
	"encoding/json"
	"strings"
	"testing"
)

// Upgrades never mix fold shapes: a worker's cycles carry the reset
// generation its registration answered (in the Regent-Reset-Generation
// header), and once a reset (or a restore)
// has moved the query's, the broker refuses them with the registration's
// 409, nothing written.
func TestACycleOfAWorkerOfAnOlderResetGenerationIsRefusedWith409(t *testing.T) {
	f := newFixture(t)
	old := register(t, f.b, "q", "src", "out", "h", false)
	if old.Generation != "0" {
		t.Fatalf("a new query's registration answered reset generation %q, want 0", old.Generation)
	}
	f.b.PushN(t, f.src, "", 0, 3)
	p := pop(t, f.b, f.src, 3, "consumerGroup=streams.q")

	// The upgrade: a new hash, registered with reset.
	next := register(t, f.b, "q", "src", "out", "h2", true)
	if next.Generation != "1" {
		t.Fatalf("a reset registration answered reset generation %q, want 1", next.Generation)
	}
	body := f.body(map[string]any{"consumer_group": "streams.q", "reset_generation": 0,
		"state_ops": []map[string]any{{"type": "upsert", "key": "w", "value": map[string]any{"sum": 3}}},
		"ack":       map[string]any{"leaseId": p.LeaseID, "count": 3}})
	r := post(t, f.b, "/streams/v1/cycle", body)
	wantStatus(t, r, 409)
	var a struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	if err := json.Unmarshal(r.Body, &a); err != nil || a.Success || !strings.Contains(a.Error, "stale generation") {
		t.Fatalf("409 body %s, want success false and an error saying stale generation", r.Body)
	}
	if s := f.state(t); len(s) != 0 {
		t.Fatalf("the refused cycle wrote state %v", s)
	}

	// The new generation's worker commits the same cycle; a worker that
	// sends no generation is not checked.
	body["reset_generation"] = 1
	committed(t, f.b, body)
	f.b.PushN(t, f.src, "", 3, 1)
	p = pop(t, f.b, f.src, 1, "consumerGroup=streams.q")
	delete(body, "reset_generation")
	body["ack"] = map[string]any{"leaseId": p.LeaseID, "count": 1}
	committed(t, f.b, body)
}

func TestAResetGenerationThatIsNotANonNegativeNumberIs400(t *testing.T) {
	f := newFixture(t)
	for _, g := range []any{-1, "1", 1.5} {
		r := post(t, f.b, "/streams/v1/cycle", f.body(map[string]any{"reset_generation": g}))
		wantStatus(t, r, 400)
		if !strings.Contains(string(r.Body), "reset_generation") {
			t.Fatalf("reset_generation %v: 400 body %s does not name the field", g, r.Body)
		}
	}
}
