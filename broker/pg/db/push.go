package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgtype"

	"github.com/regent-mq/regent/broker/domain/catalog"
	"github.com/regent-mq/regent/broker/tracing"
)

// Segments are packed segments as the parallel arrays that
// queen.log_push_one_v1 and queen_streams.cycle_request take: one element per
// segment, and the per-frame transaction ids and the dedup ids flattened
// segment after segment. The segments are sorted by partition id, the
// order the functions lock their partitions in.
type Segments struct {
	Partitions  [][16]byte
	Frames      []int32
	Bodies      [][]byte
	Checksums   []int64
	TxIDs       []string
	MinAt       []time.Time
	MaxAt       []time.Time
	Dedups      []int32
	DedupTxIDs  []string
	DedupMsgIDs [][16]byte
}

// logPushSQL names the first segment's partition first: on Citus the call
// goes whole to the worker that holds it (queen.log_push_v2).
const logPushSQL = `SELECT partition_id, outcome, base_offset, dup_txids, dup_message_ids FROM queen.log_push_v2(
	p_shard => $11, p_partitions => $1, p_frames => $2, p_bodies => $3, p_checksums => $4, p_txids => $5, p_min_at => $6,
	p_max_at => $7, p_dedups => $8, p_dedup_txids => $9, p_dedup_msg_ids => $10, p_dedup_window => $12)`

// Push stores segs with the allocator queen.log_push_one_v1, in one round
// trip: all of them, and it returns the offset each was stored at, in
// order; or, when some partitions already hold some of their client
// transaction ids, none, and it returns those ids with the message ids
// they were recorded with. A partition deleted since it was resolved is
// catalog.ErrPartitionGone, and nothing is stored.
func (d *DB) Push(ctx context.Context, segs Segments) ([]int64, Duplicates, error) {
	ctx, span := tracing.StartDB(ctx, "push")
	bases, dups, err := d.push(ctx, segs)
	tracing.End(span, err)
	return bases, dups, err
}

func (d *DB) push(ctx context.Context, segs Segments) ([]int64, Duplicates, error) {
	key := shard(segs.Partitions)
	rows, err := d.on(key).Query(ctx, logPushSQL, segs.Partitions, segs.Frames, segs.Bodies, segs.Checksums, segs.TxIDs,
		segs.MinAt, segs.MaxAt, segs.Dedups, segs.DedupTxIDs, segs.DedupMsgIDs, key, d.dedupWindow)
	if err != nil {
		return nil, nil, fmt.Errorf("push: %w", err)
	}
	var (
		pid     uuid.UUID
		outcome string
		base    pgtype.Int8
		txids   []string
		msgIDs  []uuid.UUID
		bases   = make([]int64, 0, len(segs.Partitions))
		dups    Duplicates
	)
	_, err = pgx.ForEachRow(rows, []any{&pid, &outcome, &base, &txids, &msgIDs}, func() error {
		switch outcome {
		case "stored":
			bases = append(bases, base.Int64)
		case "duplicates":
			if dups == nil {
				dups = Duplicates{}
			}
			dups[pid] = make(map[string]uuid.UUID, len(txids))
			for j, t := range txids {
				dups[pid][t] = msgIDs[j]
			}
		case "gone":
			return fmt.Errorf("partition %s: %w", pid, catalog.ErrPartitionGone)
		default:
			return fmt.Errorf("partition %s: unknown outcome %q", pid, outcome)
		}
		return nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("push: %w", err)
	}
	if dups != nil {
		return nil, dups, nil
	}
	if len(bases) != len(segs.Partitions) {
		return nil, nil, fmt.Errorf("push: %d segments stored of %d", len(bases), len(segs.Partitions))
	}
	return bases, nil, nil
}
