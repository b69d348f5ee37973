package counters

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// Sample is a replica's once-a-minute sample of its process, for
// system-metrics: CPU since the previous sample, in percent of one core,
// and memory, in bytes. The database adds its pool's connections.
type Sample struct {
	Replica               string
	At                    time.Time
	CPUUserPct, CPUSysPct float64
	RSS, Virtual          int64
}

// RunSamples writes a sample of the process at once and then at the start of
// every minute, until ctx ends.
func RunSamples(ctx context.Context, db Store, replica string, log *slog.Logger) {
	s := newSampler()
	for {
		now := time.Now()
		if err := s.sample(ctx, db, replica, now); err != nil && ctx.Err() == nil {
			log.Warn("analytics: sample the process", "err", err)
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(now.Truncate(time.Minute).Add(time.Minute).Sub(now)):
		}
	}
}

// sampler takes the samples.
type sampler struct {
	at            time.Time
	userUS, sysUS int64
	pageSize      int64
}

func newSampler() *sampler {
	s := &sampler{at: time.Now(), pageSize: int64(os.Getpagesize())}
	if u, sys, err := cpuTime(); err == nil {
		s.userUS, s.sysUS = u, sys
	}
	return s
}

// cpuTime is the CPU time the process has used, user and system, in µs.
func cpuTime() (user, sys int64, err error) {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0, 0, fmt.Errorf("getrusage: %w", err)
	}
	return ru.Utime.Nano() / 1000, ru.Stime.Nano() / 1000, nil
}

// memory is the process's virtual size and resident set, in bytes.
func (s *sampler) memory() (virtual, rss int64, err error) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, 0, fmt.Errorf("read memory use: %w", err)
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0, 0, fmt.Errorf("read memory use: /proc/self/statm holds %q", b)
	}
	size, err1 := strconv.ParseInt(f[0], 10, 64)
	res, err2 := strconv.ParseInt(f[1], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, 0, fmt.Errorf("read memory use: /proc/self/statm holds %q", b)
	}
	return size * s.pageSize, res * s.pageSize, nil
}

// sample writes this minute's sample of the replica.
func (s *sampler) sample(ctx context.Context, db Store, replica string, now time.Time) error {
	user, sys, err := cpuTime()
	if err != nil {
		return err
	}
	virtual, rss, err := s.memory()
	if err != nil {
		return err
	}
	wall := float64(now.Sub(s.at).Microseconds())
	userPct, sysPct := 0.0, 0.0
	if wall > 0 {
		userPct, sysPct = float64(user-s.userUS)*100/wall, float64(sys-s.sysUS)*100/wall
	}
	s.at, s.userUS, s.sysUS = now, user, sys
	return db.RecordReplicaSample(ctx, Sample{Replica: replica, At: now, CPUUserPct: userPct, CPUSysPct: sysPct,
		RSS: rss, Virtual: virtual})
}
