package queue_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/regent-mq/regent/broker/config"
	"github.com/regent-mq/regent/test/brokertest"
)

// wake parks a pop on consumer, waits until it is parked, and pushes one
// message through producer. The brokers never reseed their hot lists
// (quietHotList) and the pop waits 30 s, so the message comes back only
// if the push's announcement woke the parked pop: a missing wake-up is a
// 204, not a slow answer.
func wake(t *testing.T, consumer, producer *brokertest.Broker, queue string) {
	t.Helper()
	got := make(chan *brokertest.Popped, 1)
	go func() {
		r, err := consumer.Send("GET", "/api/v1/pop/queue/"+queue+"?wait=true&timeout=30000&autoAck=true", "", nil)
		if err != nil || r.Status != http.StatusOK {
			got <- nil
			return
		}
		var p brokertest.Popped
		if err := json.Unmarshal(r.Body, &p); err != nil {
			got <- nil
			return
		}
		got <- &p
	}()
	consumer.WaitParked(t, 1)
	producer.PushN(t, queue, "", 0, 1)
	p := <-got
	require.NotNil(t, p, "the parked pop was not woken by the push")
	require.Equal(t, []int{0}, p.Ns())
}

// quietHotList keeps a broker from reseeding its hot list during a test,
// so that only an announcement brings a partition to a parked pop.
func quietHotList(c *config.Config) { c.ReseedInterval = time.Hour }

// quiet is the broker of the tests that need quietHotList. They count the
// pops parked on it (WaitParked), so they run one at a time, not in
// parallel.
var quiet = brokertest.NewGroup(quietHotList)

func TestALongPollIsWokenByAPush(t *testing.T) {
	b := quiet.Shared(t)
	wake(t, b, b, b.Q("lp"))
}

func TestALongPollIsWokenByAPushOnAnotherReplica(t *testing.T) {
	a := quiet.Shared(t)
	b := a.Replica(t, quietHotList)
	wake(t, a, b, a.Q("lp"))
}

func TestALongPollIsWokenForAQueueCreatedWhileParked(t *testing.T) {
	a := quiet.Shared(t)
	b := a.Replica(t, quietHotList)
	wake(t, a, b, a.Q("born-later"))
}

// parkPop starts a long-poll of path (30 s) on b and returns where its
// answer comes: the numbers it delivered, or nil for anything but a 200.
func parkPop(b *brokertest.Broker, path string) <-chan []int {
	got := make(chan []int, 1)
	go func() {
		r, err := b.Send("GET", path+"wait=true&timeout=30000&autoAck=true&batch=1", "", nil)
		var p brokertest.Popped
		if err != nil || r.Status != http.StatusOK || json.Unmarshal(r.Body, &p) != nil {
			got <- nil
			return
		}
		got <- p.Ns()
	}()
	return got
}

// A push wakes one parked pop, no more (hotlist: the first in line), so
// pushes to as many partitions as there are parked pops must reach every
// one of them: a wake-up lost on the way is a pop that sleeps to its
// timeout while a message waits (the hot list is never reseeded here).
func TestEachPushWakesAParkedPopAndNoWakeUpIsLost(t *testing.T) {
	b := quiet.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q})
	const pops = 4
	var answers []<-chan []int
	for i := range pops {
		answers = append(answers, parkPop(b, "/api/v1/pop/queue/"+q+"?"))
		b.WaitParked(t, i+1)
	}
	for i := range pops {
		b.PushN(t, q, fmt.Sprintf("p%d", i), i, 1)
	}
	var all []int
	for _, a := range answers {
		ns := <-a
		require.Len(t, ns, 1, "every parked pop gets one message")
		all = append(all, ns...)
	}
	require.ElementsMatch(t, []int{0, 1, 2, 3}, all)
}

// A long-poll of one partition takes only that partition's wake-ups, and
// one of a partition that does not exist yet is woken by the push that
// creates it.
func TestAPartitionLongPollIsWokenByItsOwnPartitionOnly(t *testing.T) {
	b := quiet.Shared(t)
	q := b.Q("q")
	b.PushN(t, q, "a", 0, 1)
	b.PushN(t, q, "b", 0, 1)
	require.Len(t, b.PopAll(t, "/api/v1/pop/queue/"+q+"?autoAck=true&batch=10"), 2)
	ofA := parkPop(b, "/api/v1/pop/queue/"+q+"/partition/a?")
	b.WaitParked(t, 1)
	any := parkPop(b, "/api/v1/pop/queue/"+q+"?")
	b.WaitParked(t, 2)
	ofC := parkPop(b, "/api/v1/pop/queue/"+q+"/partition/c?")
	b.WaitParked(t, 3)
	b.PushN(t, q, "b", 1, 1)
	require.Equal(t, []int{1}, <-any, "b's push wakes the pop that can take b, though it came later")
	b.PushN(t, q, "a", 2, 1)
	require.Equal(t, []int{2}, <-ofA)
	b.PushN(t, q, "c", 3, 1)
	require.Equal(t, []int{3}, <-ofC)
	ofA = parkPop(b, "/api/v1/pop/queue/"+q+"/partition/a?")
	b.WaitParked(t, 1)
	b.PushN(t, q, "a", 4, 1)
	require.Equal(t, []int{4}, <-ofA, "and by every push after")
}

func TestLongPollReturns204CloseToTimeout(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	q := b.Q("q")
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	require.NotNil(t, b.Pop(t, "/api/v1/pop/queue/"+q)) // leased from now on
	start := time.Now()
	require.Nil(t, b.Pop(t, "/api/v1/pop/queue/"+q+"?wait=true&timeout=300"))
	took := time.Since(start)
	require.GreaterOrEqual(t, took, 300*time.Millisecond)
	require.Less(t, took, 2*time.Second)
}

func TestLongPollWhoseClientLeftClaimsNothing(t *testing.T) {
	b := quiet.Shared(t)
	q := b.Q("q")
	b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": q})
	ctx, cancel := context.WithCancel(t.Context())
	req, err := http.NewRequestWithContext(ctx, "GET", b.URL+"/api/v1/pop/queue/"+q+"?wait=true&timeout=10000", nil)
	require.NoError(t, err)
	if b.Token != "" {
		req.Header.Set("Authorization", "Bearer "+b.Token)
	}
	gone := make(chan struct{})
	go func() {
		defer close(gone)
		if resp, err := http.DefaultClient.Do(req); err == nil {
			resp.Body.Close()
		}
	}()
	b.WaitParked(t, 1)
	cancel()
	<-gone
	brokertest.Eventually(t, 10*time.Second, func() error { // the server sees the connection close
		if n := b.Metric(t, "regent_pops_parked"); n != 0 {
			return fmt.Errorf("%v pops still parked", n)
		}
		return nil
	})
	b.Push(t, brokertest.Numbered(q, "Default", 0, 1)...)
	// Nothing is to happen, and no event says that it did not: a pop that
	// wrongly outlived its client would claim within these 50 ms.
	time.Sleep(50 * time.Millisecond)
	for _, c := range b.Cursors(t, q) {
		require.Nil(t, c.LeaseID)
	}
	require.Equal(t, []int{0}, b.Pop(t, "/api/v1/pop/queue/"+q).Ns())
}
