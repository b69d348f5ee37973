package console_test

import (
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/regent-mq/regent/broker/api/auth"
	"github.com/regent-mq/regent/broker/pg/celldb"
	"github.com/regent-mq/regent/broker/pg/db/dbtest"
	"github.com/regent-mq/regent/test/brokertest"
)

// Windows of the seeded query's state, in epoch ms: 12:00 and 12:01 UTC.
var (
	minute0 = time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)
	minute1 = minute0.Add(time.Minute)
)

func ms(t time.Time) int64 { return t.UnixMilli() }

// seed gives b's tenant data for every page, its names starting with p:
//   - queue p-orders with 4 messages; group p-billing has consumed one and
//     holds a lease on the next; group p-audit dead-lettered one;
//   - stream query p-views over p-page-views, sinking to p-views-minutely,
//     whose one cycle wrote three windows: eu:12:00, eu:12:01 and us:12:00.
func seed(t *testing.T, b *brokertest.Broker, p string) {
	t.Helper()
	do := func(method, path string, body any, status int) brokertest.Response {
		t.Helper()
		r := b.Do(t, method, path, "", body)
		if r.Status != status {
			t.Fatalf("%s %s: %d %s", method, path, r.Status, r.Body)
		}
		return r
	}
	push := func(queue string, n int) {
		var items []any
		for i := range n {
			items = append(items, map[string]any{"queue": queue, "transactionId": fmt.Sprintf("%s-tx-%d", queue, i),
				"payload": map[string]any{"n": i, "customer": p + "-customer"}})
		}
		do("POST", "/api/v1/push", map[string]any{"items": items}, http.StatusCreated)
	}
	type popped struct {
		LeaseID  string `json:"leaseId"`
		Messages []struct {
			TransactionID string `json:"transactionId"`
			PartitionID   string `json:"partitionId"`
		} `json:"messages"`
	}
	pop := func(queue, group string) popped {
		var out popped
		do("GET", "/api/v1/pop/queue/"+queue+"?batch=1&consumerGroup="+group, nil, http.StatusOK).JSON(t, &out)
		return out
	}
	ack := func(m popped, group, status string) {
		do("POST", "/api/v1/ack", map[string]any{"transactionId": m.Messages[0].TransactionID, "partitionId": m.Messages[0].PartitionID,
			"status": status, "consumerGroup": group, "error": "the order has no customer"}, http.StatusOK)
	}

	orders := p + "-orders"
	push(orders, 4)
	ack(pop(orders, p+"-billing"), p+"-billing", "completed")
	pop(orders, p+"-billing")
	ack(pop(orders, p+"-audit"), p+"-audit", "dlq")

	grant(t, b)
	var q struct {
		QueryID string `json:"query_id"`
	}
	do("POST", "/streams/v1/queries", map[string]any{"name": p + "-views", "source_queue": p + "-page-views",
		"sink_queue": p + "-views-minutely", "config_hash": "v1"}, http.StatusOK).JSON(t, &q)
	push(p+"-page-views", 2)
	group := "streams." + p + "-views"
	m := pop(p+"-page-views", group)
	window := func(key string, start time.Time, count int) map[string]any {
		return map[string]any{"type": "upsert", "key": key, "value": map[string]any{
			"windowStart": ms(start), "windowEnd": ms(start.Add(time.Minute)), "count": count}}
	}
	var c struct {
		Success bool   `json:"success"`
		Error   string `json:"error"`
	}
	do("POST", "/streams/v1/cycle", map[string]any{"query_id": q.QueryID, "partition_id": m.Messages[0].PartitionID,
		"consumer_group": group,
		"state_ops":      []any{window("eu:12:00", minute0, 7), window("eu:12:01", minute1, 3), window("us:12:00", minute0, 5)},
		"ack":            map[string]any{"leaseId": m.LeaseID, "status": "completed", "count": 1}}, http.StatusOK).JSON(t, &c)
	if !c.Success {
		t.Fatalf("cycle refused: %s", c.Error)
	}
}

// grant lets b's tenant register queries: one but the default tenant
// needs a quota grant.
func grant(t *testing.T, b *brokertest.Broker) {
	t.Helper()
	if b.Tenant != auth.DefaultTenant {
		b.Grant(t, b.Tenant, nil)
	}
}

