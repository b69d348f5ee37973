package spool

import (
	"errors"
	"net/http"

	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/ids"
	"github.com/regent-mq/regent/broker/produce"
)

// taken is one item's answer while buffering (queue-admin-api.md §7):
// transactionId only when the client sent one, error only when it failed.
type taken struct {
	Status        string `json:"status"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId,omitempty"`
	Error         string `json:"error,omitempty"`
}

// Take answers POST /api/v1/push while buffering: the items, validated as
// the push route validates them, go to the spool, and the answer is 201
// with one "buffered" element per item, or 500 with every item "failed"
// when the spool could not take them.
func (s *Spool) Take(w http.ResponseWriter, tenant, sub string, items []produce.Item) {
	recs := make([]Record, len(items))
	answer := make([]taken, len(items))
	for i, it := range items {
		if it.Partition == "" {
			it.Partition = catalog.DefaultPartition
		}
		if err := catalog.CheckNames(it.Queue, it.Partition); err != nil {
			var bad *catalog.BadName
			if errors.As(err, &bad) {
				err = httpx.BadRequest("%s", bad.Message)
			}
			httpx.Fail(w, err)
			return
		}
		answer[i] = taken{Status: "buffered", Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID}
		if it.TransactionID == "" {
			// The id a push would have given it, now, so that the drain's
			// replay after a crash deduplicates it too.
			it.MessageID = ids.New()
			it.TransactionID = it.MessageID.String()
		}
		recs[i] = Record{Tenant: tenant, Sub: sub, Item: it}
	}
	if err := s.Append(recs); err != nil {
		s.logger.Error("push maintenance: spool write failed", "dir", s.dir, "items", len(items), "err", err)
		for i := range answer {
			answer[i].Status, answer[i].TransactionID, answer[i].Error = "failed", "", "File buffer write failed"
		}
		httpx.WriteJSON(w, http.StatusInternalServerError, answer)
		return
	}
	httpx.WriteJSON(w, http.StatusCreated, answer)
}
