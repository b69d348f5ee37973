package queue

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/auth"
	"github.com/regent-mq/regent/broker/httpx"
	"github.com/regent-mq/regent/broker/pg"
)

// Push packs and stores items on db in one call (plus one when the
// database already holds some of their client transaction ids). On the
// pool, a partition deleted behind the cache is resolved again and the
// push retried once; in a transaction the error is returned. The caller runs
// AfterPush on the segments once they are committed.
func (s *Store) Push(ctx context.Context, db pg.DB, tenant, producerSub string, items []Item) ([]Pushed, []*Segment, error) {
	for attempt := 0; ; attempt++ {
		p, err := s.Pack(ctx, tenant, producerSub, items)
		if err != nil {
			return nil, nil, err
		}
		segs, err := s.store(ctx, db, p)
		if errors.Is(err, ErrPartitionGone) && attempt == 0 {
			if _, inTx := db.(pgx.Tx); !inTx {
				for _, it := range items {
					s.Invalidate(tenant, it.Queue)
				}
				continue
			}
		}
		if err != nil {
			return nil, nil, err
		}
		return p.Results(segs), segs, nil
	}
}

const logPushSQL = `SELECT partition_id, outcome, base_offset, dup_txids, dup_message_ids FROM queen.log_push(
	p_partitions => $1, p_frames => $2, p_bodies => $3, p_checksums => $4, p_txids => $5, p_min_at => $6,
	p_max_at => $7, p_dedups => $8, p_dedup_txids => $9, p_dedup_msg_ids => $10)`

// store stores p's segments, dropping the items whose transaction ids the
// database already holds, and returns the segments it stored.
func (s *Store) store(ctx context.Context, db pg.DB, p *Packed) ([]*Segment, error) {
	segs := slices.Clone(p.Segments)
	SortSegments(segs)
	for len(segs) > 0 {
		a := Args(segs)
		rows, err := db.Query(ctx, logPushSQL, a.Partitions, a.Frames, a.Bodies, a.Checksums, a.TxIDs,
			a.MinAt, a.MaxAt, a.Dedups, a.DedupTxIDs, a.DedupMsgIDs)
		if err != nil {
			return nil, fmt.Errorf("push: %w", err)
		}
		var (
			pid     uuid.UUID
			outcome string
			base    pgtype.Int8
			txids   []string
			ids     []uuid.UUID
			dups    map[uuid.UUID]map[string]uuid.UUID
			i       int
		)
		_, err = pgx.ForEachRow(rows, []any{&pid, &outcome, &base, &txids, &ids}, func() error {
			switch outcome {
			case "stored":
				segs[i].BaseOffset = base.Int64
				i++
			case "duplicates":
				if dups == nil {
					dups = map[uuid.UUID]map[string]uuid.UUID{}
				}
				dups[pid] = make(map[string]uuid.UUID, len(txids))
				for j, t := range txids {
					dups[pid][t] = ids[j]
				}
			case "gone":
				return fmt.Errorf("partition %s: %w", pid, ErrPartitionGone)
			default:
				return fmt.Errorf("partition %s: unknown outcome %q", pid, outcome)
			}
			return nil
		})
		if err != nil {
			return nil, fmt.Errorf("push: %w", err)
		}
		if dups == nil {
			return segs, nil
		}
		segs = p.Drop(segs, dups)
	}
	return nil, nil
}

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
func items(in []pushItem, field string) ([]Item, error) {
	out := make([]Item, len(in))
	for i, it := range in {
		if it.Queue == nil || *it.Queue == "" {
			return nil, httpx.BadRequest("%s[%d].queue is required", field, i)
		}
		o := Item{Queue: *it.Queue, Payload: it.Payload}
		if o.Payload == nil {
			o.Payload = it.Data
		}
		if it.Partition != nil {
			o.Partition = *it.Partition
		}
		if it.TransactionID != nil {
			o.TransactionID = *it.TransactionID
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
	in     []Item
	pushed []Pushed
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
func (s *Store) handlePush(w http.ResponseWriter, r *http.Request) {
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
	pushed, segs, err := s.Push(r.Context(), s.pool, id.Tenant, id.Subject, in)
	if err != nil {
		s.fail(w, r, "push", err)
		return
	}
	s.AfterPush(segs)
	httpx.WriteAppended(w, http.StatusCreated, pushResults{in, pushed}.append)
}

// fail answers a failed request: client errors with their status, anything
// else as a 500 whose detail goes to the log only.
func (s *Store) fail(w http.ResponseWriter, r *http.Request, what string, err error) {
	var bad *BadName
	switch {
	case errors.As(err, &bad):
		httpx.Fail(w, httpx.BadRequest("%s", bad.Message))
	case errors.Is(err, context.Canceled) && r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
	default:
		switch {
		case httpx.Internal(err):
			s.log.Error(fmt.Sprintf("%s failed", what), "err", err)
		case pg.Unavailable(err):
			s.log.Warn(fmt.Sprintf("%s: database unavailable", what), "err", err)
		}
		httpx.Fail(w, err)
	}
}
