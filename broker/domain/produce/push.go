package produce

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"
	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/pg/db"
)

// Bytes is what the packed segments will store: the compressed bodies.
func (p *Packed) Bytes() int64 {
	var n int64
	for _, g := range p.Segments {
		n += int64(len(g.Body))
	}
	return n
}

// allocate stores p's segments, dropping the items whose transaction ids the
// database already holds, and returns the segments it stored: in tx when
// it is not nil, and otherwise on the pool, joined with the pushes of other
// requests waiting for the same (see joinPushes).
func (l *Producer) allocate(ctx context.Context, tx *db.DB, p *Packed) ([]*Segment, error) {
	c := &pushCall{p: p}
	if tx != nil {
		l.call(ctx, tx, []*pushCall{c})
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
func (l *Producer) joinPushes(ctx context.Context, batch []*pushCall) {
	joined, alone := batch, []*pushCall(nil)
	if len(batch) > 1 {
		joined, alone = split(batch)
	}
	l.call(ctx, l.db, joined)
	if len(joined) > 1 && errors.Is(joined[0].err, catalog.ErrPartitionGone) {
		alone = append(alone, joined...)
	}
	for _, c := range alone {
		c.err = nil
		l.call(ctx, l.db, []*pushCall{c})
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
func (l *Producer) call(ctx context.Context, d *db.DB, calls []*pushCall) {
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
		sortSegments(segs)
		bases, dups, err := d.Push(ctx, args(segs))
		if err != nil {
			for _, c := range calls {
				c.err = err
			}
			return
		}
		if dups == nil {
			for i, g := range segs {
				g.BaseOffset = bases[i]
			}
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
