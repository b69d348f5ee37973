package admin_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

func TestConsumerGroupsListIsABareArrayOfGroupQueuePairsSortedByGroupThenQueue(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q1", "a", 0, 3)
	b.PushN(t, "q1", "b", 10, 2)
	b.PushN(t, "q2", "Default", 20, 1)
	b.Pop(t, "/api/v1/pop/queue/q1/partition/a?batch=1&autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q1/partition/b?batch=5&autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q2?batch=5&autoAck=true&consumerGroup=f&subscriptionMode=new")
	b.Pop(t, "/api/v1/pop/queue/q2?batch=5&consumerGroup=d")

	got := array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups", nil))
	require.Len(t, got, 3)
	d, f, g := got[0], got[1], got[2]
	require.Equal(t, "d", d["name"])
	require.Equal(t, "Dead", d["state"], "its one cursor holds a leased batch and has consumed nothing")
	require.EqualValues(t, 1, d["partitionsWithLag"])
	require.Equal(t, "f", f["name"])
	require.Equal(t, "q2", f["queueName"])
	require.Equal(t, "new", f["subscriptionMode"], "mode new keeps a record")
	require.NotNil(t, f["subscriptionTimestamp"])
	require.EqualValues(t, 0, f["partitionsWithLag"], "new starts after the messages already there")
	require.Equal(t, "Stable", f["state"], "the pop that found nothing fixed the cursor")

	require.Equal(t, "g", g["name"])
	require.Equal(t, "q1", g["queueName"])
	require.Equal(t, []any{"q1"}, g["topics"])
	require.EqualValues(t, 2, g["members"])
	require.EqualValues(t, 1, g["partitionsWithLag"])
	require.EqualValues(t, 2, g["lagMessages"])
	require.Nil(t, g["totalLag"])
	require.Equal(t, "Stable", g["state"])
	require.Nil(t, g["subscriptionMode"], "mode all keeps no record")
	require.Nil(t, g["subscriptionTimestamp"])
	require.Nil(t, g["subscriptionCreatedAt"])
	require.Equal(t, g["maxTimeLag"], g["lagSeconds"])
}

func TestConsumerGroupsLaggingListsCursorsOlderThanMinLagSeconds(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "a", 0, 3)
	b.PushN(t, "q", "b", 0, 1)
	p := b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=1&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q/partition/b?batch=1&autoAck=true&consumerGroup=g")
	b.Age(t, "q", 1100*time.Millisecond)

	got := array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=0", nil))
	require.Len(t, got, 1, "a cursor with nothing unconsumed never appears")
	c := got[0]
	require.Equal(t, "g", c["consumer_group"])
	require.Equal(t, "q", c["queue_name"])
	require.Equal(t, "a", c["partition_name"])
	require.Equal(t, p.PartitionID, c["partition_id"])
	require.Equal(t, p.LeaseID, c["worker_id"], "the lease the cursor holds")
	require.EqualValues(t, 3, c["offset_lag"], "a leased batch is not consumed yet")
	require.GreaterOrEqual(t, c["time_lag_seconds"], 1.0)
	require.NotNil(t, c["oldest_unconsumed_at"])
	require.Contains(t, c, "lag_hours")
	require.Contains(t, c, "last_consumed_at")

	require.Empty(t, array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups/lagging", nil)),
		"the default is an hour")
	require.Empty(t, array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds=3600", nil)))
	for _, bad := range []string{"x", "1.5", "-1"} {
		r := b.Call(t, http.StatusBadRequest, "GET", "/api/v1/consumer-groups/lagging?minLagSeconds="+bad, nil)
		require.NotEmpty(t, r.Map(t)["error"])
	}
}

