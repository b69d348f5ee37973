package db

import (
	"context"
	"fmt"
	"time"

	"github.com/google/uuid"
	"github.com/jackc/pgx/v5/pgtype"
)

// Extension is what a lease extension did.
type Extension struct {
	Held      bool      // the tenant holds the lease on some (partition, group)
	ExpiresAt time.Time // zero when every hold had already expired
}

// ExtendLease gives every (partition, group) of tenant holding the live
// lease leaseID expires = max(expires, now + seconds). The new expiry and
// the lease's life are read with the lock, not computed in the UPDATE:
// Citus refuses now() beside a row's columns there.
func (d *DB) ExtendLease(ctx context.Context, tenant string, leaseID uuid.UUID, seconds int) (Extension, error) {
	var held int
	var expires pgtype.Timestamptz
	err := d.q.QueryRow(ctx, `WITH owned AS (
			SELECT c.partition_id, c.consumer_group, queen.lease_live(c.lease_expires_at) AS live,
			       greatest(c.lease_expires_at, now() + make_interval(secs => $3)) AS until
			  FROM queen.cursors c
			  JOIN queen.partitions p ON p.id = c.partition_id
			  JOIN queen.queues q ON q.id = p.queue_id
			 WHERE c.lease_id = $2 AND q.tenant = $1
			   FOR UPDATE OF c
		), extended AS (
			UPDATE queen.cursors c
			   SET lease_expires_at = o.until
			  FROM owned o
			 WHERE c.partition_id = o.partition_id AND c.consumer_group = o.consumer_group AND o.live
			RETURNING c.lease_expires_at
		)
		SELECT (SELECT count(*) FROM owned), (SELECT max(lease_expires_at) FROM extended)`,
		tenant, leaseID, seconds).Scan(&held, &expires)
	if err != nil {
		return Extension{}, fmt.Errorf("extend lease %s: %w", leaseID, err)
	}
	return Extension{Held: held > 0, ExpiresAt: expires.Time}, nil
}
