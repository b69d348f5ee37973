// Package spool is push maintenance's durable spool (queue-admin-api.md
// §7): while the mode is on, POST /api/v1/push never touches the database;
// this replica appends each item to a local file and answers "buffered" once
// the file is fsync'd, so an acknowledged item survives a crash. When the
// mode goes off, or at start when the spool holds items, the spool drains in
// arrival order through the normal push path (broker/produce).
//
// Exactly once: every spooled item carries a transaction id (a UUIDv7 that
// is also its message id when the client sent none), so the database
// deduplicates any item pushed twice. A drain pushes a batch, commits it,
// then records in a checkpoint file how far the file is pushed, and removes
// the file once all of it is; a crash between the commit and the checkpoint
// replays the batch, and the replay's items answer duplicate.
//
// Order: a partition receives the spooled pushes of one replica in the
// order they arrived there. Pushes that arrive once the mode is off go to
// the database at once, so they may overtake spooled ones still draining,
// as pushes through different replicas may overtake each other anyway.
// Until a replica has read the switch once after its start (well under a
// second), its pushes go to the database.
//
// Files: appends go to one open file; a drain first seals it (fsync,
// close), so that appends that arrive meanwhile start a new file, and
// drains the sealed files in order. Concurrent appends share their fsync
// (group commit): whoever syncs covers everything written before it.
package spool

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/commit"
	"github.com/regent-mq/regent/broker/produce"
)

// Switch is push maintenance as this replica sees it (flags.Flags).
type Switch interface {
	// Maintenance reports whether the mode is on.
	Maintenance() bool
	// Known reports whether the switch has been read at least once: until
	// then, off means nothing, and the spool does not drain.
	Known() bool
}

// Drain pacing: a replica sees the switch go off within a second
// (broker/flags); checking it ten times a second adds little to that. A
// failed drain (the database is away) is retried after drainRetry.
const (
	pollEvery  = 100 * time.Millisecond
	drainRetry = time.Second
	// A drain pushes up to this many records, or bytes, per call.
	batchRecords = 1000
	batchBytes   = 8 << 20
)

// Spool is one replica's spool directory. It is safe for concurrent use.
type Spool struct {
	dir      string
	producer *produce.Producer
	after    *commit.Applier // applies what the drained pushes leave to do
	sw       Switch
	gauge    prometheus.Gauge
	logger   *slog.Logger
	lock     *os.File // flock'd: one broker per directory

	pending pending // records not yet pushed

	// syncMu serializes fsyncs and sealing; it is taken before mu.
	syncMu sync.Mutex
	synced uint64 // appends covered by an fsync

	mu      sync.Mutex
	cur     *os.File // the file appends go to; nil until the next append
	curSize int64
	next    uint64 // sequence number of the next file
	appends uint64 // appends so far, the group commit's clock
	broken  error  // set when cur can no longer be trusted; cleared by sealing it
}

// Open opens (creating it if need be) the spool directory dir, takes its
// lock, and counts what earlier runs left to push. It fails when the
// directory cannot be written, or another broker holds it.
func Open(dir string, producer *produce.Producer, after *commit.Applier, sw Switch, gauge prometheus.Gauge, logger *slog.Logger) (*Spool, error) {
	s := &Spool{dir: dir, producer: producer, after: after, sw: sw, gauge: gauge, logger: logger, next: 1}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("spool dir %s: %w", dir, err)
	}
	if err := probe(dir); err != nil {
		return nil, fmt.Errorf("spool dir %s is not writable: %w", dir, err)
	}
	lock, err := os.OpenFile(filepath.Join(dir, lockName), os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("spool dir %s: %w", dir, err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		lock.Close()
		return nil, fmt.Errorf("spool dir %s is in use by another broker: %w", dir, err)
	}
	s.lock = lock
	seqs, err := files(dir)
	if err != nil {
		s.Close()
		return nil, err
	}
	for _, seq := range seqs {
		n, err := s.count(logPath(dir, seq))
		if err != nil {
			s.Close()
			return nil, err
		}
		s.next = seq + 1
		if n == 0 { // pushed whole; a crash came before its removal
			if err := s.remove(logPath(dir, seq)); err != nil {
				s.Close()
				return nil, err
			}
		}
	}
	s.setGauge()
	if n := s.pending.total(); n > 0 {
		logger.Info("the spool holds pushes of an earlier run; they drain once push maintenance is off", "dir", dir, "messages", n)
	}
	return s, nil
}

// probe writes, syncs and removes a file in dir.
func probe(dir string) error {
	f, err := os.CreateTemp(dir, ".probe-")
	if err != nil {
		return err
	}
	_, err = f.Write([]byte("regent"))
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if rerr := os.Remove(f.Name()); err == nil {
		err = rerr
	}
	return err
}

// count counts the records of the file that are not pushed yet, and returns
// how many there are.
func (s *Spool) count(path string) (int64, error) {
	r, err := openReader(path, pushedUpTo(path))
	if err != nil {
		return 0, err
	}
	defer r.Close()
	var n int64
	for {
		rec, err := r.next()
		if err == io.EOF {
			return n, nil
		} else if err != nil {
			return 0, err
		}
		s.pending.add(rec.Tenant, 1)
		n++
	}
}

