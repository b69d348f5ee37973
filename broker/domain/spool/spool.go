// Package spool is push maintenance's durable spool (queue-admin-api.md
// §7): while the mode is on, POST /api/v1/push never touches the database;
// this replica appends each item to a local file and answers "buffered" once
// the file is fsync'd, so an acknowledged item survives a crash. When the
// mode goes off, or at start when the spool holds items, the spool drains in
// arrival order through the normal push path (broker/domain/produce).
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
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/regent-mq/regent/broker/domain/commit"
	"github.com/regent-mq/regent/broker/domain/produce"
)

// Switch is push maintenance as this replica sees it (flags.Flags).
type Switch interface {
	// Maintenance reports whether the mode is on.
	Maintenance() bool
	// Known reports whether the switch has been read at least once: until
	// then, off means nothing, and the spool does not drain.
	Known() bool
}

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
