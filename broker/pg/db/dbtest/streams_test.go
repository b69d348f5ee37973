package dbtest_test

import (
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestHoldCycleLockMakesACycleOfThePairWaitAndCycleLockWaitersCountsIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	if b.Tenant != auth.DefaultTenant {
		b.Grant(t, b.Tenant, nil)
	}
	q := b.Call(t, http.StatusOK, "POST", "/streams/v1/queries", map[string]any{"name": b.Q("q"), "source_queue": b.Q("src"),
		"config_hash": "h"}).Map(t)["query_id"].(string)
	p := b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": b.Q("src")}).Map(t)["partitionId"].(string)
	release, err := b.DB.HoldCycleLock(t.Context(), q, p)
	require.NoError(t, err)
	t.Cleanup(func() { _ = release() }) // a failed test's too, or the pool never closes
	done := make(chan error, 1)
	go func() {
		r, err := b.Send("POST", "/streams/v1/cycle", "", map[string]any{"query_id": q, "partition_id": p, "ack": nil,
			"state_ops": []any{map[string]any{"type": "upsert", "key": "k", "value": 1}}})
		if err == nil && r.Status != http.StatusOK {
			err = fmt.Errorf("cycle: %d %s", r.Status, r.Body)
		}
		done <- err
	}()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n, err := b.DB.CycleLockWaiters(t.Context(), q, p); err != nil || n != 1 {
			return fmt.Errorf("%d waiters for the pair's lock (%v), want the cycle", n, err)
		}
		return nil
	})
	n, err := b.DB.CycleLockWaiters(t.Context(), q, uuid.NewString())
	require.NoError(t, err)
	require.Zero(t, n, "another pair's lock has no waiter")
	require.Empty(t, b.State(t, q, p), "the cycle ran under the held lock")
	require.NoError(t, release())
	require.NoError(t, <-done)
	require.Equal(t, map[string]string{"k": "1"}, b.State(t, q, p))
}

func TestBreakCyclesMakesTheCycleOwnerFail(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	require.NoError(t, dbtest.New(pool).BreakCycles(t.Context()))
	_, err := pool.Exec(t.Context(), `SELECT queen_streams.cycle_owner('default', gen_random_uuid(), gen_random_uuid())`)
	require.ErrorContains(t, err, "division by zero")
}

func TestHideStateMakesTheStateTableUnreadable(t *testing.T) {
	t.Parallel()
	pool := pgtest.New(t)
	d := dbtest.New(pool)
	require.NoError(t, d.HideState(t.Context()))
	_, err := d.State(t.Context(), uuid.NewString(), "")
	require.ErrorContains(t, err, `relation "queen_streams.state" does not exist`)
}
