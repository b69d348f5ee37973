package queue_test

import (
	"crypto/rand"
	"encoding/base64"
	"encoding/json"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// bigItem is a message whose payload is a JSON string of about size bytes
// that zstd cannot shrink much (base64 of random bytes).
func bigItem(queue string, n, size int) map[string]any {
	raw := make([]byte, size*3/4)
	_, _ = rand.Read(raw)
	return map[string]any{"queue": queue, "partition": "p", "transactionId": "m" + strconv.Itoa(n),
		"payload": map[string]any{"n": n, "pad": base64.StdEncoding.EncodeToString(raw)}}
}

func maxPopBytes(n int64) brokertest.Option {
	return func(c *config.Config) { c.MaxPopBytes = n }
}

// pushApart pushes n big messages to queue q, one push (one segment) each,
// and returns the stored size of each segment.
func pushApart(t *testing.T, b *brokertest.Broker, n, size int) []int64 {
	t.Helper()
	for i := range n {
		b.Push(t, bigItem(b.Q("q"), i, size))
	}
	sizes := b.SegmentSizes(t, b.Q("q"))
	require.Len(t, sizes, n)
	return sizes
}

func TestAPopAnswerIsCappedByBytesButHoldsAtLeastOneMessage(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	sizes := pushApart(t, b, 3, 200<<10)

	capped := b.Replica(t, maxPopBytes(sizes[0]+sizes[1]+sizes[2]/2))
	require.Equal(t, []int{0, 1}, capped.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g1").Ns(),
		"two segments fit the cap, the third does not")

	tiny := b.Replica(t, maxPopBytes(1))
	require.Equal(t, []int{0}, tiny.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&consumerGroup=g2").Ns(),
		"a message larger than the cap is still delivered, alone")
}

// cutAfterTwo returns a broker whose byte cap lets a pop of its queue q,
// four messages in four segments, hold the first two.
func cutAfterTwo(t *testing.T) *brokertest.Broker {
	t.Helper()
	b := brokertest.Shared(t)
	sizes := pushApart(t, b, 4, 100<<10)
	return b.Replica(t, maxPopBytes(sizes[0]+sizes[1]))
}

func TestAPopCutShortByTheByteCapLeasesOnlyWhatItDelivered(t *testing.T) {
	t.Parallel()
	b := cutAfterTwo(t)
	q := b.Q("q")

	p := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10")
	require.Equal(t, []int{0, 1}, p.Ns())
	require.Equal(t, new(int64(2)), b.Cursor(t, q).BatchEnd, "the lease ends where the answer ends")
	ackLast(t, b, p, "__QUEUE_MODE__")
	require.Equal(t, []int{2, 3}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10").Ns(),
		"the rest is free at once, not after the lease")
}

func TestAnAutoAckedPopCutShortByTheByteCapCommitsOnlyWhatItDelivered(t *testing.T) {
	t.Parallel()
	b := cutAfterTwo(t)
	q := b.Q("q")

	require.Equal(t, []int{0, 1}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true").Ns())
	require.EqualValues(t, 2, b.Cursor(t, q).Committed)
	require.Equal(t, []int{2, 3}, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true").Ns())
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&autoAck=true"))
}

// rssBound is the growth of this test process's resident set, broker and
// client together, that popping 100 × 1 MiB under the default cap stays
// within. Before the cap one such pop took a broker from 163 to 660 MB.
const rssBound = 400 << 20

func vmRSS(t *testing.T) int64 {
	b, err := os.ReadFile("/proc/self/status")
	require.NoError(t, err)
	for line := range strings.SplitSeq(string(b), "\n") {
		if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			kb, err := strconv.ParseInt(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 10, 64)
			require.NoError(t, err)
			return kb << 10
		}
	}
	t.Fatal("no VmRSS in /proc/self/status")
	return 0
}

// Not parallel: it measures the whole process.
func TestPoppingAHundredMebibytesStaysUnderTheRSSBound(t *testing.T) {
	b := brokertest.Shared(t)
	q := b.Q("q")
	for i := 0; i < 100; i += 10 {
		items := make([]map[string]any, 10)
		for j := range items {
			items[j] = bigItem(q, i+j, 1<<20)
		}
		b.Push(t, items...)
	}
	pushed := time.Now()
	base := vmRSS(t)
	var peak int64
	var mu sync.Mutex
	stop := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		tick := time.NewTicker(5 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case <-tick.C:
				r := vmRSS(t)
				mu.Lock()
				peak = max(peak, r)
				mu.Unlock()
			}
		}
	}()

	seen := map[string]bool{}
	var sizes []int
	for pops := 0; len(seen) < 100; pops++ {
		require.Less(t, pops, 10, "100 messages in at most 10 pops")
		resp := b.Do(t, "GET", "/api/v1/pop/queue/"+q+"?batch=100", "", nil)
		require.Equal(t, http.StatusOK, resp.Status, "pop %d after %d messages", pops, len(seen))
		var p struct {
			LeaseID  string `json:"leaseId"`
			Messages []struct {
				TransactionID string `json:"transactionId"`
				PartitionID   string `json:"partitionId"`
			} `json:"messages"`
		}
		require.NoError(t, json.Unmarshal(resp.Body, &p))
		resp.Body = nil
		for _, m := range p.Messages {
			require.False(t, seen[m.TransactionID], "%s delivered twice", m.TransactionID)
			seen[m.TransactionID] = true
		}
		sizes = append(sizes, len(p.Messages))
		last := p.Messages[len(p.Messages)-1]
		ack(t, b, map[string]any{"transactionId": last.TransactionID, "partitionId": last.PartitionID,
			"leaseId": p.LeaseID, "consumerGroup": "__QUEUE_MODE__"})
	}
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=100"), "every message was delivered and acked")
	close(stop)
	<-sampled
	t.Logf("pops (and acks) took %v", time.Since(pushed))
	t.Logf("pops of %v messages; RSS %d MiB before, peak %d MiB (+%d MiB)", sizes, base>>20, peak>>20, (peak-base)>>20)
	require.Greater(t, len(sizes), 1, "the default cap cuts 100 MiB into several pops")
	require.Less(t, peak-base, int64(rssBound), "RSS growth over the bound")
}

func TestAPopWhoseByteCapIsSpentLeavesTheNextPartitionUnclaimed(t *testing.T) {
	t.Parallel()
	a := brokertest.Shared(t)
	q := a.Q("q")
	for i, part := range []string{"p1", "p2"} {
		item := bigItem(q, i, 100<<10)
		item["partition"] = part
		a.Push(t, item)
	}
	one := slices.Max(a.SegmentSizes(t, q))
	b := a.Replica(t, maxPopBytes(one))

	first := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&partitions=2")
	require.Equal(t, 1, first.PartitionsClaimed)
	require.Len(t, first.Messages, 1)
	second := b.Pop(t, "/api/v1/pop/queue/"+q+"?batch=10&partitions=2")
	require.NotNil(t, second, "the partition the cap left out is not leased")
	require.Equal(t, 1, second.PartitionsClaimed)
	require.NotEqual(t, first.Partition, second.Partition)
}
