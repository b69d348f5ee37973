package streamworker

import (
	"context"
	"fmt"
	"net/http"
	"time"

	json "github.com/goccy/go-json"

	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/pipeline"
)

func (w *Worker) readState(ctx context.Context, p *partition, filter map[string]any) ([]pipeline.Row, error) {
	w.m.stateReads.Inc()
	filter["query_id"], filter["partition_id"] = w.queryID, p.id
	var out struct {
		Rows  []pipeline.Row `json:"rows"`
		Error string         `json:"error"`
	}
	status, err := w.c.call(ctx, "POST", "/streams/v1/state/get", filter, &out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("read state: %w", err)
	case status != http.StatusOK:
		return nil, fmt.Errorf("read state: %d %s", status, out.Error)
	}
	return out.Rows, nil
}

const (
	kindFold  = "fold"
	kindFlush = "flush"
)

// cycle commits state ops, pushes and an ack (nil: a flush), asking for
// the partition's next batch of at most next messages (0: none), and
// returns the answer if it committed, nil if not. A refused cycle is not an
// error: it is logged and counted; its batch is folded again or
// redelivered (or, after a lost answer, had already committed).
func (w *Worker) cycle(ctx context.Context, p *partition, kind string, ops []pipeline.StateOp, pushes []pipeline.Push, ack *wire.CycleAck, next int) (*wire.CycleResponse, error) {
	body, err := w.cycleBody(p, ops, pushes, ack)
	if err != nil {
		return nil, err
	}
	if next > 0 {
		body.NextBatch = &next
	}
	start := time.Now()
	var out wire.CycleResponse
	status, err := w.c.call(ctx, "POST", "/streams/v1/cycle", body, &out)
	switch {
	case err != nil:
		return nil, fmt.Errorf("cycle: %w", err)
	case status != http.StatusOK:
		return nil, fmt.Errorf("cycle: status %d %s", status, out.Error)
	}
	w.m.cycleSeconds.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	if !out.Success {
		// The transaction rolled back: the lease is gone (this very cycle
		// committed before an outage ate its answer, or the lease expired
		// and the batch went to another pop), or a row changed since it
		// was read.
		w.m.refused.WithLabelValues(kind).Inc()
		w.log.Info("cycle refused", "kind", kind, "partition", p.name, "err", out.Error)
		return nil, nil
	}
	if out.Deferred != "" {
		w.m.deferred.Inc()
		w.log.Info("flush deferred", "partition", p.name, "why", out.Deferred)
		return nil, nil
	}
	w.m.cycles.WithLabelValues(kind).Inc()
	for _, r := range out.PushResults {
		if r.Status == "duplicate" {
			w.log.Info("an output was already stored; not stored again", "partition", p.name)
		}
	}
	return &out, nil
}

// cycleBody is the cycle's request, with every member Queen's clients send:
// state_ops and push_items as arrays, even empty, and a flush's ack null.
// An output with no sink queue (a query whose only sink is its table) is
// no push item. With a table sink, the outputs are the table_rows too.
func (w *Worker) cycleBody(p *partition, ops []pipeline.StateOp, pushes []pipeline.Push, ack *wire.CycleAck) (*wire.CycleRequest, error) {
	if ops == nil {
		ops = []pipeline.StateOp{}
	}
	raw, err := json.Marshal(ops)
	if err != nil {
		return nil, fmt.Errorf("encode state ops: %w", err)
	}
	items := make([]wire.PushItem, 0, len(pushes))
	var rows []byte
	for _, x := range pushes {
		if x.Queue != "" {
			items = append(items, wire.PushItem{Queue: x.Queue, Partition: x.Partition, Payload: x.Payload, TransactionID: x.TransactionID})
		}
		if w.table && x.Output {
			rows = append(append(rows, ','), x.Payload...)
		}
	}
	req := &wire.CycleRequest{QueryID: w.queryID, PartitionID: p.id, ConsumerGroup: w.group, StateOps: raw,
		PushItems: items, Ack: ack, ResetGeneration: w.generation}
	if rows != nil {
		rows[0] = '['
		req.TableRows = append(rows, ']')
	}
	return req, nil
}
