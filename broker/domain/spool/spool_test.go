package spool_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/app"
	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// The tests share one broker, with tenancy on in either mode so that each
// test is a tenant of its own: the maintenance status counts the caller's
// tenant's pushes. Push maintenance is the whole database's, so the tests
// that switch it run one after another, not in parallel.
func TestMain(m *testing.M) { brokertest.Main(m, brokertest.WithJWT(true)) }

// maintenance switches push maintenance. Switched on, it is switched off
// again when the test ends, and the spool drained, so that the next test
// finds the broker as the first did, however this one ended.
func maintenance(t *testing.T, b *brokertest.Broker, on bool) {
	t.Helper()
	if r := b.Do(t, "POST", "/api/v1/system/maintenance", "", map[string]any{"enabled": on}); r.Status != http.StatusOK {
		t.Fatalf("maintenance %v: %d %s", on, r.Status, r.Body)
	}
	if on {
		t.Cleanup(func() {
			maintenance(t, b, false)
			drained(t, b)
		})
	}
}

type status struct {
	MaintenanceMode  bool  `json:"maintenanceMode"`
	BufferedMessages int64 `json:"bufferedMessages"`
	BufferHealthy    bool  `json:"bufferHealthy"`
	BufferStats      struct {
		PendingCount int64 `json:"pendingCount"`
		FailedCount  int64 `json:"failedCount"`
	} `json:"bufferStats"`
}

func maintenanceStatus(t *testing.T, b *brokertest.Broker) status {
	t.Helper()
	r := b.Do(t, "GET", "/api/v1/system/maintenance", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var s status
	r.JSON(t, &s)
	return s
}

// drained waits, for up to 10 s, until the broker's spool is empty.
func drained(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n := maintenanceStatus(t, b).BufferedMessages; n != 0 {
			return fmt.Errorf("the spool still holds %d messages", n)
		}
		return nil
	})
}

// push pushes items in one request and requires the status.
func push(t *testing.T, b *brokertest.Broker, want int, items ...map[string]any) brokertest.Response {
	t.Helper()
	if items == nil {
		items = []map[string]any{}
	}
	return b.Call(t, want, "POST", "/api/v1/push", map[string]any{"items": items})
}

// popAll pops the queue's partition with autoAck until it is empty.
func popAll(t *testing.T, b *brokertest.Broker, queue, partition string) []brokertest.Message {
	t.Helper()
	return b.PopAll(t, "/api/v1/pop/queue/"+queue+"/partition/"+partition+"?batch=1000&autoAck=true")
}

func TestABufferedPushAnswersBufferedPerItemAndStoresNothing(t *testing.T) {
	b := brokertest.Shared(t)
	maintenance(t, b, true)
	r := push(t, b, http.StatusCreated,
		map[string]any{"queue": "q", "payload": 1, "transactionId": "tx-1"},
		map[string]any{"queue": "q", "partition": "p", "data": 2},
		map[string]any{"queue": "q", "payload": nil})
	require.JSONEq(t, `[
		{"status": "buffered", "queue": "q", "partition": "Default", "transactionId": "tx-1"},
		{"status": "buffered", "queue": "q", "partition": "p"},
		{"status": "buffered", "queue": "q", "partition": "Default"}]`, string(r.Body))
	require.False(t, b.Stored(t, "q").Exists, "a buffered push touched the database")
	r = push(t, b, http.StatusCreated)
	require.JSONEq(t, `[]`, string(r.Body))
}

func TestTheMaintenanceStatusCountsThisReplicasSpoolDownToZero(t *testing.T) {
	b := brokertest.Shared(t)
	maintenance(t, b, true)
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 1}, map[string]any{"queue": "q", "payload": 2})
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 3})
	s := maintenanceStatus(t, b)
	require.True(t, s.MaintenanceMode)
	require.EqualValues(t, 3, s.BufferedMessages)
	require.EqualValues(t, 3, s.BufferStats.PendingCount)
	require.True(t, s.BufferHealthy)
	other := brokertest.StartOn(t, b.DatabaseURL)
	require.Zero(t, maintenanceStatus(t, other).BufferedMessages, "another replica's spool is its own")
	other.Stop()
	require.Contains(t, b.Scrape(t), "\nregent_spool_buffered_messages 3\n")

	maintenance(t, b, false)
	drained(t, b)
	require.Zero(t, maintenanceStatus(t, b).BufferStats.PendingCount)
	require.Contains(t, b.Scrape(t), "\nregent_spool_buffered_messages 0\n")
}