// shopAt seeds the shop of a tenant of the test's own on the shared broker
// and opens the console's page at the fragment, signed in as its admin.
func shopAt(t *testing.T, fragment string) (*brokertest.Broker, tab) {
	t.Helper()
	b := brokertest.Shared(t)
	seed(t, b, "shop")
	return b, consoleAt(t, b, fragment)
}

// consoleAt opens b's console at the fragment in a new tab, signed in with
// b's token when the broker asks for one.
func consoleAt(t *testing.T, b *brokertest.Broker, fragment string) tab {
	t.Helper()
	tab := newTab(t)
	if b.Token != "" {
		tab.signIn(b, b.Token)
	}
	tab.open(b.URL + "/console/" + fragment)
	return tab
}

// signIn opens b's console and signs in with token.
func (b tab) signIn(br *brokertest.Broker, token string) {
	b.t.Helper()
	b.open(br.URL + "/console/")
	b.do(chromedp.WaitVisible(chromedp.CSS("#login")))
	b.set("#token", token)
	b.do(chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	b.panel("Broker")
}

func TestOverviewShowsQueuesGroupsBehindAndStreamQueries(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "")

	mustContain(t, "the broker panel", tab.panel("Broker"), "healthy", "connected")
	groups := tab.panel("Consumer groups behind")
	mustContain(t, "the groups behind", groups, "shop-billing", "shop-orders", "shop-audit")
	queries := tab.panel("Stream queries")
	mustContain(t, "the stream queries", queries, "shop-views", "shop-page-views", "shop-views-minutely", "behind 1")
	// shop-orders: one partition, 4 messages.
	mustContain(t, "the queues", tab.panel("Queues"), "shop-orders\t1\t4\t", "shop-page-views")
	mustContain(t, "the throughput", tab.panel("Throughput (last 5 min)"), "messages in", "messages out", "dead letters")
	tab.shot("overview")

	tab.phone()
	tab.open(b.URL + "/console/")
	tab.panel("Stream queries")
	tab.shot("overview-phone")
}

func TestQueuePageShowsGroupsWithLagAndLeaseAndItsDeadLetters(t *testing.T) {
	t.Parallel()
	_, tab := shopAt(t, "#/queue/shop-orders")

	groups := tab.panel("Consumer groups")
	// billing: 1 of 4 consumed, the next one leased; audit dead-lettered one.
	mustContain(t, "the queue's groups", groups, "shop-billing", "Default", "3", "leased", "shop-audit")
	dlq := tab.panel("Dead letters")
	mustContain(t, "the queue's dead letters", dlq, "shop-orders-tx-0", "shop-audit", "the order has no customer", "shop-customer")
	// 4 messages, 3 of them after the cursors of both groups.
	mustContain(t, "the partitions", tab.panel("Partitions"), "Default\t4\t3\t")
	tab.shot("queue")
}

func TestStreamQueryPageShowsProgressAndTheStateBrowserFilters(t *testing.T) {
	t.Parallel()
	_, tab := shopAt(t, "#/query/shop-views")

	mustContain(t, "the query panel", tab.panel("Query"), "shop-page-views", "shop-views-minutely", "v1")
	mustContain(t, "the progress panel", tab.panel("Progress"), "state rows", "3")
	mustContain(t, "the source partitions", tab.panel("Source partitions"), "Default")
	tab.panel("State")
	all := tab.waitText("#state-rows", "3 rows")
	// Each window's value and bounds, as the state read answered them.
	mustContain(t, "the state rows", all, "eu:12:00", "eu:12:01", "us:12:00", `"count": 7`,
		"2026-05-06 12:00:00 UTC → 2026-05-06 12:01:00 UTC")
	tab.shot("query-state")

	// Key prefix.
	tab.do(chromedp.SendKeys(chromedp.CSS("#state-prefix"), "eu:"), chromedp.Click(chromedp.CSS("#state-read")))
	eu := tab.waitText("#state-rows", "2 rows")
	mustContain(t, "the eu: rows", eu, "eu:12:00", "eu:12:01")
	mustNotContain(t, "the eu: rows", eu, "us:12:00")

	// Ripeness, ANDed with the prefix: windows ending by 12:01:30 are eu:12:00 only.
	tab.set("#state-ripe", minute1.Add(30*time.Second).Format("2006-01-02T15:04:05"))
	tab.do(chromedp.Click(chromedp.CSS("#state-read")))
	ripe := tab.waitText("#state-rows", "1 row")
	mustContain(t, "the ripe eu: rows", ripe, "eu:12:00")
	mustNotContain(t, "the ripe eu: rows", ripe, "eu:12:01", "us:12:00")
	tab.shot("query-state-filtered")

	// "Ripe now" with no prefix: every window of 2026-05-06 is due.
	tab.set("#state-prefix", "")
	tab.do(chromedp.Click(chromedp.CSS("#state-ripe-now")), chromedp.Click(chromedp.CSS("#state-read")))
	tab.waitText("#state-rows", "3 rows")
}

