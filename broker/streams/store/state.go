package store

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/google/uuid"
)

// StateFilter selects the state rows of one query and one partition. The
// filters are ANDed; a zero field is no filter.
type StateFilter struct {
	Tenant         string
	QueryID        uuid.UUID
	PartitionID    uuid.UUID
	Keys           []string
	KeyPrefix      string
	RipeAtOrBefore *float64 // epoch ms, against a numeric value.windowEnd
}

// A prefix read is the key range [prefix, successor(prefix)) on the primary
// key, whose key column compares bytewise, so % and _ mean nothing special.
// A state row of another tenant's query reads as absent: the join on the
// tenant makes a foreign query id look exactly like an unknown one.
const stateSQL = `SELECT coalesce(json_agg(json_build_object(
		'key', s.key, 'value', s.value,
		'updated_at', to_char(s.updated_at AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"'))
		ORDER BY s.key), '[]')
	FROM queen_streams.state s
	JOIN queen_streams.queries q ON q.id = s.query_id AND q.tenant = $2
	WHERE s.query_id = $1 AND s.partition_id = $3
	  AND ($4::text[] IS NULL OR s.key = ANY ($4))
	  AND ($5::text IS NULL OR s.key >= $5)
	  AND ($6::text IS NULL OR s.key < $6)
	  AND ($7::float8 IS NULL OR CASE WHEN jsonb_typeof(s.value->'windowEnd') = 'number'
	                                  THEN (s.value->'windowEnd')::float8 <= $7 END)`

// State returns the matching rows as a JSON array of {"key", "value",
// "updated_at"}, ordered by key. PostgreSQL renders the JSON, so the values
// pass through without being decoded.
func State(ctx context.Context, db DB, f StateFilter) ([]byte, error) {
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
	var rows []byte
	err := db.QueryRow(ctx, stateSQL, f.QueryID, f.Tenant, f.PartitionID, keys, lo, hi, f.RipeAtOrBefore).Scan(&rows)
	if err != nil {
		return nil, fmt.Errorf("read state of query %s partition %s: %w", f.QueryID, f.PartitionID, err)
	}
	return rows, nil
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
