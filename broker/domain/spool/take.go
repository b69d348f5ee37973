package spool

import (
	"errors"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/produce"
)

// Taken is one item's answer while buffering (queue-admin-api.md §7):
// transactionId only when the client sent one, error only when it failed.
type Taken struct {
	Status        string `json:"status"`
	Queue         string `json:"queue"`
	Partition     string `json:"partition"`
	TransactionID string `json:"transactionId,omitempty"`
	Error         string `json:"error,omitempty"`
}

// ErrNotWritten is Take's error when the spool could not write the items:
// its answers then say "failed" for every item, and POST /api/v1/push
// answers them with a 500.
var ErrNotWritten = errors.New("spool: the items could not be written")

// Take buffers the items of a POST /api/v1/push while the database is
// away: validated as the push route validates them, they go to the spool,
// and each gets a "buffered" answer. A bad name is a *catalog.BadName and
// nothing is taken; a failed write is ErrNotWritten, with every answer
// "failed".
func (s *Spool) Take(tenant, sub string, items []produce.Item) ([]Taken, error) {
	recs := make([]Record, len(items))
	answer := make([]Taken, len(items))
	for i, it := range items {
		if it.Partition == "" {
			it.Partition = catalog.DefaultPartition
		}
		if err := catalog.CheckNames(it.Queue, it.Partition); err != nil {
			return nil, err
		}
		answer[i] = Taken{Status: "buffered", Queue: it.Queue, Partition: it.Partition, TransactionID: it.TransactionID}
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
		return answer, ErrNotWritten
	}
	return answer, nil
}
