package queue

import (
	"net/http"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/segment"
)

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
func (s *Store) handleDLQ(w http.ResponseWriter, r *http.Request) {
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
	const where = ` FROM queen.dead_letters d
		JOIN queen.partitions p ON p.id = d.partition_id
		JOIN queen.queues q ON q.id = p.queue_id
		WHERE q.tenant = $1 AND ($2 = '' OR q.name = $2) AND ($3 = '' OR d.consumer_group = $3)`
	var total int
	out := []deadLetter{}
	b := &pgx.Batch{}
	b.Queue(`SELECT count(*)`+where, tenant, queue, group).QueryRow(func(row pgx.Row) error { return row.Scan(&total) })
	b.Queue(`SELECT d.message_id, d.transaction_id, d.partition_id, q.name, p.name, d.consumer_group,
			d.error_message, d.retry_count, d.payload, d.key_id, d.created_at, d.failed_at`+where+`
		ORDER BY d.failed_at DESC, d.message_id LIMIT $4 OFFSET $5`, tenant, queue, group, limit, offset).
		Query(func(rows pgx.Rows) error {
			for rows.Next() {
				var d deadLetter
				var payload []byte
				var key pgtype.Int8
				var created, failed time.Time
				if err := rows.Scan(&d.ID, &d.TransactionID, &d.PartitionID, &d.Queue, &d.Partition, &d.ConsumerGroup,
					&d.ErrorMessage, &d.RetryCount, &payload, &key, &created, &failed); err != nil {
					return err
				}
				f := segment.Frame{Payload: payload}
				if key.Valid {
					f.Flags, f.KeyID = segment.FlagSealed, uint32(key.Int64)
				}
				data, err := s.open(&f)
				if err != nil {
					return err
				}
				d.Data = data
				d.CreatedAt = created.UTC().Format(TimeFormat)
				d.FailedAt = failed.UTC().Format(TimeFormat)
				out = append(out, d)
			}
			return rows.Err()
		})
	if err := s.pool.SendBatch(r.Context(), b).Close(); err != nil {
		s.fail(w, r, "list dead letters", err)
		return
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"messages": out, "total": total, "pagination": map[string]int{"limit": limit, "offset": offset}})
}
