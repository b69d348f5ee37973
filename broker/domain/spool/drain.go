package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/regent-mq/regent/broker/domain/produce"
)

// Drain pacing: a replica sees the switch go off within a second
// (broker/domain/flags); checking it ten times a second adds little to that. A
// failed drain (the database is away) is retried after drainRetry.
const (
	pollEvery  = 100 * time.Millisecond
	drainRetry = time.Second
	// A drain pushes up to this many records, or bytes, per call.
	batchRecords = 1000
	batchBytes   = 8 << 20
)

// Run drains the spool whenever push maintenance is off and it holds
// anything, until ctx ends.
func (s *Spool) Run(ctx context.Context) {
	t := time.NewTicker(pollEvery)
	defer t.Stop()
	for {
		if s.pending.total() > 0 && s.sw.Known() && !s.sw.Maintenance() {
			if err := s.drain(ctx); err != nil && ctx.Err() == nil {
				s.logger.Warn("spool drain failed; retrying", "err", err, "pending", s.pending.total())
				select {
				case <-ctx.Done():
				case <-time.After(drainRetry):
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// errPaused stops a drain when push maintenance comes back on.
var errPaused = errors.New("push maintenance is on")

// drain pushes every sealed record, oldest first, and removes the files it
// finished. It stops early, without error, when push maintenance comes back
// on. Only Run calls it, so drains never overlap.
func (s *Spool) drain(ctx context.Context) error {
	upto, err := s.seal()
	if err != nil {
		return err
	}
	seqs, err := files(s.dir)
	if err != nil {
		return err
	}
	for _, seq := range seqs {
		if seq >= upto {
			break
		}
		if err := s.drainFile(ctx, logPath(s.dir, seq)); errors.Is(err, errPaused) {
			return nil
		} else if err != nil {
			return err
		}
	}
	return nil
}

func (s *Spool) drainFile(ctx context.Context, path string) error {
	r, err := openReader(path, pushedUpTo(path))
	if err != nil {
		return err
	}
	defer r.Close()
	batch := make([]Record, 0, 64)
	for {
		if s.sw.Maintenance() {
			return errPaused
		}
		batch = batch[:0]
		size := 0
		for len(batch) < batchRecords && size < batchBytes {
			rec, err := r.next()
			if err == io.EOF {
				break
			} else if err != nil {
				return err
			}
			batch = append(batch, rec)
			size += len(rec.Item.Payload)
		}
		if len(batch) == 0 {
			break
		}
		if err := s.push(ctx, batch); err != nil {
			return err
		}
		if err := checkpoint(path, r.off); err != nil {
			return err
		}
		s.pending.addAll(batch, -1)
		s.setGauge()
	}
	return s.remove(path)
}

// remove removes a pushed file and its checkpoint. The checkpoint goes
// first: a crash in between leaves a file that is replayed whole, which
// dedup makes safe, where the other order could leave a checkpoint that a
// later file of the same number would obey.
func (s *Spool) remove(path string) error {
	if err := os.Remove(donePath(path)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("remove pushed spool checkpoint: %w", err)
	}
	if err := os.Remove(path); err != nil {
		return fmt.Errorf("remove pushed spool file: %w", err)
	}
	return syncDir(s.dir)
}

// push pushes a batch through the write path, one call per run of records
// of one tenant and producer.
func (s *Spool) push(ctx context.Context, batch []Record) error {
	for i := 0; i < len(batch); {
		j := i + 1
		for j < len(batch) && batch[j].Tenant == batch[i].Tenant && batch[j].Sub == batch[i].Sub {
			j++
		}
		items := make([]produce.Item, j-i)
		for k := range items {
			items[k] = batch[i+k].Item
		}
		e, err := s.producer.Emit(ctx, produce.Write{Tenant: batch[i].Tenant, Sub: batch[i].Sub, Items: items})
		if err != nil {
			return fmt.Errorf("drain spool: push %d messages: %w", len(items), err)
		}
		s.after.Apply(e.After)
		i = j
	}
	return nil
}
