package spool

import (
	"fmt"
	"os"
)

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
