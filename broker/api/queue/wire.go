package queue

import (
	"net/http"
	"strconv"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/pg/db"
)

// The pop and push answers are the bodies the broker writes on its hot
// paths; they are built by hand into pooled buffers. encoding/json spent a
// sixth of the broker's CPU under the popack benchmark reflecting over the
// same few fields, and re-validating payloads that were validated when
// pushed.

func writePop(w http.ResponseWriter, queue, group string, msgs []queuestore.Message, claims []db.PopClaim, lease string) {
	httpx.WriteStreamed(w, http.StatusOK, func(st *httpx.Stream, b []byte) []byte {
		return AppendPop(st, b, queue, group, msgs, claims, lease)
	})
}

// AppendPop appends the answer through st, which sends it on in pieces
// when it is large (a pop may carry up to --max-pop-bytes). The cycle's
// next batch (broker/api/streams) is this answer too.
func AppendPop(st *httpx.Stream, b []byte, queue, group string, msgs []queuestore.Message, claims []db.PopClaim, lease string) []byte {
	b = append(b, `{"success":true,"queue":`...)
	b = httpx.AppendString(b, queue)
	b = append(b, `,"partition":`...)
	b = httpx.AppendString(b, claims[0].Name)
	b = append(b, `,"partitionId":`...)
	b = httpx.AppendUUID(b, claims[0].ID)
	b = append(b, `,"leaseId":`...)
	b = httpx.AppendString(b, lease)
	b = append(b, `,"consumerGroup":`...)
	b = httpx.AppendString(b, group)
	b = append(b, `,"partitionsClaimed":`...)
	b = strconv.AppendInt(b, int64(len(claims)), 10)
	b = append(b, `,"messages":[`...)
	// The frames of a segment share their creation time, so one formatting
	// usually serves a whole batch.
	var createdUS int64
	var createdBuf [40]byte
	var created []byte
	// So do the messages of a claim their last four fields.
	var tailOf *queuestore.Message
	var tailBuf [256]byte
	tail := tailBuf[:0]
	for i := range msgs {
		m := &msgs[i]
		if i > 0 {
			b = append(st.Flush(b), ',')
		}
		b = append(b, `{"id":`...)
		b = httpx.AppendUUID(b, m.ID)
		b = append(b, `,"transactionId":`...)
		b = httpx.AppendString(b, m.TransactionID)
		b = append(b, `,"traceId":`...)
		b = httpx.AppendStringOrNull(b, m.TraceID)
		if m.Traceparent != "" {
			b = append(b, `,"traceparent":`...)
			b = httpx.AppendString(b, m.Traceparent)
		}
		b = append(b, `,"data":`...)
		b = st.AppendLarge(b, m.Data)
		b = append(b, `,"producerSub":`...)
		b = httpx.AppendStringOrNull(b, m.ProducerSub)
		b = append(b, `,"createdAt":`...)
		if created == nil || m.CreatedAt != createdUS {
			createdUS = m.CreatedAt
			created = appendTime(createdBuf[:0], createdUS)
		}
		b = append(b, created...)
		if tailOf == nil || m.PartitionID != tailOf.PartitionID || m.Partition != tailOf.Partition ||
			m.LeaseID != tailOf.LeaseID || m.ConsumerGroup != tailOf.ConsumerGroup {
			tailOf = m
			tail = append(tail[:0], `,"partitionId":`...)
			tail = httpx.AppendUUID(tail, m.PartitionID)
			tail = append(tail, `,"partition":`...)
			tail = httpx.AppendString(tail, m.Partition)
			tail = append(tail, `,"leaseId":`...)
			tail = httpx.AppendString(tail, m.LeaseID)
			tail = append(tail, `,"consumerGroup":`...)
			tail = httpx.AppendString(tail, m.ConsumerGroup)
			tail = append(tail, '}')
		}
		b = append(b, tail...)
	}
	return append(b, "]}"...)
}

func writeAcks(w http.ResponseWriter, out []db.AckResult) {
	httpx.WriteAppended(w, http.StatusOK, func(b []byte) []byte { return appendAcks(b, out) })
}

// appendAcks appends the answers to acks as encoding/json writes a
// []db.AckResult.
func appendAcks(b []byte, out []db.AckResult) []byte {
	if out == nil {
		return append(b, "null"...)
	}
	b = append(b, '[')
	for i := range out {
		r := &out[i]
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(r.Index), 10)
		b = append(b, `,"transactionId":`...)
		b = httpx.AppendString(b, r.TransactionID)
		b = append(b, `,"success":`...)
		b = strconv.AppendBool(b, r.Success)
		b = append(b, `,"error":`...)
		b = httpx.AppendOptionalString(b, r.Error)
		b = append(b, `,"queueName":`...)
		b = httpx.AppendOptionalString(b, r.QueueName)
		b = append(b, `,"partitionName":`...)
		b = httpx.AppendOptionalString(b, r.PartitionName)
		b = append(b, `,"leaseReleased":`...)
		b = strconv.AppendBool(b, r.LeaseReleased)
		b = append(b, `,"dlq":`...)
		b = strconv.AppendBool(b, r.DLQ)
		b = append(b, '}')
	}
	return append(b, ']')
}

// appendTime appends µs since the epoch as a JSON string in httpx.TimeFormat.
func appendTime(b []byte, us int64) []byte {
	b = append(b, '"')
	b = time.UnixMicro(us).UTC().AppendFormat(b, httpx.TimeFormat)
	return append(b, '"')
}