func TestTheSpoolDrainsInArrivalOrderWithTheClientsTransactionIDs(t *testing.T) {
	b := brokertest.Shared(t)
	maintenance(t, b, true)
	for i := range 5 {
		push(t, b, http.StatusCreated,
			map[string]any{"queue": "q", "payload": 2 * i, "transactionId": "tx-" + string(rune('a'+i))},
			map[string]any{"queue": "q", "payload": 2*i + 1})
	}
	maintenance(t, b, false)
	drained(t, b)
	got := popAll(t, b, "q", "Default")
	require.Len(t, got, 10)
	for i, m := range got {
		require.EqualValues(t, i, m.Data, "delivery order")
		if i%2 == 0 {
			require.Equal(t, "tx-"+string(rune('a'+i/2)), m.TransactionID)
		} else {
			// No transactionId: the spool gave the item a UUIDv7, which is
			// also its message id, as a push would have.
			id, err := uuid.Parse(m.TransactionID)
			require.NoError(t, err)
			require.EqualValues(t, 7, id.Version())
			require.Equal(t, m.ID, m.TransactionID)
		}
	}
}

func TestASpooledTransactionIDAlreadyStoredIsNotStoredAgain(t *testing.T) {
	b := brokertest.Shared(t)
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 1, "transactionId": "tx-1"})
	maintenance(t, b, true)
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 1, "transactionId": "tx-1"},
		map[string]any{"queue": "q", "payload": 2, "transactionId": "tx-2"},
		map[string]any{"queue": "q", "payload": 2, "transactionId": "tx-2"})
	maintenance(t, b, false)
	drained(t, b)
	got := popAll(t, b, "q", "Default")
	require.Len(t, got, 2)
	require.Equal(t, []string{"tx-1", "tx-2"}, []string{got[0].TransactionID, got[1].TransactionID})
}

func TestABufferedPushWithABadNameIs400(t *testing.T) {
	b := brokertest.Shared(t)
	maintenance(t, b, true)
	r := push(t, b, http.StatusBadRequest, map[string]any{"queue": "q", "payload": 1}, map[string]any{"queue": "bad name", "payload": 2})
	require.Contains(t, r.Map(t)["error"], "bad name")
	r = push(t, b, http.StatusBadRequest, map[string]any{"queue": "q", "partition": strings.Repeat("p", 256), "payload": 1})
	require.Contains(t, r.Map(t)["error"], "partition")
	require.Zero(t, maintenanceStatus(t, b).BufferedMessages, "a refused request spooled something")
}

// immutable makes dir refuse new files, even to root, until the test ends.
func immutable(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("chattr", "+i", dir).CombinedOutput(); err != nil {
		t.Fatalf("chattr +i %s: %v\n%s", dir, err, out)
	}
	t.Cleanup(func() { mutable(t, dir) })
}

func mutable(t *testing.T, dir string) {
	t.Helper()
	if out, err := exec.Command("chattr", "-i", dir).CombinedOutput(); err != nil {
		t.Errorf("chattr -i %s: %v\n%s", dir, err, out)
	}
}

func TestASpoolThatCannotWriteFailsEveryItemWith500(t *testing.T) {
	b := brokertest.Shared(t)
	dir := b.Config.SpoolDir
	maintenance(t, b, true)
	immutable(t, dir)
	r := push(t, b, http.StatusInternalServerError,
		map[string]any{"queue": "q", "payload": 1, "transactionId": "tx-1"},
		map[string]any{"queue": "q", "partition": "p", "payload": 2})
	require.JSONEq(t, `[
		{"status": "failed", "queue": "q", "partition": "Default", "error": "File buffer write failed"},
		{"status": "failed", "queue": "q", "partition": "p", "error": "File buffer write failed"}]`, string(r.Body))
	require.Zero(t, maintenanceStatus(t, b).BufferedMessages)

	mutable(t, dir)
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 3})
	maintenance(t, b, false)
	drained(t, b)
	got := popAll(t, b, "q", "Default")
	require.Len(t, got, 1, "only the push the spool took is delivered")
	require.EqualValues(t, 3, got[0].Data)
}

