package produce

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/pg/db"
)

// A Write is one request's items for the log, and the write they are part
// of: a push on the pool, a push in the caller's transaction, or a cycle's
// sink emits.
type Write struct {
	Tenant string
	// Sub is the producer's subject, stamped on every frame.
	Sub   string
	Items []Item
	// Traceparent is the request's W3C trace context, stamped on every
	// item (see Trace); "" for none.
	Traceparent string
	// Tx, when set, is the caller's transaction (db.DB.InTx): the push is
	// not joined, and a partition gone behind the cache is returned as
	// catalog.ErrPartitionGone, since the transaction cannot run again.
	// The caller applies Emitted.After once tx commits.
	Tx *db.DB
	// Cycle, when set, is the cycle whose sink emits Items are: they are
	// stored by its call (db.DB.RunCycle), which Emit runs, and only
	// maxStoredBytes limits them (the cycle's source was pushed under the
	// push rates).
	Cycle *db.Cycle
}

// Emitted is what a committed write stored.
type Emitted struct {
	// Pushed answers every item, in item order.
	Pushed []Pushed
	// After is what the write leaves to do once committed (a cycle's
	// source partition included), for commit.Applier.Apply.
	After commit.After
	// Cycle is what a cycle came to; zero for a push.
	Cycle db.CycleResult
}

// Emit packs w's items, checks them against the tenant's quotas (a
// *quota.Refusal means nothing was stored), and stores them in one call
// (plus one when the database already holds some of their client
// transaction ids, which are then answered as duplicates). A partition
// deleted behind the cache is resolved again and the write run again,
// once, unless it runs in the caller's transaction.
func (l *Producer) Emit(ctx context.Context, w Write) (Emitted, error) {
	l.Trace(w.Items, w.Traceparent)
	p, err := l.pack(ctx, w)
	if err != nil {
		return Emitted{}, err
	}
	if w.Cycle == nil {
		// Whole requests or nothing: a refused push stores no item.
		err = l.quotas.AdmitPush(w.Tenant, len(w.Items), p.Bytes())
	} else if len(w.Items) > 0 {
		err = l.quotas.AdmitStore(w.Tenant, p.Bytes())
	}
	if err != nil {
		return Emitted{}, err
	}
	for resolved := false; ; resolved = true {
		e, err := l.store(ctx, w.Tx, w.Cycle, p)
		if !errors.Is(err, catalog.ErrPartitionGone) || resolved || w.Tx != nil {
			return e, err
		}
		for _, it := range w.Items {
			l.catalog.Invalidate(w.Tenant, it.Queue)
		}
		if p, err = l.pack(ctx, w); err != nil {
			return Emitted{}, err
		}
	}
}

// pack is Pack on w's items; a cycle without items packs nothing. w is a
// copy: a pointer to it would let the cycle escape to the heap.
func (l *Producer) pack(ctx context.Context, w Write) (*Packed, error) {
	if w.Cycle != nil && len(w.Items) == 0 {
		return &Packed{}, nil
	}
	var near uuid.UUID
	if w.Cycle != nil {
		near = w.Cycle.PartitionID // the sink partitions beside the source
	}
	return l.Pack(ctx, w.Tenant, w.Sub, near, w.Items)
}

// store stores p's segments once: in cycle when it is not nil, and
// otherwise by a push, in tx when it is not nil.
func (l *Producer) store(ctx context.Context, tx *db.DB, cycle *db.Cycle, p *Packed) (Emitted, error) {
	var e Emitted
	var segs []*Segment
	var err error
	if cycle == nil {
		segs, err = l.allocate(ctx, tx, p)
	} else {
		segs, e.Cycle, err = l.cycle(ctx, cycle, p)
	}
	if err != nil {
		return Emitted{}, err
	}
	e.Pushed, e.After = p.Results(segs), afterPush(segs)
	if e.Cycle.Announce {
		e.After.Announce = append(e.After.Announce, commit.Partition{Queue: e.Cycle.QueueID, Partition: cycle.PartitionID})
	}
	return e, nil
}

// cycle runs c with p's segments, sorted by partition id (the lock order),
// dropping the items whose transaction ids the database already holds and
// running it again without them, and returns the segments it stored.
func (l *Producer) cycle(ctx context.Context, c *db.Cycle, p *Packed) ([]*Segment, db.CycleResult, error) {
	segs := slices.Clone(p.Segments)
	sortSegments(segs)
	for {
		c.Segments = args(segs)
		res, err := l.db.RunCycle(ctx, *c)
		switch {
		case err != nil:
			return nil, res, err
		case res.Gone:
			return nil, res, fmt.Errorf("run cycle: %w", catalog.ErrPartitionGone)
		case res.Duplicates != nil:
			segs = p.Drop(segs, res.Duplicates)
		default:
			for i, g := range segs {
				g.BaseOffset = res.BaseOffsets[i]
			}
			return segs, res, nil
		}
	}
}
