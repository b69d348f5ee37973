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
// database already holds, and returns the segments it stored. On the pool it
// joins the pushes of other requests waiting for the same (see joinPushes).
func (l *Log) store(ctx context.Context, db pg.DB, p *Packed) ([]*Segment, error) {
	c := &pushCall{p: p}
	if db != pg.DB(l.pool) {
		l.call(ctx, db, []*pushCall{c})
	} else if err := l.pushes.Do(ctx, c); err != nil {
		return nil, fmt.Errorf("push: %w", err)
	}
	return c.segs, c.err
}

// A pushCall is one request's packed segments and, once a call has run,
// what it stored.
type pushCall struct {
	p    *Packed
	segs []*Segment
	err  error
}

// joinPushes is the joiner's call: one allocator call for the requests of
// batch. A request that repeats a client transaction id an earlier one of
// the batch pushes to the same partition runs on its own after them, so
// that it finds theirs stored, as it would have one after the other. When a
// partition is gone, nothing was stored and every request runs on its own,
// so that only those that push to it see it gone.
func (l *Log) joinPushes(ctx context.Context, batch []*pushCall) {
	joined, alone := batch, []*pushCall(nil)
	if len(batch) > 1 {
		joined, alone = split(batch)
	}
	l.call(ctx, l.pool, joined)
	if len(joined) > 1 && errors.Is(joined[0].err, ErrPartitionGone) {
		alone = append(alone, joined...)
	}
	for _, c := range alone {
		c.err = nil
		l.call(ctx, l.pool, []*pushCall{c})
	}
}

// split divides batch into the requests that repeat no client transaction
// id of an earlier joined request in the same partition, and the others.
// Sets of ids are built only for partitions that two requests push to.
func split(batch []*pushCall) (joined, alone []*pushCall) {
	first := make(map[uuid.UUID]*Segment, len(batch))
	var ids map[uuid.UUID]map[string]struct{}
	joined = make([]*pushCall, 0, len(batch))
	for _, c := range batch {
		clash := false
		for _, g := range c.p.Segments {
			if len(g.DedupTxIDs) == 0 {
				continue
			}
			f, seen := first[g.Partition.ID]
			if !seen {
				continue
			}
			set := ids[g.Partition.ID]
			if set == nil {
				if ids == nil {
					ids = map[uuid.UUID]map[string]struct{}{}
				}
				set = make(map[string]struct{}, 2*len(f.DedupTxIDs))
				for _, t := range f.DedupTxIDs {
					set[t] = struct{}{}
				}
				ids[g.Partition.ID] = set
			}
			for _, t := range g.DedupTxIDs {
				if _, dup := set[t]; dup {
					clash = true
					break
				}
			}
			if clash {
				break
			}
		}
		if clash {
			alone = append(alone, c)
			continue
		}
		for _, g := range c.p.Segments {
			if len(g.DedupTxIDs) == 0 {
				continue
			}
			if _, seen := first[g.Partition.ID]; !seen {
				first[g.Partition.ID] = g
			} else if set := ids[g.Partition.ID]; set != nil {
				for _, t := range g.DedupTxIDs {
					set[t] = struct{}{}
				}
			}
		}
		joined = append(joined, c)
	}
	return joined, alone
}

// call stores the segments of calls in one allocator call, dropping the
// items whose transaction ids the database already holds (and calling
// again without them), and answers each request: the segments it stored,
// or the error. The requests must not repeat each other's client
// transaction ids in a partition (split).
func (l *Log) call(ctx context.Context, db pg.DB, calls []*pushCall) {
	own := make([][]*Segment, len(calls))
	n := 0
	for i, c := range calls {
		own[i] = slices.Clone(c.p.Segments)
		n += len(own[i])
	}
	segs := make([]*Segment, 0, n)
	for {
		segs = segs[:0]
		for i := range own {
			segs = append(segs, own[i]...)
		}
		if len(segs) == 0 {
			break
		}
		SortSegments(segs)
		dups, err := l.allocate(ctx, db, segs)
		if err != nil {
			for _, c := range calls {
				c.err = err
			}
			return
		}
		if dups == nil {
			break
		}
		for i, c := range calls {
			own[i] = c.p.Drop(own[i], dups)
		}
	}
	for i, c := range calls {
		c.segs = own[i]
	}
}

// allocate runs queen.log_push_one_v1 over segs, sorted by partition id: it
// sets their BaseOffset, or returns the client transaction ids some
// partitions already hold (and stores nothing).
func (l *Log) allocate(ctx context.Context, db pg.DB, segs []*Segment) (map[uuid.UUID]map[string]uuid.UUID, error) {
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
	return dups, nil
}
