package streamworker

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"time"

	"github.com/regent-mq/regent/broker/streams/wire"
	"github.com/regent-mq/regent/pipeline"
)

type popAnswer struct {
	PartitionID string `json:"partitionId"`
	Partition   string `json:"partition"`
	LeaseID     string `json:"leaseId"`
	Messages    []struct {
		TransactionID string          `json:"transactionId"`
		Data          json.RawMessage `json:"data"`
		CreatedAt     time.Time       `json:"createdAt"`
	} `json:"messages"`
}

func (w *Worker) pop(ctx context.Context) (*popAnswer, error) {
	q := url.Values{
		"batch":         {strconv.Itoa(w.cfg.Batch)},
		"wait":          {"true"},
		"timeout":       {strconv.FormatInt(w.cfg.Wait.Milliseconds(), 10)},
		"consumerGroup": {w.group},
	}
	var b popAnswer
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

// process folds one leased batch and commits it with its ack.
func (w *Worker) process(ctx context.Context, b *popAnswer) error {
	p := w.partition(b.PartitionID, b.Partition)
	p.mu.Lock()
	defer p.mu.Unlock()
	events := make([]pipeline.Event, len(b.Messages))
	for i, m := range b.Messages {
		events[i] = pipeline.Event{Data: m.Data, TransactionID: m.TransactionID, CreatedAt: m.CreatedAt}
	}
	last := b.Messages[len(b.Messages)-1]
	completed, count := "completed", int64(len(b.Messages))
	ack := &wire.CycleAck{LeaseID: b.LeaseID, TransactionID: last.TransactionID, Status: &completed, Count: &count}
	for range refolds {
		var rows []pipeline.Row
		if w.cfg.Program.Stateful() {
			var err error
			if rows, err = w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix}); err != nil {
				return err
			}
		}
		s, err := w.cfg.Program.NewShard(w.scope(p), rows)
		if err != nil {
			return err
		}
		s.Fold(events)
		now := time.Now()
		ops, pushes, err := s.Commit(&now)
		if err != nil {
			return err
		}
		done, err := w.cycle(ctx, p, kindFold, ops, pushes, ack)
		if err != nil {
			return err
		}
		if done {
			w.counted(p, s)
			return nil
		}
	}
	w.log.Info("batch left to redelivery", "partition", p.name, "refolds", refolds)
	return nil
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