func TestConsumerGroupDescribeIsKeyedByQueueAndAnUnknownGroupIsEmpty(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "b", 0, 2)
	b.PushN(t, "q", "a", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/q/partition/b?batch=1&autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=1&consumerGroup=g")

	var got map[string]struct {
		Partitions []map[string]any `json:"partitions"`
	}
	b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups/g", nil).JSON(t, &got)
	require.Len(t, got, 1)
	ps := got["q"].Partitions
	require.Len(t, ps, 2)
	require.Equal(t, "a", ps[0]["partition"], "sorted by name")
	require.Equal(t, true, ps[0]["leaseActive"])
	require.NotNil(t, ps[0]["workerId"])
	require.EqualValues(t, 1, ps[0]["offsetLag"])
	require.Equal(t, "b", ps[1]["partition"])
	require.EqualValues(t, 1, ps[1]["totalConsumed"])
	require.EqualValues(t, 1, ps[1]["offsetLag"])
	require.Equal(t, false, ps[1]["leaseActive"])
	require.Nil(t, ps[1]["workerId"])
	require.NotNil(t, ps[1]["lastConsumedAt"])

	r := b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups/nobody", nil)
	require.JSONEq(t, `{}`, string(r.Body))
}

func TestDeleteConsumerGroupDropsItsCursorsLeasesAndSubscriptions(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "Default", 0, 2)
	b.PushN(t, "r", "Default", 0, 1)
	p := b.Pop(t, "/api/v1/pop/queue/q?batch=1&consumerGroup=g&subscriptionFrom=1970-01-01T00:00:00Z")
	b.Pop(t, "/api/v1/pop/queue/r?batch=1&consumerGroup=g&subscriptionMode=new")

	r := b.Call(t, http.StatusOK, "DELETE", "/api/v1/consumer-groups/g", nil)
	require.JSONEq(t, `{"success": true, "consumerGroup": "g", "deletedPartitions": 2, "metadataDeleted": true}`, string(r.Body))
	var acks []map[string]any
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g"}).JSON(t, &acks)
	require.Equal(t, false, acks[0]["success"], "the lease went with the cursor")
	require.Empty(t, append(b.Cursors(t, "q"), b.Cursors(t, "r")...))
	// The records went too: mode all now redelivers everything retained.
	ns := b.Pop(t, "/api/v1/pop/queue/r?batch=5&consumerGroup=g").Ns()
	require.Equal(t, []int{0}, ns)

	r = b.Call(t, http.StatusOK, "DELETE", "/api/v1/consumer-groups/nobody?deleteMetadata=false", nil)
	require.JSONEq(t, `{"success": true, "consumerGroup": "nobody", "deletedPartitions": 0, "metadataDeleted": false}`, string(r.Body))
}

func TestDeleteConsumerGroupWithoutMetadataKeepsWhereItsSubscriptionStarts(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "Default", 0, 2)
	b.Pop(t, "/api/v1/pop/queue/q?batch=5&consumerGroup=g&subscriptionMode=new")
	b.PushN(t, "q", "Default", 2, 1)
	r := b.Call(t, http.StatusOK, "DELETE", "/api/v1/consumer-groups/g/queues/q?deleteMetadata=false", nil)
	require.JSONEq(t, `{"success": true, "consumerGroup": "g", "queueName": "q", "deletedPartitions": 1,
		"metadataDeleted": false}`, string(r.Body))
	ns := b.Pop(t, "/api/v1/pop/queue/q?batch=5&consumerGroup=g").Ns()
	require.Equal(t, []int{2}, ns, "the new cursor starts after the old subscription time")
}

func TestDeleteConsumerGroupOnOneQueueLeavesItsOtherQueues(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "Default", 0, 1)
	b.PushN(t, "r", "Default", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/q?autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/r?autoAck=true&consumerGroup=g")
	r := b.Call(t, http.StatusOK, "DELETE", "/api/v1/consumer-groups/g/queues/q", nil)
	require.EqualValues(t, 1, r.Map(t)["deletedPartitions"])
	got := array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups", nil))
	require.Len(t, got, 1)
	require.Equal(t, "r", got[0]["queueName"])
}

