package counters

import (
	"bytes"
	"cmp"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/regent-mq/regent/broker/ids"
)

// Settings are where the counts come from and how often they are flushed.
type Settings struct {
	Replica    string        // this replica's name: its pod name
	FlushEvery time.Duration // how often the counts go to the database
}

// Run flushes the counts every FlushEvery and samples the parked
// long-polls every second and the process once a minute, until ctx ends;
// then it flushes what is left. The retention sweep deletes old minutes
// (Sweep), one replica at a time.
func (c *Counters) Run(ctx context.Context, pool *pgxpool.Pool, s Settings, log *slog.Logger) {
	flush := time.NewTicker(s.FlushEvery)
	defer flush.Stop()
	second := time.NewTicker(time.Second)
	defer second.Stop()
	sampler := newSampler(pool)
	var lastSample time.Time
	for {
		now := time.Now()
		if now.Unix()/60 != lastSample.Unix()/60 {
			lastSample = now
			if err := sampler.sample(ctx, s.Replica, now); err != nil && ctx.Err() == nil {
				log.Warn("analytics: sample the process", "err", err)
			}
		}
		select {
		case <-ctx.Done():
			// The pool is closed only after Run returns: the last counts go.
			fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := c.Flush(fctx, pool, s.Replica); err != nil {
				log.Warn("analytics: flush counters at shutdown", "err", err)
			}
			cancel()
			return
		case <-second.C:
			c.sampleParked()
		case <-flush.C:
			if err := c.Flush(ctx, pool, s.Replica); err != nil && ctx.Err() == nil {
				log.Warn("analytics: flush counters", "err", err)
			}
		}
	}
}

// upsert adds one row per (tenant, minute, queue) to the replica's rows:
// one statement for every queue and minute counted since the last flush.
var upsert = func() string {
	var cols, params, sets strings.Builder
	for i, name := range append(Columns[:], "lag_max_ms") {
		fmt.Fprintf(&cols, ", %s", name)
		fmt.Fprintf(&params, ", $%d::bigint[]", i+5)
		set := "queue_minutes." + name + " + EXCLUDED." + name
		if name == "lag_max_ms" {
			set = "greatest(queue_minutes.lag_max_ms, EXCLUDED.lag_max_ms)"
		}
		fmt.Fprintf(&sets, ", %s = %s", name, set)
	}
	return `INSERT INTO queen.queue_minutes (tenant, minute, queue, replica` + cols.String() + `)
		SELECT u.tenant, to_timestamp(u.minute * 60), u.queue, $4` + strings.ReplaceAll(cols.String(), ", ", ", u.") + `
		  FROM unnest($1::text[], $2::bigint[], $3::text[]` + params.String() + `)
		       AS u (tenant, minute, queue` + cols.String() + `)
		ON CONFLICT (tenant, minute, queue, replica) DO UPDATE SET ` + strings.TrimPrefix(sets.String(), ", ")
}()

// Flush adds the counts so far to the replica's rows, in one transaction of
// at most two statements. Counts that fail to reach the database stay for
// the next flush.
func (c *Counters) Flush(ctx context.Context, db *pgxpool.Pool, replica string) error {
	taken, cyc := c.take()
	if len(taken) == 0 && len(cyc) == 0 {
		return nil
	}
	batch := &pgx.Batch{}
	if len(taken) > 0 {
		batch.Queue(upsert, queueArgs(taken, replica)...)
	}
	if len(cyc) > 0 {
		batch.Queue(upsertCycles, cycleArgs(cyc, replica)...)
	}
	if err := db.SendBatch(ctx, batch).Close(); err != nil {
		c.giveBack(taken, cyc)
		return fmt.Errorf("flush %d queue minutes and %d query minutes: %w", len(taken), len(cyc), err)
	}
	return nil
}

// queueArgs lays the queues' minutes out for upsert, in the same order in
// every flush, so that two replicas that share a name never lock each
// other's rows in opposite orders.
func queueArgs(taken map[key]*bucket, replica string) []any {
	keys := make([]key, 0, len(taken))
	for k := range taken {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b key) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), cmp.Compare(a.minute, b.minute), cmp.Compare(a.queue, b.queue))
	})
	tenants, queues := make([]string, len(keys)), make([]string, len(keys))
	minutes := make([]int64, len(keys))
	counts := make([][]int64, Fields+1)
	for f := range counts {
		counts[f] = make([]int64, len(keys))
	}
	for i, k := range keys {
		tenants[i], minutes[i], queues[i] = k.tenant, k.minute, k.queue
		b := taken[k]
		for f := range Fields {
			counts[f][i] = b.n[f]
		}
		counts[Fields][i] = b.lagMax
	}
	args := []any{tenants, minutes, queues, replica}
	for _, col := range counts {
		args = append(args, col)
	}
	return args
}

// upsertCycles adds one row per (tenant, query, minute) to the replica's.
const upsertCycles = `INSERT INTO queen_streams.query_minutes (tenant, query_id, minute, replica, cycles, refused)
	SELECT u.tenant, u.query_id, to_timestamp(u.minute * 60), $4, u.cycles, u.refused
	  FROM unnest($1::text[], $2::uuid[], $3::bigint[], $5::bigint[], $6::bigint[]) AS u (tenant, query_id, minute, cycles, refused)
	ON CONFLICT (tenant, query_id, minute, replica) DO UPDATE
	   SET cycles = query_minutes.cycles + EXCLUDED.cycles, refused = query_minutes.refused + EXCLUDED.refused`

func cycleArgs(cyc map[queryKey]*cycles, replica string) []any {
	keys := make([]queryKey, 0, len(cyc))
	for k := range cyc {
		keys = append(keys, k)
	}
	slices.SortFunc(keys, func(a, b queryKey) int {
		return cmp.Or(cmp.Compare(a.tenant, b.tenant), bytes.Compare(a.query[:], b.query[:]), cmp.Compare(a.minute, b.minute))
	})
	tenants, queries := make([]string, len(keys)), make([]uuid.UUID, len(keys))
	minutes, done, refused := make([]int64, len(keys)), make([]int64, len(keys)), make([]int64, len(keys))
	for i, k := range keys {
		tenants[i], queries[i], minutes[i] = k.tenant, k.query, k.minute
		done[i], refused[i] = cyc[k][0], cyc[k][1]
	}
	return []any{tenants, ids.IDs(queries), minutes, replica, done, refused}
}
