package streams

import (
	"fmt"
	"strconv"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/api/streams/wire"
	"github.com/regent-mq/regent/broker/domain/produce"
)

// appendPushResult appends r as encoding/json would write it.
func appendPushResult(b []byte, r *wire.PushResult) []byte {
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

// sinkItems checks the push items and turns the ones with a queue into
// queue.Items; an item with an empty queue is skipped, not rejected.
func sinkItems(in []wire.PushItem) (items []produce.Item, index []int, err error) {
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

// pushResults answers every push item of in once the cycle committed:
// pushed answers the items sinkItems kept, in order, index[j] naming
// pushed[j]'s item.
func pushResults(in []wire.PushItem, index []int, pushed []produce.Pushed) []wire.PushResult {
	out := make([]wire.PushResult, len(in))
	for i, it := range in {
		if it.Queue == "" {
			out[i] = wire.PushResult{Status: "skipped"}
		}
	}
	for j := range pushed {
		p := &pushed[j]
		r := &out[index[j]]
		r.Queue, r.Partition, r.MessageID, r.TransactionID = p.Partition.Queue.Name, p.Partition.Name, &p.MessageID, p.TransactionID
		if p.Duplicate {
			r.Status = "duplicate"
		} else {
			r.Status, r.BaseOffset = "queued", &p.BaseOffset
		}
	}
	return out
}