func TestDeadLetterBrowserListsAndFiltersByQueue(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	seed(t, b, "shop")
	seed(t, b, "mill")
	tab := consoleAt(t, b, "#/dlq")
	all := tab.panel("Dead letters")
	mustContain(t, "every dead letter", all, "shop-orders", "mill-orders", "the order has no customer")

	tab.do(chromedp.SendKeys(chromedp.CSS(`form.filters input[name="queue"]`), "mill-orders"),
		chromedp.Click(chromedp.CSS(`form.filters button[type="submit"]`)))
	tab.waitText(`section[data-panel="Dead letters"] .count`, "1")
	mill := tab.panel("Dead letters")
	mustContain(t, "mill's dead letters", mill, "mill-orders-tx-0")
	mustNotContain(t, "mill's dead letters", mill, "shop-orders")
	tab.shot("dead-letters")
}

func TestMessageBrowseListsTheWindowsMessagesWithAPayloadPreview(t *testing.T) {
	t.Parallel()
	_, tab := shopAt(t, "#/messages")
	mustContain(t, "the messages", tab.panel("Messages"), "shop-orders-tx-3", "shop-orders-tx-0", "dead_letter", "shop-page-views-tx-1")
	for _, tx := range []string{"shop-orders-tx-3", "shop-orders-tx-0"} {
		tab.do(chromedp.WaitVisible(`#main span.preview[data-preview="` + tx + `"][title]`))
	}
	mustContain(t, "the payload previews", tab.panel("Messages"), `{"customer":"shop-customer","n":3}`, `{"customer":"shop-customer","n":0}`)
	tab.do(chromedp.Click(chromedp.CSS(`#main button.link[data-tx="shop-orders-tx-0"]`)))
	mustContain(t, "the dead-lettered message", tab.panel("Message shop-orders-tx-0"),
		"dead_letter", "the order has no customer", `"customer": "shop-customer"`)
	tab.shot("messages")
}

