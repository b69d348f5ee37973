package counters

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"
)

// sampler takes the once-a-minute sample of the process (CPU since the
// previous sample, memory) and of its pool for system-metrics.
type sampler struct {
	pool          *pgxpool.Pool
	at            time.Time
	userUS, sysUS int64
	pageSize      int64
}

func newSampler(pool *pgxpool.Pool) *sampler {
	s := &sampler{pool: pool, at: time.Now(), pageSize: int64(os.Getpagesize())}
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
func (s *sampler) sample(ctx context.Context, replica string, now time.Time) error {
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
	st := s.pool.Stat()
	_, err = s.pool.Exec(ctx, `INSERT INTO queen.replica_samples (replica, minute, sampled_at, cpu_user_pct, cpu_sys_pct,
			rss_bytes, virtual_bytes, pool_size, pool_idle, pool_active)
		VALUES ($1, date_trunc('minute', $2::timestamptz), $2, $3, $4, $5, $6, $7, $8, $9)
		ON CONFLICT (minute, replica) DO UPDATE SET sampled_at = EXCLUDED.sampled_at,
			cpu_user_pct = EXCLUDED.cpu_user_pct, cpu_sys_pct = EXCLUDED.cpu_sys_pct,
			rss_bytes = EXCLUDED.rss_bytes, virtual_bytes = EXCLUDED.virtual_bytes,
			pool_size = EXCLUDED.pool_size, pool_idle = EXCLUDED.pool_idle, pool_active = EXCLUDED.pool_active`,
		replica, now, userPct, sysPct, rss, virtual, st.TotalConns(), st.IdleConns(), st.AcquiredConns())
	if err != nil {
		return fmt.Errorf("write the replica sample: %w", err)
	}
	return nil
}
