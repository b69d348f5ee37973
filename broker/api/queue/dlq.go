package queue

import (
	"net/http"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/pg/db"
)

// deadLetter is a dead letter as GET /api/v1/dlq shows it.
type deadLetter struct {
	ID            uuid.UUID `json:"id"`
	TransactionID string    `json:"transactionId"`
	PartitionID   uuid.UUID `json:"partitionId"`
	Queue         string    `json:"queue"`
	Partition     string    `json:"partition"`
	ConsumerGroup string    `json:"consumerGroup"`
	ErrorMessage  *string   `json:"errorMessage"`
	RetryCount    int       `json:"retryCount"`
	Data          rawJSON   `json:"data"`
	CreatedAt     string    `json:"createdAt"`
	FailedAt      string    `json:"failedAt"`
}

// handleDLQ is GET /api/v1/dlq: the tenant's dead letters, newest first,
// filtered by queue and consumer group.
func (s *Handler) handleDLQ(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	limit, err := intParam(q.Get("limit"), "limit", 100, 1, 1000)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	offset, err := intParam(q.Get("offset"), "offset", 0, 0, 1<<30)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	queue, group := q.Get("queue"), q.Get("consumerGroup")
	if err := httpx.CheckTexts("queue", queue, "consumerGroup", group); err != nil {
		httpx.Fail(w, err)
		return
	}
	total, found, err := s.Store.DeadLetters(r.Context(), db.DeadLetterFilter{
		Tenant: tenant, Queue: queue, Group: group, Limit: limit, Offset: offset})
	if err != nil {
		s.fail(w, r, "list dead letters", err)
		return
	}
	out := make([]deadLetter, len(found))
	for i, d := range found {
		out[i] = deadLetter{ID: d.ID, TransactionID: d.TransactionID, PartitionID: d.PartitionID, Queue: d.Queue,
			Partition: d.Partition, ConsumerGroup: d.ConsumerGroup, ErrorMessage: d.ErrorMessage, RetryCount: d.RetryCount,
			Data: d.Data, CreatedAt: d.CreatedAt.UTC().Format(httpx.TimeFormat), FailedAt: d.FailedAt.UTC().Format(httpx.TimeFormat)}
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"messages": out, "total": total, "pagination": map[string]int{"limit": limit, "offset": offset}})
}