func TestSeekToEndSkipsEverythingPendingAndVoidsTheLease(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "a", 0, 3)
	b.PushN(t, "q", "empty", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/q/partition/empty?autoAck=true&consumerGroup=g")
	p := b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=1&consumerGroup=g")
	require.NoError(t, b.DB.SetRetries(t.Context(), b.Tenant, "q", "a", "g", 2))
	// Retention took every message of "empty": its cursor is left alone.
	require.NoError(t, b.DB.EmptyPartition(t.Context(), b.Tenant, "q", "empty"))

	r := b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"toEnd": true, "timestamp": "garbage is ignored"})
	require.JSONEq(t, `{"success": true, "consumerGroup": "g", "queueName": "q", "seekToEnd": true,
		"targetTimestamp": null, "partitionsUpdated": 1}`, string(r.Body))
	for _, c := range b.Cursors(t, "q") {
		require.Nil(t, c.LeaseID, c.Partition)
	}
	// An ack of the old batch, now behind the cursor, changes nothing.
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g", "status": "failed"})
	var a dbtest.Cursor
	for _, c := range b.Cursors(t, "q") {
		if c.Partition == "a" {
			a = c
		}
	}
	require.EqualValues(t, 3, a.Committed)
	require.Nil(t, a.LeaseExpiresAt)
	require.Zero(t, a.RetryCount, "the retry count belonged to the batch the seek left behind")
	b.PushN(t, "q", "a", 3, 1)
	ns := b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=5&consumerGroup=g").Ns()
	require.Equal(t, []int{3}, ns)
}

func TestSeekToATimeResumesWithTheFirstMessageAfterItAndIsPoppedAtOnce(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	// The hot list is never reseeded: only the seek's announcement brings
	// the pop back.
	b.PushN(t, "q", "Default", 0, 2)
	// A time strictly between two pushes' creation times: the first two
	// made 10 ms older, 5 ms ago lies after them and before the next push.
	b.Age(t, "q", 10*time.Millisecond)
	at := time.Now().UTC().Add(-5 * time.Millisecond)
	b.PushN(t, "q", "Default", 2, 2)
	b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true")
	ns := b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g").Ns()
	require.Empty(t, ns)

	r := b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": at.Format(time.RFC3339Nano)})
	m := r.Map(t)
	require.Equal(t, false, m["seekToEnd"])
	require.Equal(t, at.Format("2006-01-02T15:04:05.000Z"), m["targetTimestamp"])
	require.EqualValues(t, 1, m["partitionsUpdated"])
	ns = b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{2, 3}, ns)

	// Before every message: the cursor is unmoved again, and a group in
	// mode all restarts at the beginning. So does plain queue mode.
	b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/q/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	ns = b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{0, 1, 2, 3}, ns)
	b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/__QUEUE_MODE__/queues/q/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	ns = b.Pop(t, "/api/v1/pop/queue/q?batch=10&autoAck=true").Ns()
	require.Equal(t, []int{0, 1, 2, 3}, ns)
}

func TestSeekBackVoidsTheLeaseOfTheBatchItLeftBehind(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "Default", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?autoAck=true&consumerGroup=g")
	b.PushN(t, q, "Default", 1, 1)
	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?consumerGroup=g")
	b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	var acks []map[string]any
	b.Call(t, http.StatusOK, "POST", "/api/v1/ack", map[string]any{"transactionId": p.Messages[0].TransactionID,
		"partitionId": p.PartitionID, "leaseId": p.LeaseID, "consumerGroup": "g"}).JSON(t, &acks)
	require.Equal(t, "Invalid or expired lease", acks[0]["error"])
	ns := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=5&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{0, 1}, ns)
}

func TestSeekBeforeEverythingGoesBackOnlyToTheSubscriptionTime(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "Default", 0, 2)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true&consumerGroup=g&subscriptionMode=new")
	b.PushN(t, q, "Default", 2, 2)
	b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true&consumerGroup=g")
	b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", map[string]any{"timestamp": "1970-01-01T00:00:00Z"})
	ns := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{2, 3}, ns)
}