// With auth on, the console asks for a token, refuses one the broker
// refuses, and keeps a good one in the tab's session storage only.
func TestLoginWithATokenThenSignOut(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	token := brokertest.Mint(t, b.Tenant, auth.ReadOnly)
	seed(t, b, "shop")
	tab := newTab(t)
	tab.open(b.URL + "/console/")
	tab.do(chromedp.WaitVisible(chromedp.CSS("#login")))
	tab.shot("login")

	tab.do(chromedp.SendKeys(chromedp.CSS("#token"), "not-a-token"), chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	tab.waitText("#login-error", "The broker refused the token")

	tab.set("#token", "Bearer "+token)
	tab.do(chromedp.Click(chromedp.CSS(`#login button[type="submit"]`)))
	mustContain(t, "the signed-in overview", tab.panel("Stream queries"), "shop-views")
	mustContain(t, "the header", tab.waitText("#identity", "test-"+b.Tenant), "tenant "+b.Tenant)
	stored := run(tab, chromedp.Evaluate[string](`sessionStorage.getItem("regent.token")`))
	cookies := run(tab, chromedp.Evaluate[string](`document.cookie`))
	url := run(tab, chromedp.Location())
	if stored != token {
		t.Errorf("session storage holds %q, want the token without its Bearer prefix", stored)
	}
	if cookies != "" || strings.Contains(url, token) {
		t.Errorf("the token leaked: cookies %q, URL %q", cookies, url)
	}
	tab.shot("signed-in")

	tab.do(chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#login")))
	gone := run(tab, chromedp.Evaluate[bool](`sessionStorage.getItem("regent.token") === null`))
	if !gone {
		t.Errorf("the token stays in session storage after signing out")
	}
}

// With tenancy on, a tenant's token shows that tenant's data, and another
// tenant's query is not there even by its name.
func TestATenantSeesOnlyItsOwnData(t *testing.T) {
	t.Parallel()
	b, globex := brokertest.Shared(t), brokertest.Shared(t) // two tenants
	seed(t, b, "acme")
	seed(t, globex, "globex")
	tab := newTab(t)
	tab.signIn(b, brokertest.Mint(t, b.Tenant, auth.ReadOnly))

	for panel, want := range map[string]string{"Consumer groups behind": "acme-billing", "Stream queries": "acme-views"} {
		text := tab.panel(panel)
		mustContain(t, panel, text, want)
		mustNotContain(t, panel, text, "globex")
	}
	tab.shot("tenant-overview")

	tab.open(b.URL + "/console/#/dlq")
	dlq := tab.panel("Dead letters")
	mustContain(t, "acme's dead letters", dlq, "acme-orders")
	mustNotContain(t, "acme's dead letters", dlq, "globex")

	tab.open(b.URL + "/console/#/query/globex-views")
	mustContain(t, "globex's query seen by acme", tab.panel("Query"), "No stream query named globex-views")
}

// A console left open while its broker goes away says so, rather than
// showing the last data as if it were current.
//
// It stops its broker, so it starts one of its own.
func TestAnErrorIsShownWhenTheBrokerIsDown(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t)
	seed(t, b, "shop")
	tab := consoleAt(t, b, "")
	tab.panel("Stream queries")
	b.Stop()
	tab.do(chromedp.Click(chromedp.CSS("#refresh")))
	tab.waitText("#banner", "The broker at "+strings.TrimPrefix(b.URL, "http://")+" cannot be reached.")
	tab.shot("broker-down")
}

// A consumer group's state has one colour, whatever else its row shows,
// and the page says what each state means: shop-billing is Stable though
// behind (it was orange there, and green where it was caught up).
func TestGroupStatesHaveOneColourAndAreExplained(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "#/queue/shop-orders")
	groups := tab.panel("Consumer groups")
	mustContain(t, "the queue's groups", groups, "Stable: it consumes", "Lagging: its oldest unconsumed message is over 5 minutes old",
		"Dead: it has never consumed a message")
	for page, panel := range map[string]string{"#/queue/shop-orders": "Consumer groups", "": "Consumer groups behind"} {
		tab.open(b.URL + "/console/" + page)
		tab.panel(panel)
		kinds := run(tab, chromedp.Evaluate[[]string](`[...document.querySelectorAll("td span.pill")].filter((p) => p.textContent === "Stable").map((p) => p.className)`))
		if len(kinds) == 0 {
			t.Fatalf("%q shows no Stable group", page)
		}
		for _, k := range kinds {
			if k != "pill ok" {
				t.Errorf("%q shows a Stable group as %q, want pill ok", page, k)
			}
		}
	}
}

// A state key's parts, which the SDKs join with U+001F, show with a
// visible separator, an epoch-ms part as a date with its zone, and a
// watermark row as the date it holds.
func TestStateKeysShowTheirPartsAndTimesAsDates(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	grant(t, b)
	var q struct {
		QueryID string `json:"query_id"`
	}
	do := func(path string, body any, into any) {
		t.Helper()
		r := b.Do(t, "POST", path, "", body)
		if r.Status/100 != 2 {
			t.Fatalf("POST %s: %d %s", path, r.Status, r.Body)
		}
		if into != nil {
			r.JSON(t, into)
		}
	}
	do("/streams/v1/queries", map[string]any{"name": "keys", "source_queue": "keys-src", "config_hash": "v1"}, &q)
	do("/api/v1/push", map[string]any{"items": []any{map[string]any{"queue": "keys-src", "payload": 1}}}, nil)
	var p struct {
		LeaseID  string `json:"leaseId"`
		Messages []struct {
			PartitionID string `json:"partitionId"`
		} `json:"messages"`
	}
	b.Do(t, "GET", "/api/v1/pop/queue/keys-src?batch=1&consumerGroup=streams.keys", "", nil).JSON(t, &p)
	do("/streams/v1/cycle", map[string]any{"query_id": q.QueryID, "partition_id": p.Messages[0].PartitionID,
		"consumer_group": "streams.keys",
		"state_ops": []any{
			map[string]any{"type": "upsert", "key": fmt.Sprintf("tumb:60\u001f%d\u001f/home", ms(minute0)),
				"value": map[string]any{"windowStart": ms(minute0), "windowEnd": ms(minute1), "count": 2}},
			map[string]any{"type": "upsert", "key": "tumb:60\u001fwatermark", "value": map[string]any{"watermark": ms(minute0.Add(30 * time.Second))}},
		},
		"ack": map[string]any{"leaseId": p.LeaseID, "status": "completed", "count": 1}}, nil)
	tab := consoleAt(t, b, "#/query/keys")
	tab.panel("State")
	rows := tab.waitText("#state-rows", "2 rows")
	mustContain(t, "the state rows", rows, "tumb:60 ▸ 1778068800000 (2026-05-06 12:00:00 UTC) ▸ /home",
		"2026-05-06 12:00:00 UTC → 2026-05-06 12:01:00 UTC", "tumb:60 ▸ watermark", "watermark 2026-05-06 12:00:30 UTC")
	mustNotContain(t, "the state rows", rows, "\u001f")
	tab.shot("query-state-keys")
}

