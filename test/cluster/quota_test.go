package cluster_test

import (
	"context"
	"math"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/jackc/pgx/v5/pgxpool"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/cluster"
	"github.com/regent-mq/regent/test/pgtest"
)

// The push rate of a TenantQuota holds for the replicas together: three
// brokers on one database, each pushed to flat out, store within 10 % of
// the configured rate over 10 s. The first 2 s, which spend the burst and
// let every replica lease its first slices, are not measured.
func TestThePushRateHoldsAcrossThreeReplicas(t *testing.T) {
	const (
		rate    = 200 // messages per second
		perPush = 5
		warmup  = 2 * time.Second
		window  = 10 * time.Second
	)
	url := pgtest.URL(t)
	brokers := cluster.Start(t, url, 3, "--auth=jwt", "--jwt-secret="+brokertest.Secret, "--tenancy=on")
	db := brokertest.At(brokers[0].URL)
	tok := brokertest.Mint(t, "acme", auth.ReadWrite)
	if r := db.Do(t, "POST", "/api/v1/configure", tok, map[string]any{"queue": "rated"}); r.Status != http.StatusOK {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	pool, err := pgxpool.New(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	defer pool.Close()
	perSecond := int64(rate)
	if _, err := celldb.New(pool).ApplyQuota(context.Background(), celldb.Quota{Tenant: "acme", Enabled: true,
		PushMessagesPerSecond: &perSecond, PushMessagesBurst: &perSecond}); err != nil {
		t.Fatal(err)
	}
	body := map[string]any{"items": make([]map[string]any, perPush)}
	for i := range perPush {
		body["items"].([]map[string]any)[i] = map[string]any{"queue": "rated", "payload": i}
	}

	start := time.Now()
	from, until := start.Add(warmup), start.Add(warmup+window)
	var accepted, refused atomic.Int64
	var wg sync.WaitGroup
	for _, b := range brokers {
		c := brokertest.At(b.URL)
		for range 2 {
			wg.Go(func() {
				for {
					r := c.Do(t, "POST", "/api/v1/push", tok, body)
					now := time.Now()
					if now.After(until) {
						return
					}
					switch r.Status {
					case http.StatusCreated:
						if now.After(from) {
							accepted.Add(perPush)
						}
					case http.StatusTooManyRequests:
						refused.Add(1)
						// A client that honours nothing but still does
						// not spin: the machine is shared.
						time.Sleep(5 * time.Millisecond)
					default:
						t.Errorf("push: %d %s", r.Status, r.Body)
						return
					}
				}
			})
		}
	}
	wg.Wait()
	got := float64(accepted.Load()) / window.Seconds()
	t.Logf("three replicas stored %.1f messages/s against a rate of %d (%d pushes refused)", got, rate, refused.Load())
	if math.Abs(got-rate) > 0.1*rate {
		t.Fatalf("the replicas together stored %.1f messages/s, not within 10 %% of %d", got, rate)
	}
	if refused.Load() == 0 {
		t.Fatal("no push was refused: the clients never pressed against the rate")
	}
}