func TestABrokerDoesNotStartWithoutAWritableSpoolDirOfItsOwn(t *testing.T) {
	t.Parallel()
	url := brokertest.Shared(t).DatabaseURL
	start := func(dir string) (*app.Broker, error) {
		cfg, err := config.Parse("broker", []string{"--database-url=" + url, "--spool-dir=" + dir}, func(string) string { return "" })
		require.NoError(t, err)
		return app.New(context.Background(), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
	}
	locked := t.TempDir()
	immutable(t, locked)
	_, err := start(locked)
	require.ErrorContains(t, err, "spool dir "+locked+" is not writable")

	file := filepath.Join(t.TempDir(), "file")
	require.NoError(t, os.WriteFile(file, nil, 0o600))
	_, err = start(filepath.Join(file, "spool"))
	require.ErrorContains(t, err, "spool dir "+filepath.Join(file, "spool"))

	shared := t.TempDir()
	first, err := start(shared)
	require.NoError(t, err)
	t.Cleanup(first.Close)
	_, err = start(shared)
	require.ErrorContains(t, err, "is in use by another broker")
}

// copyDir copies the regular files of src into a new directory.
func copyDir(t *testing.T, src string) string {
	t.Helper()
	dst := t.TempDir()
	ents, err := os.ReadDir(src)
	require.NoError(t, err)
	for _, e := range ents {
		b, err := os.ReadFile(filepath.Join(src, e.Name()))
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dst, e.Name()), b, 0o600))
	}
	return dst
}

// A crash after a drain's pushes committed, before the spool file was
// removed, leaves the file to be drained again at the next start: every
// item comes back as a duplicate and nothing is delivered twice.
func TestADrainReplayedAfterACrashDeliversEachMessageOnce(t *testing.T) {
	b := brokertest.Shared(t)
	dir := b.Config.SpoolDir
	maintenance(t, b, true)
	for i := range 10 {
		item := map[string]any{"queue": "q", "payload": i}
		if i%2 == 0 {
			item["transactionId"] = "tx-" + string(rune('a'+i))
		}
		push(t, b, http.StatusCreated, item)
	}
	crashed := copyDir(t, dir) // the spool as the crash left it
	require.NoError(t, os.Remove(filepath.Join(crashed, "LOCK")))
	maintenance(t, b, false)
	drained(t, b)

	maintenance(t, b, true) // the restarted broker holds its spool until its count is read
	restarted := brokertest.StartOn(t, b.DatabaseURL, brokertest.WithJWT(true), func(c *config.Config) { c.SpoolDir = crashed })
	restarted.Token = b.Token // the test's tenant, whose pushes it holds
	require.EqualValues(t, 10, maintenanceStatus(t, restarted).BufferedMessages)
	maintenance(t, b, false)
	drained(t, restarted)
	got := popAll(t, b, "q", "Default")
	require.Len(t, got, 10)
	for i, m := range got {
		require.EqualValues(t, i, m.Data)
	}
	ents, err := os.ReadDir(crashed)
	require.NoError(t, err)
	var left []string
	for _, e := range ents {
		left = append(left, e.Name())
	}
	require.Equal(t, []string{"LOCK"}, left, "a drained spool keeps no file")
}

