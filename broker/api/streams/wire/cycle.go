package wire

import (
	"encoding/json"
	"time"

	"github.com/google/uuid"
)

// CycleRequest is the body of POST /streams/v1/cycle, as Queen's clients
// send it.
type CycleRequest struct {
	QueryID       string `json:"query_id"`
	PartitionID   string `json:"partition_id"`
	ConsumerGroup string `json:"consumer_group"`
	// StateOps stays raw: the broker reads it element by element, so that
	// an element that breaks the rules fails the cycle by the rules
	// instead of the whole body as a 400.
	StateOps  json.RawMessage `json:"state_ops"`
	PushItems []PushItem      `json:"push_items"`
	// Ack is the source ack; nil (null) is an idle flush.
	Ack          *CycleAck `json:"ack"`
	ReleaseLease *bool     `json:"release_lease,omitempty"`
	// ResetGeneration is the reset generation the worker's registration
	// answered (ResetGenerationHeader): with it, the cycle is refused (409)
	// once a reset or a restore has moved the query's. Null checks
	// nothing.
	ResetGeneration *int64 `json:"reset_generation"`
	// TableRows is Regent's extension for a query with a table sink
	// (SinkTableHeader): a JSON array of objects, each a row of column
	// names and values, which the committed cycle writes to the query's
	// table. Stock clients never send it.
	TableRows json.RawMessage `json:"table_rows,omitempty"`
	// NextBatch (Regent's, for its worker) asks the broker to claim the
	// source partition's next batch of at most this many messages in the
	// cycle's transaction, once the ack committed, under a new lease: the
	// answer's Next. Only with a success ack of the whole batch.
	NextBatch *int `json:"next_batch,omitempty"`
}

// PushItem is a sink message of a cycle. The fields a sender leaves empty
// are left out of what it sends.
type PushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	Data          json.RawMessage `json:"data,omitempty"`
	MessageID     string          `json:"messageId,omitempty"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId,omitempty"`
}

// CycleAck is a cycle's source ack.
type CycleAck struct {
	// TransactionID is accepted as the SDKs send it, and not used: the
	// lease names the batch an ack covers.
	TransactionID string  `json:"transactionId"`
	LeaseID       string  `json:"leaseId"`
	Status        *string `json:"status"`
	Count         *int64  `json:"count"`
}

// CycleResponse is the broker's answer to a cycle. A cycle the rules
// refuse is Success false with the Error, and status 200 (409 for a stale
// reset generation).
type CycleResponse struct {
	Success bool   `json:"success"`
	Error   string `json:"error,omitempty"`
	// Deferred, on an idle flush the rules deferred (success, nothing
	// applied), says why.
	Deferred        string       `json:"deferred,omitempty"`
	QueryID         uuid.UUID    `json:"query_id"`
	PartitionID     uuid.UUID    `json:"partition_id"`
	QueueName       *string      `json:"queueName"`
	StateOpsApplied int32        `json:"state_ops_applied"`
	PushResults     []PushResult `json:"push_results"`
	AckResult       *AckResult   `json:"ack_result"`
	// With next_batch: StateUpdatedAt is the updated_at of every state row
	// the cycle wrote (as state/get returns it), and Next the partition's
	// next batch, a pop's answer; null when the partition had none, and
	// the lease was released (AckResult.LeaseReleased). The broker writes
	// them by hand, after the fields above.
	StateUpdatedAt string `json:"state_updated_at,omitempty"`
	Next           *Batch `json:"next,omitempty"`
}

// Batch is a pop's answer, with the fields a worker reads.
type Batch struct {
	PartitionID string    `json:"partitionId"`
	Partition   string    `json:"partition"`
	LeaseID     string    `json:"leaseId"`
	Messages    []Message `json:"messages"`
}

// Message is a message of a pop's answer, with the fields a worker reads.
type Message struct {
	TransactionID string          `json:"transactionId"`
	Data          json.RawMessage `json:"data"`
	CreatedAt     time.Time       `json:"createdAt"`
}

// PushResult answers one push item, in item order. A duplicate names the
// message already stored under its transaction id and has no offset.
type PushResult struct {
	Queue         string     `json:"queue"`
	Partition     string     `json:"partition,omitempty"`
	Status        string     `json:"status"` // queued, duplicate, or skipped (no queue)
	BaseOffset    *int64     `json:"baseOffset,omitempty"`
	MessageID     *uuid.UUID `json:"messageId,omitempty"`
	TransactionID string     `json:"transactionId,omitempty"`
}

// AckResult reports an ack the cycle applied; a cycle whose ack could not
// be applied fails as a whole, so Success is always true here.
type AckResult struct {
	Success       bool  `json:"success"`
	Count         int64 `json:"count"`
	LeaseReleased bool  `json:"lease_released"`
	DLQ           bool  `json:"dlq"`
}
