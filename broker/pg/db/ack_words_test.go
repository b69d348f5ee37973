package db

import "testing"

// The queue's ack routes take five words and refuse the rest, naming them
// as queue-api.md does.
func TestQueueAckRoutesTakeTheirFiveWords(t *testing.T) {
	for word, want := range map[string]string{
		"completed": AckCompleted, "success": AckCompleted, "failed": AckFailed, "dlq": AckDLQ, "retry": AckRetry,
	} {
		if got, ok := QueueAckStatus(word); !ok || got != want {
			t.Errorf("QueueAckStatus(%q) = %q, %v; want %q", word, got, ok, want)
		}
	}
	for _, word := range []string{"acked", "ok", "Completed", ""} {
		if got, ok := QueueAckStatus(word); ok {
			t.Errorf("QueueAckStatus(%q) = %q; want a refusal", word, got)
		}
	}
	if QueueAckWords != "completed, success, failed, dlq or retry" {
		t.Errorf("QueueAckWords = %q", QueueAckWords)
	}
}

// The cycle counts as success every word that asks for completed, and no
// status; anything else is a nack (streams-routes.md).
func TestCycleAckCountsTheSuccessWordsAndNothingElse(t *testing.T) {
	if !CycleAckOK(nil) {
		t.Error("CycleAckOK(no status) = false")
	}
	for _, w := range []string{"completed", "success", "acked", "ok"} {
		if !CycleAckOK(&w) {
			t.Errorf("CycleAckOK(%q) = false", w)
		}
	}
	for _, w := range []string{"failed", "retry", "dlq", "okay", "COMPLETED", ""} {
		if CycleAckOK(&w) {
			t.Errorf("CycleAckOK(%q) = true", w)
		}
	}
}
