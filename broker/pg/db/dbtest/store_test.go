package dbtest_test

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestOverSeesWhatTheTransactionWroteAndNoOneElseDoes(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 1)
	tx, err := b.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // only looked
	in := dbtest.Over(tx)
	require.NoError(t, in.PlaceCursor(t.Context(), b.Tenant, q, "p", "g", 1))
	c, err := in.Cursors(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, c, 1)
	require.Empty(t, b.Cursors(t, q), "not committed")
}

func TestDeadLettersListThePayloadsOfTheQueueNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	for i, queue := range []string{q, other} {
		b.PushN(t, queue, "p", i, 1)
		p := b.Pop(t, "/api/v1/pop/queue/"+queue)
		b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
			"partitionId": p.Messages[0].PartitionID, "leaseId": p.LeaseID, "status": "dlq"})
	}
	letters, err := b.DB.DeadLetters(t.Context(), b.Tenant, q)
	require.NoError(t, err)
	require.Len(t, letters, 1)
	require.JSONEq(t, `{"n":0}`, letters[0].Payload)
	require.NotEmpty(t, letters[0].MessageID)
}

func TestShiftChecksumsAndClaimFramesCorruptOnlyTheQueueNamed(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q, other := b.Q("q"), b.Q("other")
	b.PushN(t, q, "p", 0, 2)
	b.PushN(t, other, "p", 0, 2)
	require.NoError(t, b.DB.ShiftChecksums(t.Context(), b.Tenant, q, 1))
	_, err := b.Log(t.Context(), b.Tenant, q)
	require.Error(t, err, "a segment that fails its checksum")
	require.NoError(t, b.DB.ShiftChecksums(t.Context(), b.Tenant, q, -1))
	require.Len(t, b.Frames(t, b.Tenant, q), 2, "mended")
	require.NoError(t, b.DB.ClaimFrames(t.Context(), b.Tenant, q, 1))
	_, err = b.Log(t.Context(), b.Tenant, q)
	require.Error(t, err, "a segment whose count lies")
	require.Len(t, b.Frames(t, b.Tenant, other), 2, "another queue is left alone")
}

func TestLockCursorHoldsTheCursorUntilReleased(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "p", 0, 1)
	require.Error(t, func() error { _, err := b.DB.LockCursor(t.Context(), b.Tenant, q, "p", "g"); return err }(), "no cursor yet")
	b.PlaceCursor(t, q, "p", "g", 0)
	release, err := b.DB.LockCursor(t.Context(), b.Tenant, q, "p", "g")
	require.NoError(t, err)
	tx, err := b.Pool.Begin(t.Context())
	require.NoError(t, err)
	defer tx.Rollback(t.Context()) //nolint:errcheck // only looked
	_, err = tx.Exec(t.Context(), "SET LOCAL lock_timeout = '100ms'")
	require.NoError(t, err)
	require.Error(t, dbtest.Over(tx).PlaceCursor(t.Context(), b.Tenant, q, "p", "g", 1), "the row is held")
	require.NoError(t, release())
	b.PlaceCursor(t, q, "p", "g", 1)
}
