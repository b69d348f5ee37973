package admin

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/pg/db"
)

// handleSystemMetrics is GET /api/v1/analytics/system-metrics: each
// replica's once-a-minute samples of its process and pool, by bucket.
// Queen's threadpool, registries and shared_state blocks are left out
// (§5). Cost: one range scan of replica_samples (minute, replica), one row
// per replica and minute.
func (a *Analytics) handleSystemMetrics(w http.ResponseWriter, r *http.Request) {
	// The samples are the cluster's, not a tenant's.
	win, samples, ok := windowed(a, w, r, func(ctx context.Context, _ string, win db.Window) ([]db.ReplicaSample, error) {
		return a.store.ReplicaSamples(ctx, win)
	})
	if !ok {
		return
	}
	replicas := []map[string]any{}
	points := 0
	for start := 0; start < len(samples); {
		end := start
		for end < len(samples) && samples[end].Replica == samples[start].Replica {
			end++
		}
		series := systemSeries(samples[start:end], win.Width)
		points = max(points, len(series))
		replicas = append(replicas, map[string]any{"hostname": samples[start].Replica, "port": nil, "workerId": 0,
			"timeSeries": series})
		start = end
	}
	httpx.WriteJSON(w, http.StatusOK, map[string]any{
		"timeRange": timeRangeJSON(win), "replicas": replicas, "replicaCount": len(replicas),
		"bucketMinutes": bucketMinutes(win), "pointCount": points,
	})
}

// leaf is one metric over a bucket: {avg, min, max, last}.
type leaf struct {
	sum, min, max, last float64
	n                   int
}

func (l *leaf) add(v float64) {
	if l.n == 0 || v < l.min {
		l.min = v
	}
	if l.n == 0 || v > l.max {
		l.max = v
	}
	l.sum, l.last = l.sum+v, v
	l.n++
}

func (l *leaf) json() map[string]float64 {
	return map[string]float64{"avg": math.Round(l.sum/float64(l.n)*100) / 100, "min": l.min, "max": l.max, "last": l.last}
}

// systemSeries rolls one replica's samples (by minute) into buckets.
func systemSeries(samples []db.ReplicaSample, width time.Duration) []map[string]any {
	out := []map[string]any{}
	for start := 0; start < len(samples); {
		bucket := samples[start].Minute.Truncate(width)
		var user, sys, rss, virt, size, idle, active leaf
		end := start
		for ; end < len(samples) && samples[end].Minute.Truncate(width).Equal(bucket); end++ {
			s := samples[end]
			// cpu.*_us is percent × 100, as Queen reports it.
			user.add(math.Round(s.CPUUser * 100))
			sys.add(math.Round(s.CPUSys * 100))
			rss.add(float64(s.RSS))
			virt.add(float64(s.Virtual))
			size.add(float64(s.PoolSize))
			idle.add(float64(s.PoolIdle))
			active.add(float64(s.PoolActive))
		}
		out = append(out, map[string]any{"timestamp": bucketKey(bucket), "sampleCount": end - start, "metrics": map[string]any{
			"cpu":      map[string]any{"user_us": user.json(), "system_us": sys.json()},
			"memory":   map[string]any{"rss_bytes": rss.json(), "virtual_bytes": virt.json()},
			"database": map[string]any{"pool_size": size.json(), "pool_idle": idle.json(), "pool_active": active.json()},
		}})
		start = end
	}
	return out
}

// handlePostgresStats is GET /api/v1/analytics/postgres-stats: a snapshot
// of PostgreSQL's statistics views for queen and queen_streams. They are
// the cluster's, not a tenant's, and hold no rows of any tenant. Cost: one
// round trip, a batch of reads of the statistics views (see
// db.PostgresStats).
func (a *Analytics) handlePostgresStats(w http.ResponseWriter, r *http.Request) {
	database, stats, err := a.store.PostgresStats(r.Context())
	if err != nil {
		a.fail(w, r, err)
		return
	}
	first := func(name string) map[string]any {
		if rows := stats[name]; len(rows) > 0 {
			return rows[0]
		}
		return map[string]any{}
	}
	summary := map[string]any{"tables": map[string]any{}, "indexes": map[string]any{}}
	for _, row := range stats["cacheSummary"] {
		kind := row["kind"].(string)
		delete(row, "kind")
		summary[kind] = row
	}
	out := map[string]any{
		"timestamp": instantOf(time.Now()), "database": database,
		"databaseCache": first("databaseCache"), "cacheSummary": summary, "bufferConfig": first("bufferConfig"),
		"bufferUsage": []any{}, // without the pg_buffercache extension
	}
	for _, name := range []string{"tableCache", "indexCache", "deadTuples", "hotUpdates", "autovacuumStatus", "activeQueries", "tableSizes"} {
		out[name] = nonNil(stats[name])
	}
	httpx.WriteJSON(w, http.StatusOK, out)
}
