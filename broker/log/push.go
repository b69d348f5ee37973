package log

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/pg"
)

// Push packs and stores items on db in one call (plus one when the
// database already holds some of their client transaction ids). On the
// pool, a partition deleted behind the cache is resolved again and the
// push retried once; in a transaction the error is returned. The caller runs
// AfterPush on the segments once they are committed.
func (l *Log) Push(ctx context.Context, db pg.DB, tenant, producerSub string, items []Item) ([]Pushed, []*Segment, error) {
	for attempt := 0; ; attempt++ {
		p, err := l.Pack(ctx, tenant, producerSub, items)
		if err != nil {
			return nil, nil, err
		}
		if attempt == 0 {
			// Whole requests or nothing: a refused push stores no item.
			if err := l.quotas.AdmitPush(tenant, len(items), p.Bytes()); err != nil {
				return nil, nil, err
			}
		}
		segs, err := l.store(ctx, db, p)
		if errors.Is(err, ErrPartitionGone) && attempt == 0 {
			if _, inTx := db.(pgx.Tx); !inTx {
				for _, it := range items {
					l.Invalidate(tenant, it.Queue)
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

// Bytes is what the packed segments will store: the compressed bodies.
func (p *Packed) Bytes() int64 {
	var n int64
	for _, g := range p.Segments {
		n += int64(len(g.Body))
	}
	return n
}

const logPushSQL = `SELECT partition_id, outcome, base_offset, dup_txids, dup_message_ids FROM queen.log_push_one_v1(
	p_partitions => $1, p_frames => $2, p_bodies => $3, p_checksums => $4, p_txids => $5, p_min_at => $6,
	p_max_at => $7, p_dedups => $8, p_dedup_txids => $9, p_dedup_msg_ids => $10)`

// store stores p's segments, dropping the items whose transaction ids the
// database already holds, and returns the segments it stored.
func (l *Log) store(ctx context.Context, db pg.DB, p *Packed) ([]*Segment, error) {
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