// The queue page charts the messages in and out per bucket from the
// per-minute counters, over a chosen window: an hour of seeded counters
// (in: 1 to 60 a minute, out: 0 to 59) shows whole at 1 h and at 7 d,
// and in part at 15 min.
func TestQueuePageChartsAnHourOfCountersOverAChosenWindow(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	if r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "charted"}); r.Status != http.StatusOK {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	now := time.Now().Truncate(time.Minute)
	minutes := make([]dbtest.QueueMinute, 60)
	for i := range minutes {
		minutes[i] = dbtest.QueueMinute{Tenant: b.Tenant, Queue: "charted", Replica: "r1",
			Minute: now.Add(-time.Duration(59-i) * time.Minute), PushMessages: int64(i + 1), PopMessages: int64(i)}
	}
	if err := b.DB.PutQueueMinutes(t.Context(), minutes...); err != nil {
		t.Fatal(err)
	}
	tab := consoleAt(t, b, "#/queue/charted")
	values := func(series string) []int {
		t.Helper()
		raw := run(tab, chromedp.Evaluate[string](`document.querySelector("#ops-chart polyline.`+series+`").dataset.values`))
		var out []int
		for _, v := range strings.Split(raw, ",") {
			var n int
			if _, err := fmt.Sscan(v, &n); err != nil {
				t.Fatalf("%s values %q: %v", series, raw, err)
			}
			out = append(out, n)
		}
		return out
	}
	sum := func(vs []int) (s int) {
		for _, v := range vs {
			s += v
		}
		return s
	}
	for _, w := range []struct {
		label, legend string
		minutes       int
		buckets       int // at least
	}{{"1 h", "per 1 min", 60, 60}, {"7 d", "per 1 h", 10080, 168}} {
		tab.do(chromedp.Click(chromedp.CSS(fmt.Sprintf(`.windows button[data-minutes="%d"]`, w.minutes))))
		text := tab.waitText("#ops-chart", w.legend)
		in, out := values("in"), values("out")
		if sum(in) != 1830 || sum(out) != 1770 || len(in) < w.buckets || len(in) != len(out) {
			t.Errorf("%s: %d buckets in summing to %d, %d out summing to %d; want at least %d buckets, 1830 in and 1770 out",
				w.label, len(in), sum(in), len(out), sum(out), w.buckets)
		}
		mustContain(t, "the "+w.label+" chart", text, "1,830 messages in", "1,770 messages out")
		if w.label == "1 h" {
			tab.shot("queue-chart")
		}
	}
	tab.do(chromedp.Click(chromedp.CSS(`.windows button[data-minutes="15"]`)))
	tab.waitText("#ops-chart", "per 1 min")
	if in := values("in"); sum(in) >= 1830 || sum(in) < 45*15 {
		t.Errorf("15 min: in %v sums to %d, want the last quarter hour's (at least %d, less than 1830)", in, sum(in), 45*15)
	}
}

