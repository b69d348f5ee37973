package db

import (
	"context"
	"fmt"
	"time"
	"unicode/utf8"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5"
	"github.com/regent-mq/regent/broker/domain/ids"
)

// StateFilter selects the state rows of one query and one partition. The
// filters are ANDed; a zero field is no filter. That the query is the
// caller's tenant's is the caller's check (catalog.Catalog.OwnsQuery): the
// statement reads the state table alone, which Citus plans on its fast
// path, where a join to queen_streams.queries, a reference table, cost
// the worker three times as much (CITUS.md, "Figures measured so far").
type StateFilter struct {
	QueryID        uuid.UUID
	PartitionID    uuid.UUID
	Keys           []string
	KeyPrefix      string
	RipeAtOrBefore *float64 // epoch ms, against a numeric value.windowEnd
	// Mark records the rows a ripe read returns as read (a caller that may
	// flush them); without RipeAtOrBefore, it does nothing.
	Mark bool
}

// A prefix read is the key range [prefix, successor(prefix)) on the primary
// key, whose key column compares bytewise, so % and _ mean nothing special.
const stateWhere = `s.query_id = $1 AND s.partition_id = $2
	  AND ($3::text[] IS NULL OR s.key = ANY ($3))
	  AND ($4::text IS NULL OR s.key >= $4)
	  AND ($5::text IS NULL OR s.key < $5)
	  AND ($6::float8 IS NULL OR CASE WHEN jsonb_typeof(s.value->'windowEnd') = 'number'
	                                  THEN (s.value->'windowEnd')::float8 <= $6 END)`

const stateSQL = `SELECT s.key, s.value, s.updated_at FROM queen_streams.state s WHERE ` + stateWhere + `
	ORDER BY s.key`

// ripeReadSQL is a ripe read that records, on each row it returns, the
// updated_at it returned (ripe_read_at), which an idle flush's deletes are
// checked against (queen_streams.cycle_rules, rule 5). When a row needs the
// mark, it takes the (query, partition) lock of the cycles before marking,
// so that it never waits on a row a cycle has locked and deadlocks with
// it; a read of rows all marked already writes nothing and takes no lock.
// The lock is taken on the partition's row, as the cycles take it: on
// Citus, on the node that holds the partition's shard.
// Its snapshot may predate a cycle that committed while it waited: the mark
// is then the updated_at it returns, older than the row's, and a flush of
// what it returned is deferred, as it must be.
const ripeReadSQL = `WITH r AS (SELECT s.key, s.value, s.updated_at, s.ripe_read_at FROM queen_streams.state s WHERE ` + stateWhere + `),
	lock AS (SELECT 1 AS held FROM (SELECT pg_advisory_xact_lock(hashtextextended($1::uuid::text || p.id::text, 0))
	                                   FROM queen.partitions p WHERE p.id = $2) l
	          WHERE EXISTS (SELECT FROM r WHERE r.ripe_read_at IS DISTINCT FROM r.updated_at)),
	marked AS (UPDATE queen_streams.state s SET ripe_read_at = r.updated_at FROM r, lock
	            WHERE s.query_id = $1 AND s.partition_id = $2 AND s.key = r.key
	              AND r.ripe_read_at IS DISTINCT FROM r.updated_at)
	SELECT r.key, r.value, r.updated_at FROM r ORDER BY r.key`

// State calls row for each matching row, ordered by key. value is the
// row's JSON as PostgreSQL sends it, valid only during the call: the caller
// writes it out without decoding or keeping it.
func (d *DB) State(ctx context.Context, f StateFilter, row func(key string, value []byte, updated time.Time)) error {
	var keys []string
	if len(f.Keys) > 0 {
		keys = f.Keys
	}
	var lo, hi *string
	if f.KeyPrefix != "" {
		lo = &f.KeyPrefix
		if s, ok := successor(f.KeyPrefix); ok {
			hi = &s
		}
	}
	sql := stateSQL
	if f.Mark && f.RipeAtOrBefore != nil {
		sql = ripeReadSQL
	}
	rows, err := d.on(f.PartitionID).Query(ctx, sql, ids.ID(f.QueryID), ids.ID(f.PartitionID), keys, lo, hi, f.RipeAtOrBefore)
	if err != nil {
		return fmt.Errorf("read state of query %s partition %s: %w", f.QueryID, f.PartitionID, err)
	}
	var (
		key     string
		value   []byte
		updated time.Time
	)
	_, err = pgx.ForEachRow(rows, []any{&key, &value, &updated}, func() error {
		row(key, value, updated)
		return nil
	})
	if err != nil {
		return fmt.Errorf("read state of query %s partition %s: %w", f.QueryID, f.PartitionID, err)
	}
	return nil
}

// successor returns the smallest string greater than every string that
// starts with prefix, in bytewise (code point) order: the prefix with its
// last rune incremented, dropping trailing runes that cannot be. It is
// false when there is none (every rune is U+10FFFF).
func successor(prefix string) (string, bool) {
	for prefix != "" {
		r, n := utf8.DecodeLastRuneInString(prefix)
		prefix = prefix[:len(prefix)-n]
		switch {
		case r == utf8.MaxRune:
			continue
		case r == 0xD7FF: // the next code point is past the surrogates
			r = 0xE000
		default:
			r++
		}
		return prefix + string(r), true
	}
	return "", false
}
