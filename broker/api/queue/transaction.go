package queue

import (
	"fmt"
	"net/http"
	"slices"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/counters"
	"github.com/regent-mq/regent/broker/domain/ids"
	"github.com/regent-mq/regent/broker/domain/produce"
	"github.com/regent-mq/regent/broker/domain/queuestore"
	"github.com/regent-mq/regent/broker/pg/db"
)

// operation is one element of a transaction, as a client sends it.
type operation struct {
	Type  *string     `json:"type"`
	Items *[]pushItem `json:"items"`
	wireAck
}

// op is a validated operation: a push or an ack.
type op struct {
	push []produce.Item
	ack  *db.QueueAck
}

func parseOperations(in []operation) ([]op, error) {
	if len(in) == 0 {
		return nil, httpx.BadRequest("operations must be a non-empty array")
	}
	out := make([]op, len(in))
	for i, o := range in {
		field := fmt.Sprintf("operations[%d]", i)
		if o.Type == nil {
			return nil, httpx.BadRequest("%s.type is required", field)
		}
		switch *o.Type {
		case "push":
			if o.Items == nil {
				return nil, httpx.BadRequest("%s.items must be an array", field)
			}
			items, err := items(*o.Items, field+".items")
			if err != nil {
				return nil, err
			}
			for j, it := range items {
				part := it.Partition
				if part == "" {
					part = catalog.DefaultPartition
				}
				if err := catalog.CheckNames(it.Queue, part); err != nil {
					return nil, httpx.BadRequest("%s.items[%d]: %s", field, j, err.Error())
				}
			}
			out[i].push = items
		case "ack":
			a, err := o.wireAck.parse(catalog.QueueMode)
			if err != nil {
				return nil, inElement(err, "%s.", field)
			}
			out[i].ack = &a
		default:
			return nil, httpx.BadRequest("%s.type must be push or ack, not %q", field, *o.Type)
		}
	}
	return out, nil
}

// opResult is the outcome of one operation.
type opResult struct {
	Index   int          `json:"index"`
	Type    string       `json:"type"`
	Success bool         `json:"success"`
	Error   *string      `json:"error,omitempty"`
	Results *pushResults `json:"results,omitempty"`
	*db.AckResult
}

// handleTransaction is POST /api/v1/transaction: every operation in one
// database transaction, in order; the first that fails rolls back all.
func (s *Handler) handleTransaction(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Operations *[]operation `json:"operations"`
	}
	if err := httpx.ReadJSON(r, &body); err != nil {
		httpx.Fail(w, err)
		return
	}
	if body.Operations == nil {
		httpx.Fail(w, httpx.BadRequest("operations must be a non-empty array"))
		return
	}
	ops, err := parseOperations(*body.Operations)
	if err != nil {
		httpx.Fail(w, err)
		return
	}
	traceparent := s.traceparent(r)
	id := auth.FromContext(r.Context())
	ctx := r.Context()
	results := make([]opResult, 0, len(ops))
	var after commit.After
	var acks []db.QueueAck
	var acked []db.AckResult
	var failure string
	err = s.DB.InTx(ctx, func(tx *db.DB) error {
		for i, o := range ops {
			if o.ack != nil {
				out, err := s.Store.Ack(ctx, tx, id.Tenant, []db.QueueAck{*o.ack})
				if err != nil {
					return err
				}
				acks, acked = append(acks, *o.ack), append(acked, out[0])
				res := opResult{Index: i, Type: "ack", Success: out[0].Success, Error: out[0].Error, AckResult: &out[0]}
				results = append(results, res)
				if !out[0].Success {
					failure = fmt.Sprintf("operation %d (ack) failed: %s", i, *out[0].Error)
					return errRollback
				}
				continue
			}
			e, err := s.Producer.Emit(ctx, produce.Write{Tenant: id.Tenant, Sub: id.Subject, Items: o.push,
				Traceparent: traceparent, Tx: tx})
			if err != nil {
				return err
			}
			after.Add(e.After)
			results = append(results, opResult{Index: i, Type: "push", Success: true, Results: &pushResults{o.push, e.Pushed}})
		}
		return nil
	})
	txID := ids.New()
	switch {
	case err == errRollback:
		// Nothing of the operations before the failing one was kept: none
		// of them may answer as if it had been.
		undone := "rolled back: " + failure
		for j := range results[:len(results)-1] {
			results[j] = opResult{Index: results[j].Index, Type: results[j].Type, Error: &undone}
		}
		httpx.WriteJSON(w, http.StatusOK, map[string]any{
			"transactionId": txID, "success": false, "error": failure, "results": results})
	case err != nil:
		s.fail(w, r, "transaction", err)
	default:
		// transactionOps counts the push requests of the whole transaction.
		after.Ops = slices.DeleteFunc(after.Ops, func(o commit.Op) bool { return o.Field == counters.PushRequests })
		after.Ops = append(after.Ops, transactionOps(id.Tenant, after.Pushed, acked)...)
		after.Add(queuestore.Acked(id.Tenant, acks, acked))
		s.After.Apply(after)
		httpx.WriteJSON(w, http.StatusOK, map[string]any{"transactionId": txID, "success": true, "results": results})
	}
}

// errRollback ends a transaction whose operation failed by the rules (not by
// an error of the database).
var errRollback = fmt.Errorf("transaction rolled back")

// transactionOps are a committed transaction's counts per queue: one
// transaction in each queue it pushed to or acked in, and one push request
// in each queue it pushed to, however many of its operations pushed there.
func transactionOps(tenant string, pushed []commit.Count, acked []db.AckResult) []commit.Op {
	var queues, pushedTo []string
	for _, c := range pushed {
		pushedTo = append(pushedTo, c.Queue)
	}
	queues = append(queues, pushedTo...)
	for _, r := range acked {
		queues = append(queues, *r.QueueName) // a committed ack found its message
	}
	var ops []commit.Op
	for _, c := range []struct {
		queues []string
		field  counters.Field
	}{{queues, counters.Transactions}, {pushedTo, counters.PushRequests}} {
		slices.Sort(c.queues)
		for _, q := range slices.Compact(c.queues) {
			ops = append(ops, commit.Op{Tenant: tenant, Queue: q, Field: c.field, N: 1})
		}
	}
	return ops
}
