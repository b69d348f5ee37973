package app_test

import (
	"context"
	"sync"
	"testing"

	"github.com/regent-mq/regent/broker/migrate"
	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

func TestMain(m *testing.M) { pgtest.MainNoLeaks(m) }

func TestTwoBrokersStartingTogetherMigrateOnce(t *testing.T) {
	url := pgtest.EmptyURL(t)
	var wg sync.WaitGroup
	brokers := make([]*brokertest.Broker, 2)
	for i := range brokers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			brokers[i] = brokertest.StartOn(t, url)
		}()
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	for i, b := range brokers {
		if r := b.Do(t, "GET", "/health", "", nil); r.Status != 200 {
			t.Fatalf("broker %d health = %d %s", i, r.Status, r.Body)
		}
	}
	all, err := migrate.All()
	if err != nil {
		t.Fatal(err)
	}
	var recorded, distinct int
	err = brokers[0].Pool.QueryRow(context.Background(),
		"SELECT count(*), count(DISTINCT version) FROM public.regent_schema_migrations").Scan(&recorded, &distinct)
	if err != nil {
		t.Fatal(err)
	}
	if recorded != len(all) || distinct != len(all) {
		t.Fatalf("recorded %d migrations (%d distinct), want each of %d exactly once", recorded, distinct, len(all))
	}
}