func TestSeekMovesOnlyTheCursorsTheGroupHas(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	nowhere := b.Q("nowhere")
	q := b.Q("q")
	b.PushN(t, q, "a", 0, 1)
	b.PushN(t, q, "b", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/a?autoAck=true&consumerGroup=g")
	r := b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", map[string]any{"toEnd": true})
	require.EqualValues(t, 1, r.Map(t)["partitionsUpdated"])
	ns := b.Pop(t, "/api/v1/pop/queue/"+q+"/partition/b?consumerGroup=g&autoAck=true").Ns()
	require.Equal(t, []int{0}, ns, "no cursor on b: the group starts there by its subscription")
	r = b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/"+nowhere+"/seek", map[string]any{"toEnd": true})
	require.EqualValues(t, 0, r.Map(t)["partitionsUpdated"])
}

func TestSeekRefusesABodyWithNeitherUsableForm(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	for body, want := range map[string]string{
		``:                                   "Must specify either 'toEnd': true or 'timestamp'",
		`{}`:                                 "Must specify either 'toEnd': true or 'timestamp'",
		`{"toEnd": false}`:                   "Must specify either 'toEnd': true or 'timestamp'",
		`{"toEnd": null, "timestamp": null}`: "Must specify either 'toEnd': true or 'timestamp'",
		`{"toEnd": "yes"}`:                   "toEnd must be a boolean",
		`{"timestamp": 5}`:                   "timestamp must be an RFC 3339 time string",
		`{"timestamp": "yesterday"}`:         `timestamp must be an RFC 3339 time, not "yesterday"`,
		`[1]`:                                "",
		`{not json`:                          "",
	} {
		r := b.Call(t, http.StatusBadRequest, "POST", "/api/v1/consumer-groups/g/queues/"+q+"/seek", body)
		if want != "" {
			require.Equal(t, want, r.Map(t)["error"], body)
		}
		require.NotEmpty(t, r.Map(t)["error"], body)
	}
}

func TestPartitionSeekMovesOnePartitionToItsEndAndTakesNoBody(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "a", 0, 3)
	b.PushN(t, "q", "b", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=1&autoAck=true&consumerGroup=g")
	b.Pop(t, "/api/v1/pop/queue/q/partition/b?batch=1&autoAck=true&consumerGroup=g")
	parts, err := b.Log(t.Context(), b.Tenant, "q")
	require.NoError(t, err)
	require.Equal(t, "a", parts[0].Name)
	newest := time.UnixMicro(parts[0].Frames[len(parts[0].Frames)-1].CreatedAt)

	r := b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/queues/q/partitions/a/seek", nil)
	require.JSONEq(t, `{"success": true, "consumerGroup": "g", "queueName": "q", "partitionName": "a", "updated": true,
		"cursorMovedTo": "`+newest.UTC().Format("2006-01-02T15:04:05.000Z")+`"}`, string(r.Body))
	b.PushN(t, "q", "a", 3, 1)
	ns := b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=5&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{3}, ns)

	r = b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/other/queues/q/partitions/a/seek", "{}")
	require.Equal(t, false, r.Map(t)["updated"], "a missing cursor is not created")
	require.Nil(t, r.Map(t)["cursorMovedTo"])
	for _, c := range b.Cursors(t, "q") {
		require.NotEqual(t, "other", c.Group)
	}
}

func TestPartitionSeekOfAnUnknownQueueOrPartitionIs404(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	zz := b.Q("zz")
	b.PushN(t, q, "a", 0, 1)
	for _, path := range []string{"/api/v1/consumer-groups/g/queues/" + q + "/partitions/" + zz + "/seek", "/api/v1/consumer-groups/g/queues/" + zz + "/partitions/a/seek"} {
		r := b.Call(t, http.StatusNotFound, "POST", path, nil)
		require.JSONEq(t, `{"success": false, "error": "Partition not found"}`, string(r.Body))
	}
}

