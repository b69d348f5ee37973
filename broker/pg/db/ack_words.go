package db

import "strings"

// The statuses an acknowledgement asks of a cursor, the only ones the
// database sees (queen.ack, queen.ack_verdict; the cycle gets a success
// flag instead).
const (
	AckCompleted = "completed"
	AckFailed    = "failed"
	AckDLQ       = "dlq"
	AckRetry     = "retry"
)

// ackWords is the one vocabulary of the status a client sends with an ack,
// in the order the queue's refusal lists them. Each word asks for a status;
// the words differ by route, and the wire keeps them apart:
//   - the queue's ack routes (POST /api/v1/ack, /api/v1/ack/batch and the
//     ack operations of /api/v1/transaction, queue-api.md) take the words
//     marked queue, default to completed, and answer 400 to any other word;
//   - the cycle's source ack (POST /streams/v1/cycle, streams-routes.md)
//     counts every word that asks for completed as success, and no status
//     too; anything else, a misspelling included, is a nack.
var ackWords = []struct {
	word, status string
	queue        bool
}{
	{"completed", AckCompleted, true},
	{"success", AckCompleted, true},
	{"acked", AckCompleted, false},
	{"ok", AckCompleted, false},
	{"failed", AckFailed, true},
	{"dlq", AckDLQ, true},
	{"retry", AckRetry, true},
}

// QueueAckStatus returns the status that word asks for on the queue's ack
// routes, and false when those routes do not take it.
func QueueAckStatus(word string) (string, bool) {
	for _, w := range ackWords {
		if w.queue && w.word == word {
			return w.status, true
		}
	}
	return "", false
}

// QueueAckWords lists the words the queue's ack routes take, for their
// refusal: "completed, success, failed, dlq or retry".
var QueueAckWords = func() string {
	var words []string
	for _, w := range ackWords {
		if w.queue {
			words = append(words, w.word)
		}
	}
	return strings.Join(words[:len(words)-1], ", ") + " or " + words[len(words)-1]
}()

// CycleAckOK reports whether a cycle's ack status counts as success: a word
// that asks for completed, or no status at all.
func CycleAckOK(word *string) bool {
	if word == nil {
		return true
	}
	for _, w := range ackWords {
		if w.word == *word {
			return w.status == AckCompleted
		}
	}
	return false
}