// Close syncs and closes the open file and releases the directory.
func (s *Spool) Close() error {
	_, err := s.seal()
	if s.lock != nil {
		if cerr := s.lock.Close(); err == nil {
			err = cerr
		}
	}
	return err
}

// Buffering reports whether pushes go to the spool now.
func (s *Spool) Buffering() bool { return s.sw.Maintenance() }

// Pending is how many messages of the tenant the spool holds, not pushed
// yet. With tenancy off, every push is the default tenant's.
func (s *Spool) Pending(tenant string) int64 { return s.pending.of(tenant) }

// Healthy reports whether the spool takes appends: false after a write or
// fsync failed in a way that leaves the open file in doubt, until the next
// drain seals it.
func (s *Spool) Healthy() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.broken == nil
}

func (s *Spool) setGauge() { s.gauge.Set(float64(s.pending.total())) }

// pending counts the records not pushed yet, by tenant and in all.
type pending struct {
	mu       sync.Mutex
	all      int64
	byTenant map[string]int64
}

func (p *pending) add(tenant string, n int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.byTenant == nil {
		p.byTenant = map[string]int64{}
	}
	p.all += n
	if p.byTenant[tenant] += n; p.byTenant[tenant] == 0 {
		delete(p.byTenant, tenant)
	}
}

func (p *pending) addAll(recs []Record, sign int64) {
	for _, r := range recs {
		p.add(r.Tenant, sign)
	}
}

func (p *pending) of(tenant string) int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.byTenant[tenant]
}

func (p *pending) total() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.all
}

// Append writes recs to the spool and returns once they are on disk. When
// it fails, none of them is spooled, unless the failure was the fsync, after
// which the spool refuses appends until it is sealed.
func (s *Spool) Append(recs []Record) error {
	var buf []byte
	for _, r := range recs {
		var err error
		if buf, err = appendRecord(buf, r); err != nil {
			return err
		}
	}
	s.mu.Lock()
	if s.broken != nil {
		s.mu.Unlock()
		return s.broken
	}
	if s.cur == nil {
		if err := s.create(); err != nil {
			s.mu.Unlock()
			return err
		}
	}
	pos := s.curSize
	if _, err := s.cur.Write(buf); err != nil {
		// Take the partial record back off, so that the next append does
		// not land behind a torn record, where a reader stops.
		if terr := s.cur.Truncate(pos); terr != nil {
			s.broken = fmt.Errorf("spool file %s holds a torn record: %w", s.cur.Name(), terr)
		}
		s.mu.Unlock()
		return fmt.Errorf("append to spool file: %w", err)
	}
	s.curSize += int64(len(buf))
	s.appends++
	mine := s.appends
	s.pending.addAll(recs, 1)
	s.mu.Unlock()
	s.setGauge()
	return s.syncTo(mine)
}

// create opens the next file for appends; mu is held.
func (s *Spool) create() error {
	path := logPath(s.dir, s.next)
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL|os.O_APPEND, 0o600)
	if err != nil {
		return fmt.Errorf("create spool file: %w", err)
	}
	if err := syncDir(s.dir); err != nil {
		f.Close()
		os.Remove(path)
		return fmt.Errorf("create spool file: sync dir: %w", err)
	}
	s.cur, s.curSize = f, 0
	s.next++
	return nil
}

// syncTo returns once the appends up to mine are fsync'd, syncing itself
// unless another caller's fsync already covered them.
func (s *Spool) syncTo(mine uint64) error {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	if s.synced >= mine {
		return nil
	}
	s.mu.Lock()
	f, upto, broken := s.cur, s.appends, s.broken
	s.mu.Unlock()
	if broken != nil {
		return broken
	}
	if err := f.Sync(); err != nil {
		// After a failed fsync the kernel may have dropped the pages:
		// nothing written to this file can be trusted to be on disk.
		err = fmt.Errorf("fsync spool file %s: %w", f.Name(), err)
		s.mu.Lock()
		s.broken = err
		s.mu.Unlock()
		return err
	}
	s.synced = upto
	return nil
}

// seal syncs and closes the open file, so that the next append starts a new
// one, and returns the sequence number below which every file is sealed:
// read at the same moment, since an append may open the next file as soon
// as the lock is released.
func (s *Spool) seal() (uint64, error) {
	s.syncMu.Lock()
	defer s.syncMu.Unlock()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.cur == nil {
		return s.next, nil
	}
	if err := s.cur.Sync(); err != nil {
		// The appends waiting for an fsync must fail, not pass for
		// synced: the file stays open, and the spool refuses appends,
		// until a later seal succeeds.
		s.broken = fmt.Errorf("seal spool file %s: %w", s.cur.Name(), err)
		return 0, s.broken
	}
	// Once synced, a failed close loses nothing.
	err := s.cur.Close()
	s.cur, s.synced, s.broken = nil, s.appends, nil
	if err != nil {
		return 0, fmt.Errorf("seal spool file: %w", err)
	}
	return s.next, nil
}

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