// The stream query page shows the Kubernetes side the broker knows, as the
// operator applied it: the suspension (also the query's state) and the last
// rewind.
func TestStreamQueryPageShowsItsSuspensionAndLastRewind(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "#/query/shop-views")
	mustContain(t, "a query never suspended or rewound", tab.panel("Query"), "Suspended\nno", "Last rewind\nnever")
	cell := celldb.New(b.Pool)
	if found, err := cell.Suspend(t.Context(), b.Tenant, "shop-views", "streams.shop-views", true); err != nil || !found {
		t.Fatalf("suspend found query shop-views: %v, %v", found, err)
	}
	if _, err := cell.Rewind(t.Context(), b.Tenant, "shop-views", "streams.shop-views", "r1",
		time.Date(2026, 5, 6, 12, 0, 0, 0, time.UTC)); err != nil {
		t.Fatal(err)
	}
	// The overview first: opening the page that is open already would
	// not draw it again.
	tab.open(b.URL + "/console/")
	mustContain(t, "the overview's queries", tab.panel("Stream queries"), "shop-views", "suspended")
	tab.open(b.URL + "/console/#/query/shop-views")
	mustContain(t, "the suspended, rewound query", tab.panel("Query"), "Suspended\nyes (spec.suspend)",
		"Last rewind\nto 2026-05-06 12:00:00 UTC, at ", "(1 partition)")
	mustContain(t, "its progress", tab.panel("Progress"), "suspended")
	tab.shot("query-suspended")
}

// An admin pauses pops from the overview, and resumes them: the switch is
// the cluster-wide pop maintenance, under which a pop of a queue with
// messages answers 204. A read-only token is not offered it.
//
// Pop maintenance is the whole broker's, so it starts one of its own.
func TestAnAdminPausesAndResumesPopsFromTheOverview(t *testing.T) {
	t.Parallel()
	b := brokertest.Start(t, brokertest.WithJWT(false))
	admin := brokertest.Mint(t, auth.DefaultTenant, auth.Admin)
	if r := b.Do(t, "POST", "/api/v1/push", admin, map[string]any{"items": []any{map[string]any{"queue": "paused", "payload": 1}}}); r.Status != http.StatusCreated {
		t.Fatalf("push: %d %s", r.Status, r.Body)
	}
	paused := func() bool {
		t.Helper()
		var m struct {
			PopMaintenanceMode bool `json:"popMaintenanceMode"`
		}
		b.Do(t, "GET", "/api/v1/system/maintenance/pop", admin, nil).JSON(t, &m)
		return m.PopMaintenanceMode
	}

	tab := newTab(t)
	tab.signIn(b, admin)
	mustContain(t, "the pops panel", tab.panel("Pops"), "running", "Pause pops")
	tab.do(chromedp.Click(chromedp.CSS("#pop-toggle")))
	tab.waitText("#pop-switch", "Resume pops")
	if !paused() {
		t.Fatal("the console shows pops paused; the broker does not")
	}
	if r := b.Do(t, "GET", "/api/v1/pop/queue/paused?batch=1", admin, nil); r.Status != http.StatusNoContent {
		t.Fatalf("a pop while paused: %d %s, want 204", r.Status, r.Body)
	}
	tab.shot("pops-paused")
	tab.do(chromedp.Click(chromedp.CSS("#pop-toggle")))
	tab.waitText("#pop-switch", "Pause pops")
	if paused() {
		t.Fatal("the console shows pops running; the broker has them paused")
	}

	reader := newTab(t)
	reader.signIn(b, brokertest.Mint(t, auth.DefaultTenant, auth.ReadOnly))
	reader.panel("Broker")
	if run(reader, chromedp.Evaluate[bool](`document.querySelector('section[data-panel="Pops"]') !== null`)) {
		t.Error("a read-only token is offered the pop switch")
	}
}