func TestSubscriptionRouteMovesTheStartOfPartitionsTheGroupHasNotReached(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	b.PushN(t, "q", "a", 0, 1)
	b.Pop(t, "/api/v1/pop/queue/q/partition/a?autoAck=true&consumerGroup=g&subscriptionMode=new")
	b.Pop(t, "/api/v1/pop/queue/q/partition/a?autoAck=true&consumerGroup=all")
	b.PushN(t, "q", "b", 10, 2)

	r := b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/g/subscription", map[string]any{"subscriptionTimestamp": "1970-01-01T00:00:00Z"})
	require.JSONEq(t, `{"success": true, "consumerGroup": "g", "newTimestamp": "1970-01-01T00:00:00Z", "rowsUpdated": 1}`, string(r.Body))
	ns := b.Pop(t, "/api/v1/pop/queue/q/partition/b?batch=5&autoAck=true&consumerGroup=g").Ns()
	require.Equal(t, []int{10, 11}, ns, "b was not reached yet: it starts after the new time")
	ns = b.Pop(t, "/api/v1/pop/queue/q/partition/a?batch=5&autoAck=true&consumerGroup=g").Ns()
	require.Empty(t, ns, "a's cursor has moved and keeps its place")
	got := array(t, b.Call(t, http.StatusOK, "GET", "/api/v1/consumer-groups", nil))
	require.Equal(t, "g", got[1]["name"])
	require.Equal(t, "new", got[1]["subscriptionMode"], "the mode is kept")
	require.Equal(t, "1970-01-01T00:00:00.000Z", got[1]["subscriptionTimestamp"])

	r = b.Call(t, http.StatusOK, "POST", "/api/v1/consumer-groups/all/subscription", map[string]any{"subscriptionTimestamp": "2026-01-01T00:00:00Z"})
	require.EqualValues(t, 0, r.Map(t)["rowsUpdated"], "mode all has no record, and none is created")
}

func TestSubscriptionRouteRefusesAMissingOrBadTimestamp(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	for body, want := range map[string]string{
		``:                                "Missing subscriptionTimestamp in request body",
		`{}`:                              "Missing subscriptionTimestamp in request body",
		`{"subscriptionTimestamp": null}`: "Missing subscriptionTimestamp in request body",
		`{"subscriptionTimestamp": 1}`:    "subscriptionTimestamp must be an RFC 3339 time string",
		`{"subscriptionTimestamp": "x"}`:  `subscriptionTimestamp must be an RFC 3339 time, not "x"`,
	} {
		r := b.Call(t, http.StatusBadRequest, "POST", "/api/v1/consumer-groups/g/subscription", body)
		require.Equal(t, want, r.Map(t)["error"], body)
	}
}

func TestStatsRefreshTakesAnEmptyBody(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	r := b.Call(t, http.StatusOK, "POST", "/api/v1/stats/refresh", nil)
	require.JSONEq(t, `{"success": true}`, string(r.Body))
}

func TestConsumerGroupRoutesRefuseAPathValueTextCannotHoldWithA400NamingIt(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	const cg = "/api/v1/consumer-groups/"
	for _, c := range []struct{ method, path, field string }{
		{"GET", cg + "a%00b", "group"},
		{"DELETE", cg + "a%FFb", "group"},
		{"DELETE", cg + "g/queues/a%00b", "queue"},
		{"POST", cg + "a%00b/queues/" + q + "/seek", "group"},
		{"POST", cg + "g/queues/a%FFb/seek", "queue"},
		{"POST", cg + "g/queues/" + q + "/partitions/a%00b/seek", "partition"},
		{"POST", cg + "a%FFb/subscription", "group"},
	} {
		r := b.Call(t, http.StatusBadRequest, c.method, c.path, map[string]any{"toEnd": true})
		require.Contains(t, r.Map(t)["error"], c.field, "%s %s", c.method, c.path)
	}
}
