package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"strconv"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/spool"
	"github.com/regent-mq/regent/broker/pg/db"
	"github.com/regent-mq/regent/broker/tracing"
)

// pushItem is an item as a client sends it.
type pushItem struct {
	Queue         *string         `json:"queue"`
	Partition     *string         `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	Data          json.RawMessage `json:"data"`
	TransactionID *string         `json:"transactionId"`
	TraceID       *string         `json:"traceId"`
}

// items validates what a client sent and turns it into Items.
func items(in []pushItem, field string) ([]produce.Item, error) {
	out := make([]produce.Item, len(in))
	for i, it := range in {
		if it.Queue == nil || *it.Queue == "" {
			return nil, httpx.BadRequest("%s[%d].queue is required", field, i)
		}
		o := produce.Item{Queue: *it.Queue, Payload: it.Payload}
		if o.Payload == nil {
			o.Payload = it.Data
		}
		if it.Partition != nil {
			o.Partition = *it.Partition
		}
		if it.TransactionID != nil {
			o.TransactionID = *it.TransactionID
		}
		if err := httpx.CheckElementTexts(field, i, "partition", o.Partition, "transactionId", o.TransactionID); err != nil {
			return nil, err
		}
		if it.TraceID != nil && *it.TraceID != "" {
			if _, err := uuid.Parse(*it.TraceID); err != nil {
				return nil, httpx.NotUUID(fmt.Sprintf("%s[%d].traceId", field, i), *it.TraceID)
			}
			o.TraceID = *it.TraceID
		}
		out[i] = o
	}
	return out, nil
}

// pushResults is the answer to a push, one object per item in item order:
// {"index", "transaction_id", "message_id", "partition_id", "trace_id",
// "queueName", "status"}. It is built by hand, as the pop answer is.
type pushResults struct {
	in     []produce.Item
	pushed []produce.Pushed
}

func (r pushResults) append(b []byte) []byte {
	b = append(b, '[')
	for i, p := range r.pushed {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, `{"index":`...)
		b = strconv.AppendInt(b, int64(i), 10)
		b = append(b, `,"transaction_id":`...)
		b = httpx.AppendString(b, p.TransactionID)
		b = append(b, `,"message_id":`...)
		b = httpx.AppendUUID(b, p.MessageID)
		b = append(b, `,"partition_id":`...)
		b = httpx.AppendUUID(b, p.Partition.ID)
		b = append(b, `,"trace_id":`...)
		if t := r.in[i].TraceID; t != "" {
			b = httpx.AppendString(b, t)
		} else {
			b = append(b, "null"...)
		}
		b = append(b, `,"queueName":`...)
		b = httpx.AppendString(b, p.Partition.Queue.Name)
		if p.Duplicate {
			b = append(b, `,"status":"duplicate"}`...)
		} else {
			b = append(b, `,"status":"queued"}`...)
		}
	}
	return append(b, ']')
}

// MarshalJSON lets a transaction's answer embed the results.
func (r pushResults) MarshalJSON() ([]byte, error) { return r.append(nil), nil }

// handlePush is POST /api/v1/push.
func (s *Handler) handlePush(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Items *[]pushItem `json:"items"`
	}
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	if body.Items == nil {
		httpx.Fail(w, httpx.BadRequest("items must be an array"))
		return
	}
	in, err := items(*body.Items, "items")
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	if len(in) == 0 {
		httpx.WriteAppended(w, http.StatusCreated, pushResults{}.append)
		return
	}
	id := auth.FromContext(r.Context())
	traceparent := s.traceparent(r)
	if sp := s.Spool; sp != nil && sp.Buffering() {
		s.Producer.Trace(in, traceparent)
		taken, err := sp.Take(id.Tenant, id.Subject, in)
		switch {
		case errors.Is(err, spool.ErrNotWritten):
			httpx.WriteJSON(w, http.StatusInternalServerError, taken)
		case err != nil:
			s.fail(w, r, "push", err)
		default:
			httpx.WriteJSON(w, http.StatusCreated, taken)
		}
		return
	}
	e, err := s.Producer.Emit(r.Context(), produce.Write{Tenant: id.Tenant, Sub: id.Subject, Items: in, Traceparent: traceparent})
	if err != nil {
		s.fail(w, r, "push", err)
		return
	}
	s.After.Apply(e.After)
	httpx.WriteAppended(w, http.StatusCreated, pushResults{in, e.Pushed}.append)
}

// traceparent is the request's trace context, which the items it pushes
// carry, to be stored with them and handed to their consumers.
func (s *Handler) traceparent(r *http.Request) string {
	return tracing.Carried(r.Context(), r.Header.Get(tracing.Header))
}

// fail answers a failed request: client errors with their status, anything
// else as a 500 whose detail goes to the log only.
func (s *Handler) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	var bad *catalog.BadName
	switch {
	case errors.As(err, &bad):
		httpx.Fail(w, httpx.BadRequest("%s", bad.Message))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		switch {
		case httpx.Internal(err):
			s.Logger.Error(fmt.Sprintf("%s failed", what), "err", err)
		case db.Unavailable(err):
			s.Logger.Warn(fmt.Sprintf("%s: database unavailable", what), "err", err)
		}
		httpx.Fail(w, err)
	}
}