// A dead letter's message is deleted from the dead letter page, after the
// page asks (it goes for every group): the page then lists none, and the
// broker has neither the dead letter nor the message.
func TestADeadLetterIsDeletedFromTheDeadLetterPageAfterAsking(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "#/dlq")
	mustContain(t, "the dead letters", tab.panel("Dead letters"), "shop-orders-tx-0")
	tab.do(chromedp.Click(chromedp.CSS(`button[data-delete="shop-orders-tx-0"]`)))
	tab.waitText(`section[data-panel="Dead letters"]`, "Delete the message for every group?")
	tab.shot("dead-letter-delete")
	tab.press(`button[data-confirm="shop-orders-tx-0"]`)
	tab.waitText(`section[data-panel="Dead letters"][data-state]`, "No dead letters.")
	var d struct {
		Total    int `json:"total"`
		Messages []struct {
			PartitionID string `json:"partitionId"`
		} `json:"messages"`
	}
	b.Do(t, "GET", "/api/v1/dlq", "", nil).JSON(t, &d)
	if d.Total != 0 {
		t.Fatalf("the broker still holds %d dead letters", d.Total)
	}
	var msgs struct {
		Messages []struct {
			TransactionID string `json:"transactionId"`
		} `json:"messages"`
	}
	b.Do(t, "GET", "/api/v1/messages?queue=shop-orders", "", nil).JSON(t, &msgs)
	for _, m := range msgs.Messages {
		if m.TransactionID == "shop-orders-tx-0" {
			t.Fatal("the deleted message is still listed")
		}
	}
	if len(msgs.Messages) != 3 {
		t.Fatalf("shop-orders lists %d messages after the deletion, want 3", len(msgs.Messages))
	}
}

// A group's cursors on a queue are moved from the queue page: past the
// newest message (the group then pops nothing), then back to before the
// first (it pops the first message again).
func TestAGroupIsSoughtFromTheQueuePage(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "#/queue/shop-orders")
	tab.panel("Consumer groups")
	popStatus := func() int {
		t.Helper()
		return b.Do(t, "GET", "/api/v1/pop/queue/shop-orders?batch=1&autoAck=true&consumerGroup=shop-audit", "", nil).Status
	}
	tab.do(chromedp.Click(chromedp.CSS("#seek-end")))
	tab.waitText("#seek-result", "shop-audit: 1 partition moved past the newest message.")
	if s := popStatus(); s != http.StatusNoContent {
		t.Fatalf("shop-audit pops %d after the seek to the end, want 204", s)
	}
	tab.shot("queue-seek")
	tab.set("#seek-at", "1970-01-01T00:00:00")
	tab.do(chromedp.Click(chromedp.CSS("#seek-time")))
	tab.waitText("#seek-result", "shop-audit: 1 partition moved to after 1970-01-01 00:00:00 UTC.")
	if s := popStatus(); s != http.StatusOK {
		t.Fatalf("shop-audit pops %d after the seek to 1970, want 200", s)
	}
}

