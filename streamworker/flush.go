package streamworker

import (
	"context"
	"fmt"
	"net/http"
	"net/url"
	"time"

	"github.com/regent-mq/regent/pipeline"
)

// flushIfIdle closes the windows ripe by the wall clock on every quiet
// partition of the source, once pops have found nothing for idleFlush
// since the broker last failed to answer: a pop lost in an outage may have
// left a lease that hides data until it expires.
func (w *Worker) flushIfIdle(ctx context.Context) error {
	idle := w.cfg.Program.IdleFlush
	since := max(w.quietSince.Load(), w.c.lastFailure.Load())
	if !w.cfg.Program.Stateful() || since == 0 || time.Since(time.Unix(0, since)) < idle || !w.flushing.TryLock() {
		return nil
	}
	defer w.flushing.Unlock()
	var q struct {
		Partitions []struct {
			ID   string `json:"id"`
			Name string `json:"name"`
		} `json:"partitions"`
	}
	status, err := w.c.call(ctx, "GET", "/api/v1/resources/queues/"+url.PathEscape(w.cfg.Source), nil, &q)
	switch {
	case err != nil:
		return fmt.Errorf("list the source's partitions: %w", err)
	case status == http.StatusNotFound:
		q.Partitions = nil // nothing pushed yet
	case status != http.StatusOK:
		return fmt.Errorf("list the source's partitions: status %d", status)
	}
	for _, e := range q.Partitions {
		if err := w.flush(ctx, w.partition(e.ID, e.Name)); err != nil {
			return err
		}
	}
	// The next round waits for another idle period.
	w.quietSince.Store(time.Now().UnixNano())
	return nil
}

func (w *Worker) flush(ctx context.Context, p *partition) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := time.Now()
	ripe, err := w.readState(ctx, p, map[string]any{"key_prefix": pipeline.Prefix,
		"ripe_at_or_before": now.Add(-w.cfg.Program.Lateness()).UnixMilli()})
	if err != nil || len(ripe) == 0 {
		return err
	}
	clock, err := w.readState(ctx, p, map[string]any{"keys": []string{pipeline.ClockKey}})
	if err != nil {
		return err
	}
	s, err := w.cfg.Program.NewShard(w.scope(p), append(ripe, clock...))
	if err != nil {
		return err
	}
	if now.UnixMilli()-s.FoldedAt() < w.cfg.Program.IdleFlush.Milliseconds() {
		return nil // folded recently, maybe by another worker: not idle
	}
	s.Flush(now)
	ops, pushes, err := s.Commit(nil)
	if err != nil {
		return err
	}
	w.log.Info("flushing an idle partition", "partition", p.name, "windows", s.Emitted)
	done, err := w.cycle(ctx, p, kindFlush, ops, pushes, nil, 0)
	if done != nil {
		w.counted(p, s)
	}
	return err
}