func TestPopAckConfigureAndTransactionsCarryOnDuringPushMaintenance(t *testing.T) {
	b := brokertest.Shared(t)
	push(t, b, http.StatusCreated, map[string]any{"queue": "q", "payload": 1})
	maintenance(t, b, true)
	r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "c"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = b.Do(t, "POST", "/api/v1/transaction", "", map[string]any{"operations": []any{
		map[string]any{"type": "push", "items": []any{map[string]any{"queue": "q", "payload": 2}}}}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	r = b.Do(t, "GET", "/api/v1/pop/queue/q?batch=10", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var p struct {
		PartitionID string `json:"partitionId"`
		LeaseID     string `json:"leaseId"`
		Messages    []brokertest.Message
	}
	r.JSON(t, &p)
	require.Len(t, p.Messages, 2, "the transaction's push went to the database")
	acks := make([]map[string]any, len(p.Messages))
	for i, m := range p.Messages {
		acks[i] = map[string]any{"transactionId": m.TransactionID, "partitionId": p.PartitionID, "leaseId": p.LeaseID, "status": "completed"}
	}
	r = b.Do(t, "POST", "/api/v1/ack/batch", "", map[string]any{"acknowledgments": acks})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	var results []struct{ Success bool }
	require.NoError(t, json.Unmarshal(r.Body, &results))
	for _, res := range results {
		require.True(t, res.Success, "%s", r.Body)
	}
}

func TestASpooledItemIsStoredAsTheSamePushWithoutMaintenanceWouldBe(t *testing.T) {
	b := brokertest.Shared(t)
	const payload = `{"html": "<a & b>",  "n": [1, 2]}`
	const trace = "0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f"
	body := func(queue string) string {
		return `{"items": [{"queue": "` + queue + `", "transactionId": "tx", "traceId": "` + trace + `", "payload": ` + payload + `},
			{"queue": "` + queue + `", "payload": null}, {"queue": "` + queue + `"}]}`
	}
	require.Equal(t, http.StatusCreated, b.Do(t, "POST", "/api/v1/push", "", body("direct")).Status)
	maintenance(t, b, true)
	require.Equal(t, http.StatusCreated, b.Do(t, "POST", "/api/v1/push", "", body("spooled")).Status)
	maintenance(t, b, false)
	drained(t, b)
	direct, spooled := b.Frames(t, b.Tenant, "direct"), b.Frames(t, b.Tenant, "spooled")
	require.Len(t, spooled, len(direct))
	for i := range direct {
		require.Equal(t, string(direct[i].Payload), string(spooled[i].Payload), "payload %d", i)
		require.Equal(t, direct[i].TraceID, spooled[i].TraceID)
		require.Equal(t, direct[i].ProducerSub, spooled[i].ProducerSub)
	}
	require.Equal(t, payload, string(spooled[0].Payload), "the payload, byte for byte")
	require.Equal(t, "tx", spooled[0].TransactionID)
}

func TestTheMaintenanceStatusCountsOnlyTheCallersTenantsPushes(t *testing.T) {
	b, other := brokertest.Shared(t), brokertest.Shared(t).Token // two tenants
	a := b.Token
	count := func(token string) int64 {
		r := b.Do(t, "GET", "/api/v1/system/maintenance", token, nil)
		require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
		var s status
		r.JSON(t, &s)
		require.Equal(t, s.BufferedMessages, s.BufferStats.PendingCount)
		return s.BufferedMessages
	}
	maintenance(t, b, true)
	r := b.Do(t, "POST", "/api/v1/push", a, map[string]any{"items": []any{
		map[string]any{"queue": "q", "payload": 1}, map[string]any{"queue": "q", "payload": 2}}})
	require.Equal(t, http.StatusCreated, r.Status, "%s", r.Body)
	require.EqualValues(t, 2, count(a))
	require.Zero(t, count(other), "another tenant sees the count of a's pushes")

	require.Equal(t, http.StatusOK, b.Do(t, "POST", "/api/v1/system/maintenance", other, map[string]any{"enabled": false}).Status)
	brokertest.Eventually(t, 10*time.Second, func() error {
		if n := count(a); n > 0 {
			return fmt.Errorf("%d of a's pushes not drained", n)
		}
		return nil
	})
	require.Len(t, b.Frames(t, b.Tenant, "q"), 2, "the drain stored the pushes as a's")
}

func TestACyclesSinkPushesGoToTheDatabaseDuringPushMaintenance(t *testing.T) {
	b := brokertest.Shared(t)
	b.Grant(t, b.Tenant, nil) // the test's tenant is not the default one: registering takes a quota grant
	push(t, b, http.StatusCreated, map[string]any{"queue": "src", "payload": 1})
	r := b.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": "q", "source_queue": "src", "sink_queue": "sink", "config_hash": "v1"})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	query := r.Map(t)["query_id"]
	r = b.Do(t, "GET", "/api/v1/pop/queue/src?batch=10&consumerGroup=streams.q", "", nil)
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	popped := r.Map(t)
	maintenance(t, b, true)
	r = b.Do(t, "POST", "/streams/v1/cycle", "", map[string]any{"query_id": query, "partition_id": popped["partitionId"],
		"consumer_group": "streams.q", "push_items": []any{map[string]any{"queue": "sink", "payload": 2}},
		"ack": map[string]any{"leaseId": popped["leaseId"], "status": "completed", "count": 1}})
	require.Equal(t, http.StatusOK, r.Status, "%s", r.Body)
	require.Zero(t, maintenanceStatus(t, b).BufferedMessages)
	got := popAll(t, b, "sink", "Default")
	require.Len(t, got, 1, "the sink push is in the database while push maintenance is on")
	require.EqualValues(t, 2, got[0].Data)
}