// The queue page charts each consumer group's lag, in messages and in
// seconds, from the minutes the backlog refresh samples: an hour of two
// groups' samples shows each group's line and its peak.
func TestQueuePageChartsEachGroupsLagInMessagesAndSeconds(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	if r := b.Do(t, "POST", "/api/v1/configure", "", map[string]any{"queue": "lagging"}); r.Status != http.StatusOK {
		t.Fatalf("configure: %d %s", r.Status, r.Body)
	}
	now := time.Now().Truncate(time.Minute)
	for i := range 60 {
		for group, k := range map[string]int{"billing": 1, "audit": 2} {
			if err := b.DB.PutGroupMinute(t.Context(), dbtest.GroupMinute{Tenant: b.Tenant, Queue: "lagging", Group: group,
				Minute: now.Add(-time.Duration(59-i) * time.Minute), Lag: int64(i * k), LagSeconds: float64(i * k * 10)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab := consoleAt(t, b, "#/queue/lagging")
	text := tab.waitText("#lag-chart", "audit: peak 118")
	mustContain(t, "the lag charts", text, "Messages behind", "billing: peak 59", "Seconds behind", "audit: peak 1,180", "billing: peak 590")
	lines := run(tab, chromedp.Evaluate[int](`document.querySelectorAll("#lag-chart polyline").length`))
	if lines != 4 {
		t.Fatalf("%d lines in the lag charts, want 4 (two groups, two charts)", lines)
	}
	tab.shot("queue-lag-chart")
}

// The query page charts the query's cycles, committed and refused, from
// the per-minute counts of its cycles.
func TestQueryPageChartsItsCyclesAndRefusedCycles(t *testing.T) {
	t.Parallel()
	b := brokertest.Shared(t)
	grant(t, b)
	var q struct {
		QueryID string `json:"query_id"`
	}
	r := b.Do(t, "POST", "/streams/v1/queries", "", map[string]any{"name": "busy", "source_queue": "busy-src", "config_hash": "h"})
	if r.Status != http.StatusOK {
		t.Fatalf("register: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &q)
	now := time.Now().Truncate(time.Minute)
	for i := range 30 {
		for _, replica := range []string{"r1", "r2"} {
			if err := b.DB.PutQueryMinute(t.Context(), dbtest.QueryMinute{Tenant: b.Tenant, QueryID: q.QueryID, Replica: replica,
				Minute: now.Add(-time.Duration(29-i) * time.Minute), Cycles: 10, Refused: int64(i % 2)}); err != nil {
				t.Fatal(err)
			}
		}
	}
	tab := consoleAt(t, b, "#/query/busy")
	mustContain(t, "the cycles chart", tab.waitText("#cycle-chart", "refused"), "600 cycles", "30 refused")
	tab.shot("query-cycles")
}

// Retry pushes the dead letter's payload again as a new message of its
// partition, which its group is then delivered, and deletes the dead one.
func TestADeadLetterIsRetriedThenDeliveredAgain(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "#/dlq")
	mustContain(t, "the dead letters", tab.panel("Dead letters"), "shop-orders-tx-0")
	tab.do(chromedp.Click(chromedp.CSS(`button[data-retry="shop-orders-tx-0"]`)))
	tab.waitText(`section[data-panel="Dead letters"]`, "Push the payload again to shop-orders/Default")
	tab.shot("dead-letter-retry")
	tab.press(`button[data-confirm="shop-orders-tx-0"][data-action="Retry"]`)
	tab.waitText(`section[data-panel="Dead letters"][data-state]`, "No dead letters.")
	// shop-audit had consumed only the message it dead-lettered: it is
	// delivered the retried one next.
	var p struct {
		Messages []struct {
			TransactionID string         `json:"transactionId"`
			Data          map[string]any `json:"data"`
		} `json:"messages"`
	}
	r := b.Do(t, "GET", "/api/v1/pop/queue/shop-orders?batch=10&consumerGroup=shop-audit&autoAck=true", "", nil)
	if r.Status != http.StatusOK {
		t.Fatalf("pop after the retry: %d %s", r.Status, r.Body)
	}
	r.JSON(t, &p)
	var retried int
	for _, m := range p.Messages {
		if m.TransactionID == "shop-orders-tx-0" {
			t.Fatal("the dead message was delivered again; it was to be deleted")
		}
		if m.Data["n"] == float64(0) && m.Data["customer"] == "shop-customer" {
			retried++
		}
	}
	if retried != 1 || len(p.Messages) != 4 {
		t.Fatalf("shop-audit got %d messages, %d of them the retried payload; want tx-1..3 and the retry: %+v", len(p.Messages), retried, p.Messages)
	}
}

func TestAQueryWithATableSinkShowsTheTablesRowCountAndLastWrite(t *testing.T) {
	t.Parallel()
	b, tab := shopAt(t, "")
	b.CreateTable(t, "shop_windows", []dbtest.TableColumn{{Name: "key", Type: "text"}, {Name: "count", Type: "bigint"}}, "key")
	reg := b.Call(t, http.StatusOK, "POST", "/streams/v1/queries", map[string]any{"name": "shop-tabled", "source_queue": "shop-clicks",
		"config_hash": "v1", "sink_table": map[string]any{"table": "shop_windows", "key_columns": []string{"key"}}})
	conf := b.Call(t, http.StatusOK, "POST", "/api/v1/configure", map[string]any{"queue": "shop-clicks"})
	b.Call(t, http.StatusOK, "POST", "/streams/v1/cycle", map[string]any{"query_id": reg.Map(t)["query_id"],
		"partition_id": conf.Map(t)["partitionId"], "ack": nil,
		"table_rows": []any{map[string]any{"key": "eu", "count": 7}, map[string]any{"key": "us", "count": 5}}})

	tab.open(b.URL + "/console/#/query/shop-tabled")
	schema, err := b.DB.TenantSchema(t.Context(), b.Tenant)
	if err != nil {
		t.Fatal(err)
	}
	mustContain(t, "the table sink", tab.panel("Table sink"), "Table\n"+schema+".shop_windows", "Mode\nupsert on key",
		"Rows\n2", "Rows written\n2", "Last write\n20")
	tab.shot("query-table-sink")
	tab.open(b.URL + "/console/")
	mustContain(t, "the overview's queries", tab.panel("Stream queries"), "shop-tabled\tshop-clicks\t—\tshop_windows\t2\t20")
}
