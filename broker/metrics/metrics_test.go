package metrics_test

import (
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/regent-mq/regent/test/brokertest"
)

func TestMain(m *testing.M) { brokertest.Main(m) }

func scrape(t *testing.T, b *brokertest.Broker) string { return b.Scrape(t) }

func TestPoolFiguresAreExportedFromThePoolsOwnStatistics(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t) // --pool-size=10
	b.Do(t, "GET", "/health", "", nil)
	body := scrape(t, b)
	for _, want := range []string{"regent_db_pool_max_conns 10\n", "regent_db_pool_total_conns ", "regent_db_pool_acquired_conns ",
		"regent_db_pool_idle_conns ", "regent_db_pool_constructing_conns ", "regent_db_pool_empty_acquires_total ",
		"regent_db_pool_canceled_acquires_total ", "regent_db_pool_acquire_wait_seconds_total ", "regent_db_pool_new_conns_total "} {
		if !strings.Contains(body, "\n"+want) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
	if !regexp.MustCompile(`\nregent_db_pool_acquires_total [1-9]`).MatchString(body) {
		t.Errorf("regent_db_pool_acquires_total is not positive after a health check:\n%s", body)
	}
}

func TestDatabaseUpIsOneAfterAHealthCheckReachedPostgres(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	if r := b.Do(t, "GET", "/health", "", nil); r.Status != http.StatusOK {
		t.Fatalf("health: %d %s", r.Status, r.Body)
	}
	if body := scrape(t, b); !strings.Contains(body, "\nregent_database_up 1\n") {
		t.Fatalf("/metrics lacks regent_database_up 1:\n%s", body)
	}
}
