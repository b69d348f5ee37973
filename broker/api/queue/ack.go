package queue

import (
	"errors"
	"fmt"
	"net/http"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/pg/db"
)

// wireAck is an acknowledgement as a client sends it. A field whose
// absence, null and "" mean the same is a plain string: the decoder then
// allocates no pointer for it, a saving on each item of a batch.
type wireAck struct {
	TransactionID string  `json:"transactionId"`
	PartitionID   string  `json:"partitionId"`
	Status        *string `json:"status"`
	LeaseID       string  `json:"leaseId"`
	ConsumerGroup string  `json:"consumerGroup"`
	Error         *string `json:"error"`
}

// inElement names the element of a list that an error of parse is about.
// Every message of parse begins with the field it refuses, so the name is
// put in front, and only made for an element that fails.
func inElement(err error, format string, args ...any) error {
	var e *httpx.Error
	if errors.As(err, &e) {
		return &httpx.Error{Status: e.Status, Message: fmt.Sprintf(format, args...) + e.Message}
	}
	return err
}

// parse validates a wire ack.
func (a *wireAck) parse(group string) (db.QueueAck, error) {
	var out db.QueueAck
	if a.TransactionID == "" {
		return out, httpx.BadRequest("transactionId is required")
	}
	if a.PartitionID == "" {
		return out, httpx.BadRequest("partitionId is required")
	}
	pid, err := uuid.Parse(a.PartitionID)
	if err != nil {
		return out, httpx.NotUUID("partitionId", a.PartitionID)
	}
	out = db.QueueAck{PartitionID: pid, TransactionID: a.TransactionID, Status: db.AckCompleted, Group: group, Error: a.Error}
	if err := httpx.CheckText("transactionId", out.TransactionID); err != nil {
		return out, err
	}
	if err := httpx.CheckText("consumerGroup", a.ConsumerGroup); err != nil {
		return out, err
	}
	if a.Error != nil {
		if err := httpx.CheckText("error", *a.Error); err != nil {
			return out, err
		}
	}
	if a.Status != nil {
		var ok bool
		if out.Status, ok = db.QueueAckStatus(*a.Status); !ok {
			return out, httpx.BadRequest("status must be %s, not %q", db.QueueAckWords, *a.Status)
		}
	}
	if a.LeaseID != "" {
		id, err := uuid.Parse(a.LeaseID)
		if err != nil {
			return out, httpx.NotUUID("leaseId", a.LeaseID)
		}
		out.LeaseID, out.HasLease = id, true
	}
	if a.ConsumerGroup != "" {
		out.Group = a.ConsumerGroup
	}
	return out, nil
}

// handleAck is POST /api/v1/ack.
func (s *Handler) handleAck(w http.ResponseWriter, r *http.Request) {
	var body wireAck
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	a, err := body.parse(catalog.QueueMode)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	acks := []db.QueueAck{a}
	tenant := auth.FromContext(r.Context()).Tenant
	out, err := s.Store.Ack(r.Context(), s.DB, tenant, acks)
	if err != nil {
		s.fail(w, r, "ack", err)
		return
	}
	s.After.Apply(queuestore.Acked(tenant, acks, out))
	writeAcks(w, out)
}

// handleAckBatch is POST /api/v1/ack/batch: every acknowledgement in one
// procedure call, results in request order.
func (s *Handler) handleAckBatch(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Acks          *[]wireAck `json:"acknowledgments"`
		ConsumerGroup *string    `json:"consumerGroup"`
	}
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	if body.Acks == nil {
		httpx.Fail(w, httpx.BadRequest("acknowledgments must be an array"))
		return
	}
	group := catalog.QueueMode
	if body.ConsumerGroup != nil && *body.ConsumerGroup != "" {
		if err := httpx.CheckText("consumerGroup", *body.ConsumerGroup); err != nil {
			httpx.Fail(w, err)
			return
		}
		group = *body.ConsumerGroup
	}
	acks := make([]db.QueueAck, len(*body.Acks))
	for i := range *body.Acks {
		a, err := (*body.Acks)[i].parse(group)
		if err != nil {
			httpx.Fail(w, inElement(err, "acknowledgments[%d].", i))
			return
		}
		if body.ConsumerGroup != nil && *body.ConsumerGroup != "" {
			a.Group = group // a top-level group applies to all
		}
		acks[i] = a
	}
	if len(acks) == 0 {
		writeAcks(w, []db.AckResult{})
		return
	}
	tenant := auth.FromContext(r.Context()).Tenant
	out, err := s.Store.Ack(r.Context(), s.DB, tenant, acks)
	if err != nil {
		s.fail(w, r, "ack batch", err)
		return
	}
	s.After.Apply(queuestore.Acked(tenant, acks, out))
	writeAcks(w, out)
}
