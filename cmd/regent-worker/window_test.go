package main

import (
	"encoding/json"
	"testing"
)

func events(t *testing.T, evs ...string) []json.RawMessage {
	t.Helper()
	out := make([]json.RawMessage, len(evs))
	for i, e := range evs {
		out[i] = json.RawMessage(e)
	}
	return out
}

func TestFoldCountsPerKeyInOneMinuteWindowsAndClosesThemAtTheWatermark(t *testing.T) {
	s, err := readShard(nil)
	if err != nil {
		t.Fatal(err)
	}
	late, bad := s.fold(events(t,
		`{"key": "a", "ts": 60000}`, `{"key": "a", "ts": 119999}`, `{"key": "b", "ts": 61000}`,
		`{"key": "a", "ts": 120000}`, `{"nokey": 1}`, `{"key": "a"}`))
	if late != 0 || bad != 2 || s.watermark != 120000 {
		t.Fatalf("late %d bad %d watermark %d, want 0, 2, 120000", late, bad, s.watermark)
	}
	ops, emits := s.commit(s.watermark, "q", "p", "sink", "p0")
	if len(emits) != 2 || emits[0].Payload.Key != "a" || emits[0].Payload.Count != 2 || emits[1].Payload.Count != 1 ||
		emits[0].Payload.WindowStart != "1970-01-01T00:01:00.000Z" || emits[0].Partition != "p0" {
		t.Fatalf("emits %+v, want a=2 and b=1 for the window at 00:01", emits)
	}
	if emits[0].TransactionID != "tumb:60|q|p|60000|a" {
		t.Fatalf("transaction id %q is not the deterministic one", emits[0].TransactionID)
	}
	if len(ops) != 3 || ops[0].Type != "delete" || ops[1].Type != "delete" || ops[2].Type != "upsert" ||
		ops[2].Key != "tumb:60\x1f1970-01-01T00:02:00.000Z\x1fa" {
		t.Fatalf("ops %+v, want two deletes and the upsert of the open window", ops)
	}
}

func TestFoldDropsEventsOfClosedWindows(t *testing.T) {
	s, err := readShard([]stateRow{{Key: watermarkKey, Value: json.RawMessage(`{"watermark": 180000}`)}})
	if err != nil {
		t.Fatal(err)
	}
	late, _ := s.fold(events(t, `{"key": "a", "ts": 100000}`, `{"key": "a", "ts": 120000}`, `{"key": "a", "ts": 190000}`))
	if late != 2 {
		t.Fatalf("%d late events, want the two in windows ending at or before the watermark", late)
	}
}
