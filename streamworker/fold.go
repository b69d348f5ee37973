package streamworker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/pipeline"
)

func (w *Worker) pop(ctx context.Context) (*wire.Batch, error) {
	q := url.Values{
		"batch":         {strconv.Itoa(w.cfg.Batch)},
		"wait":          {"true"},
		"timeout":       {strconv.FormatInt(w.cfg.Wait.Milliseconds(), 10)},
		"consumerGroup": {w.group},
	}
	var b wire.Batch
	status, err := w.c.call(ctx, "GET", "/api/v1/pop/queue/"+url.PathEscape(w.cfg.Source)+"?"+q.Encode(), nil, &b)
	switch {
	case err != nil:
		return nil, fmt.Errorf("pop: %w", err)
	case status == http.StatusNoContent:
		return nil, nil
	case status != http.StatusOK:
		return nil, fmt.Errorf("pop: status %d", status)
	}
	return &b, nil
}

// refolds is how many times a batch is folded again from fresh state when
// its cycle is refused while its lease may still be live.
const refolds = 3

// keepFor is how long a loop keeps a partition, folding each next batch
// that its cycle brings, before it lets the partition go and pops again:
// so that the loops take turns over more partitions than they are.
//
// A loop does not pipeline its round trips: a partition's next batch comes
// with the commit of the one before, and its fold needs that batch, so
// within a partition there is nothing to overlap. The overlap is the loops
// over partitions (--workers): on regent-bench's worker point (16
// partitions, 1,000 keys, batch 100) 16 loops folded 34-40k events/s
// against 21-23k for 4, and 50-66k against 32-40k at batch 1000.
const keepFor = time.Second

// process folds a leased batch and commits it with its ack, and then the
// partition's next batches, which each cycle brings under a new lease of
// this worker's, for up to keepFor. While it keeps the partition leased,
// nobody else can write its state (an idle flush is deferred while a lease
// is live), so each batch folds into the state the last cycle left, held
// in memory, without reading it again. Once stop ends, it asks for no
// more.
func (w *Worker) process(stop, ctx context.Context, b *wire.Batch) error {
	p := w.partition(b.PartitionID, b.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	var held *pipeline.Shard
	until := time.Now().Add(keepFor)
	for b != nil {
		var err error
		b, held, err = w.foldBatch(ctx, p, b, held, stop.Err() == nil && time.Now().Before(until))
		if err != nil {
			return err
		}
	}
	return nil
}

// foldBatch folds one leased batch into held, the state the last cycle
// left under this worker's lease, or when nil, into the state it reads,
// and commits it with its ack. With more, the cycle asks for the
// partition's next batch: foldBatch returns it, and the state this cycle
// left. A refused cycle drops the state it folded into: the lease is lost,
// or the reset generation or a row moved, so the state is read again.
func (w *Worker) foldBatch(ctx context.Context, p *partition, b *wire.Batch, held *pipeline.Shard, more bool) (*wire.Batch, *pipeline.Shard, error) {
	events := make([]pipeline.Event, len(b.Messages))
	for i, m := range b.Messages {
		events[i] = pipeline.Event{Data: m.Data, TransactionID: m.TransactionID, CreatedAt: m.CreatedAt}
	}
	last := b.Messages[len(b.Messages)-1]
	completed, count := "completed", int64(len(b.Messages))
	ack := &wire.CycleAck{LeaseID: b.LeaseID, TransactionID: last.TransactionID, Status: &completed, Count: &count}
	next := 0
	if more {
		next = w.cfg.Batch
	}
	for range refolds {
		s := held
		held = nil
		if s == nil {
			var rows []pipeline.Row
			if w.cfg.Program.Stateful() {
				var err error
				if rows, err = w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix}); err != nil {
					return nil, nil, err
				}
			}
			var err error
			if s, err = w.cfg.Program.NewShard(w.scope(p), rows); err != nil {
				return nil, nil, err
			}
		}
		s.Fold(events)
		now := time.Now()
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			return nil, nil, err
		}
		out, err := w.cycle(ctx, p, kindFold, ops, pushes, ack, next)
		if err != nil {
			return nil, nil, err
		}
		if out == nil {
			continue
		}
		w.counted(p, s)
		if out.Next == nil || len(out.Next.Messages) == 0 {
			return nil, nil, nil
		}
		s.Committed(out.StateUpdatedAt)
		return out.Next, s, nil
	}
	w.log.Info("batch left to redelivery", "partition", p.name, "refolds", refolds)
	return nil, nil, nil
}

func (w *Worker) counted(p *partition, s *pipeline.Shard) {
	w.m.eventsIn.Add(float64(s.In))
	w.m.filtered.Add(float64(s.Filtered))
	w.m.late.Add(float64(s.Late))
	w.m.failed.Add(float64(s.Failed))
	w.m.emitted.Add(float64(s.Emitted))
	for _, err := range s.Errors {
		w.log.Warn("an event or window failed its expression and was dropped", "partition", p.name, "err", err)
	}
}
