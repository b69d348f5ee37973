package streams

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strconv"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/catalog"
	"github.com/regent-mq/regent/broker/db"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/produce"
)

// pushItem is a sink message as the client sends it.
type pushItem struct {
	Queue         string          `json:"queue"`
	Partition     string          `json:"partition"`
	Payload       json.RawMessage `json:"payload"`
	Data          json.RawMessage `json:"data"`
	MessageID     string          `json:"messageId"`
	TransactionID string          `json:"transactionId"`
	TraceID       string          `json:"traceId"`
}

// pushResult answers one push item, in item order. A duplicate names the
// message already stored under its transaction id and has no offset.
type pushResult struct {
	Queue         string     `json:"queue"`
	Partition     string     `json:"partition,omitempty"`
	Status        string     `json:"status"` // queued, duplicate, or skipped (no queue)
	BaseOffset    *int64     `json:"baseOffset,omitempty"`
	MessageID     *uuid.UUID `json:"messageId,omitempty"`
	TransactionID string     `json:"transactionId,omitempty"`
}

// appendJSON appends r as encoding/json would write it.
func (r *pushResult) appendJSON(b []byte) []byte {
	b = append(b, `{"queue":`...)
	b = httpx.AppendString(b, r.Queue)
	if r.Partition != "" {
		b = append(b, `,"partition":`...)
		b = httpx.AppendString(b, r.Partition)
	}
	b = append(b, `,"status":`...)
	b = httpx.AppendString(b, r.Status)
	if r.BaseOffset != nil {
		b = append(b, `,"baseOffset":`...)
		b = strconv.AppendInt(b, *r.BaseOffset, 10)
	}
	if r.MessageID != nil {
		b = append(b, `,"messageId":`...)
		b = httpx.AppendUUID(b, *r.MessageID)
	}
	if r.TransactionID != "" {
		b = append(b, `,"transactionId":`...)
		b = httpx.AppendString(b, r.TransactionID)
	}
	return append(b, '}')
}

// sink is a cycle's push_items, packed by the queue's push path.
type sink struct {
	items  []pushItem
	index  []int // packed item j is items[index[j]]
	packed *produce.Packed
	// segs are the segments still to push, sorted by partition id: the lock
	// order of the push.
	segs []*produce.Segment
}

// sinkItems checks the push items and turns the ones with a queue into
// queue.Items; an item with an empty queue is skipped, not rejected.
func sinkItems(in []pushItem) (items []produce.Item, index []int, err error) {
	for i, it := range in {
		if it.Queue == "" {
			continue
		}
		o := produce.Item{Queue: it.Queue, Partition: it.Partition, Payload: it.Payload, TransactionID: it.TransactionID}
		if err := httpx.CheckElementTexts("push_items", i, "partition", o.Partition, "transactionId", o.TransactionID); err != nil {
			return nil, nil, err
		}
		if o.Payload == nil {
			o.Payload = it.Data
		}
		if it.MessageID != "" {
			if o.MessageID, err = uuid.Parse(it.MessageID); err != nil {
				return nil, nil, httpx.NotUUID(fmt.Sprintf("push_items[%d].messageId", i), it.MessageID)
			}
		}
		if it.TraceID != "" {
			if _, err := uuid.Parse(it.TraceID); err != nil {
				return nil, nil, httpx.NotUUID(fmt.Sprintf("push_items[%d].traceId", i), it.TraceID)
			}
			o.TraceID = it.TraceID
		}
		items = append(items, o)
		index = append(index, i)
	}
	return items, index, nil
}

// pack resolves the sink partitions under the tenant (creating what is
// missing) and packs the items of sinkItems into segments.
func (s *Service) pack(ctx context.Context, tenant, producerSub string, in []pushItem, items []produce.Item, index []int) (*sink, error) {
	k := &sink{items: in, index: index}
	if len(items) == 0 {
		return k, nil
	}
	var err error
	if k.packed, err = s.producer.Pack(ctx, tenant, producerSub, items); err != nil {
		var bad *catalog.BadName
		if errors.As(err, &bad) {
			return nil, httpx.BadRequest("%s", bad.Message)
		}
		return nil, err
	}
	k.segs = slices.Clone(k.packed.Segments)
	produce.SortSegments(k.segs)
	return k, nil
}

// drop takes out of the segments the items the database already holds, so
// that the cycle can run again.
func (k *sink) drop(d db.Duplicates) { k.segs = k.packed.Drop(k.segs, d) }

// committed records the base offsets the cycle gave k.segs.
func (k *sink) committed(offsets []int64) {
	for n, g := range k.segs {
		g.BaseOffset = offsets[n]
	}
}

// results answers every push item once the cycle committed.
func (k *sink) results() []pushResult {
	out := make([]pushResult, len(k.items))
	for i, it := range k.items {
		if it.Queue == "" {
			out[i] = pushResult{Status: "skipped"}
		}
	}
	if k.packed == nil {
		return out
	}
	for j, p := range k.packed.Results(k.segs) {
		r := &out[k.index[j]]
		r.Queue, r.Partition, r.MessageID, r.TransactionID = p.Partition.Queue.Name, p.Partition.Name, &p.MessageID, p.TransactionID
		if p.Duplicate {
			r.Status = "duplicate"
		} else {
			r.Status, r.BaseOffset = "queued", &p.BaseOffset
		}
	}
	return out
}
