package streams_test

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/regent-mq/regent/test/brokertest"
)

type stateRow struct {
	Key       string         `json:"key"`
	Value     map[string]any `json:"value"`
	UpdatedAt string         `json:"updated_at"`
}

type stateAnswer struct {
	Success bool       `json:"success"`
	Rows    []stateRow `json:"rows"`
}

// getState posts a state read and requires a 200.
func getState(t testing.TB, b *brokertest.Broker, body map[string]any) stateAnswer {
	t.Helper()
	r := post(t, b, "/streams/v1/state/get", body)
	wantStatus(t, r, 200)
	var a stateAnswer
	r.JSON(t, &a)
	if !a.Success || a.Rows == nil {
		t.Fatalf("state answer %s, want success and a rows array", r.Body)
	}
	return a
}

func keysOf(a stateAnswer) []string {
	out := []string{}
	for _, r := range a.Rows {
		out = append(out, r.Key)
	}
	return out
}

// shard registers a query and writes rows into one partition's shard.
func shard(t testing.TB, b *brokertest.Broker, rows map[string]string) (queryID, partitionID string) {
	t.Helper()
	q := register(t, b, "q", "src", "", "h", false)
	partitionID = sourcePartition(t, b, "src")
	for k, v := range rows {
		b.PutState(t, q.QueryID, partitionID, k, v)
	}
	return q.QueryID, partitionID
}

func TestStateGetReturnsRowsOrderedByKeyWithTheirValueAndUpdatedAt(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{"b": `{"acc": 2}`, "a": `{"acc": 1}`, "B": `{"acc": 0}`})
	// Another partition's shard and another query's rows are not read.
	b.PutState(t, q, uuid.NewString(), "a", `{}`)
	a := getState(t, b, map[string]any{"query_id": q, "partition_id": p})
	if got := keysOf(a); !slices.Equal(got, []string{"B", "a", "b"}) {
		t.Fatalf("keys %v, want [B a b] (bytewise order, this shard only)", got)
	}
	if a.Rows[1].Value["acc"] != 1.0 {
		t.Fatalf("value %v, want {acc: 1}", a.Rows[1].Value)
	}
	ts, err := time.Parse(time.RFC3339Nano, a.Rows[0].UpdatedAt)
	if err != nil || !strings.HasSuffix(a.Rows[0].UpdatedAt, "Z") || time.Since(ts) > time.Hour {
		t.Fatalf("updated_at %q is not a recent RFC 3339 UTC time (%v)", a.Rows[0].UpdatedAt, err)
	}
}

func TestStateGetReturnsKeysAndValuesExactlyAsStored(t *testing.T) {
	t.Parallel()
	b := shared(t)
	key := "tumb:60\x1f\"quoted\" \\ back\n\x01é🙂"
	q, p := shard(t, b, map[string]string{key: `{"s": "é\u0001x\"", "n": 1.5e300, "a": [null, true]}`})
	a := getState(t, b, map[string]any{"query_id": q, "partition_id": p})
	if len(a.Rows) != 1 || a.Rows[0].Key != key {
		t.Fatalf("rows %+v, want the key %q", a.Rows, key)
	}
	if v := a.Rows[0].Value; v["s"] != "é\x01x\"" || v["n"] != 1.5e300 || fmt.Sprint(v["a"]) != "[<nil> true]" {
		t.Fatalf("value %v, want it as stored", v)
	}
}

func TestStateGetKeysAbsentNullOrEmptyMeanNoFilter(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{"a": `{}`, "b": `{}`})
	for _, keys := range []any{"absent", nil, []string{}} {
		body := map[string]any{"query_id": q, "partition_id": p}
		if keys != "absent" {
			body["keys"] = keys
		}
		if got := keysOf(getState(t, b, body)); len(got) != 2 {
			t.Fatalf("keys=%v read %v, want every row", keys, got)
		}
	}
}

func TestStateGetKeysSelectsExactKeysAndAMissingKeyIsAbsent(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{"a": `{}`, "ab": `{}`, "b": `{}`})
	got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "keys": []string{"b", "a", "zzz"}}))
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("keys [b a zzz] read %v, want [a b] with the missing key absent", got)
	}
}

func TestStateGetKeyPrefixSelectsKeysBeginningWithIt(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{
		"tumb:60\x1f1\x1facme": `{}`, "tumb:60\x1f2\x1facme": `{}`, "tumb:600\x1f1\x1facme": `{}`, "tumb:5": `{}`, "other": `{}`,
		"é\U0010FFFF": `{}`, "é\U0010FFFFx": `{}`, "ê": `{}`,
	})
	got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "key_prefix": "tumb:60\x1f"}))
	if !slices.Equal(got, []string{"tumb:60\x1f1\x1facme", "tumb:60\x1f2\x1facme"}) {
		t.Fatalf("prefix read %q, want exactly the tumb:60 operator's windows", got)
	}
	got = keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "key_prefix": "é\U0010FFFF"}))
	if !slices.Equal(got, []string{"é\U0010FFFF", "é\U0010FFFFx"}) {
		t.Fatalf("prefix ending in U+10FFFF read %q", got)
	}
}

func TestStateGetEmptyKeyPrefixIsAbsent(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{"a": `{}`, "b": `{}`})
	if got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "key_prefix": ""})); len(got) != 2 {
		t.Fatalf("empty prefix read %v, want every row", got)
	}
}

func TestStateGetKeyPrefixMatchesPercentAndUnderscoreLiterally(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{"a%b": `{}`, "axb": `{}`, "a_c": `{}`, "ayc": `{}`, "a%": `{}`})
	for prefix, want := range map[string][]string{
		"a%": {"a%", "a%b"},
		"a_": {"a_c"},
		"%":  {},
	} {
		got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "key_prefix": prefix}))
		if !slices.Equal(got, want) {
			t.Fatalf("prefix %q read %v, want %v", prefix, got, want)
		}
	}
}

func TestStateGetRipeAtOrBeforeReadsOnlyNumericWindowEndsAtOrBeforeIt(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{
		"early":  `{"windowEnd": 1000}`,
		"equal":  `{"windowEnd": 2000}`,
		"late":   `{"windowEnd": 2001}`,
		"string": `{"windowEnd": "1000"}`,
		"none":   `{"acc": 1}`,
		"nested": `{"w": {"windowEnd": 1}}`,
		"scalar": `5`,
		"float":  `{"windowEnd": 1999.5}`,
	})
	got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p, "ripe_at_or_before": 2000}))
	if !slices.Equal(got, []string{"early", "equal", "float"}) {
		t.Fatalf("ripe_at_or_before 2000 read %v, want [early equal float]", got)
	}
}

func TestStateGetFiltersAreANDed(t *testing.T) {
	t.Parallel()
	b := shared(t)
	q, p := shard(t, b, map[string]string{
		"w:1": `{"windowEnd": 10}`, "w:2": `{"windowEnd": 20}`, "w:3": `{"windowEnd": 5}`, "x:1": `{"windowEnd": 1}`,
	})
	got := keysOf(getState(t, b, map[string]any{"query_id": q, "partition_id": p,
		"keys": []string{"w:1", "w:2", "x:1"}, "key_prefix": "w:", "ripe_at_or_before": 15}))
	if !slices.Equal(got, []string{"w:1"}) {
		t.Fatalf("keys AND prefix AND ripeness read %v, want [w:1]", got)
	}
}

func TestStateGetMissingIdsAre400(t *testing.T) {
	t.Parallel()
	b := shared(t)
	id := uuid.NewString()
	want400(t, b, "/streams/v1/state/get", map[string]string{
		`{"partition_id": "` + id + `"}`:                                                     "query_id",
		`{"query_id": "", "partition_id": "` + id + `"}`:                                     "query_id",
		`{"query_id": "` + id + `"}`:                                                         "partition_id",
		`{"query_id": "` + id + `", "partition_id": null}`:                                   "partition_id",
		`{"query_id": "nope", "partition_id": "` + id + `"}`:                                 "query_id",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "keys": "a"}`:              "keys",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "ripe_at_or_before": "1"}`: "ripe_at_or_before",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "key_prefix": "a\u0000"}`:  "key_prefix",
		`{"query_id": "` + id + `", "partition_id": "` + id + `", "keys": ["\u0000"]}`:       "keys",
	})
}

func TestStateGetUnknownQueryReadsAsEmptyRows(t *testing.T) {
	t.Parallel()
	b := shared(t)
	_, p := shard(t, b, map[string]string{"a": `{}`})
	if got := keysOf(getState(t, b, map[string]any{"query_id": uuid.NewString(), "partition_id": p})); len(got) != 0 {
		t.Fatalf("unknown query read %v", got)
	}
}

// It breaks the database for every query, so it keeps a broker of its own.
func TestStateGetDatabaseErrorIs500(t *testing.T) {
	t.Parallel()
	b := start(t)
	q, p := shard(t, b, map[string]string{"a": `{}`})
	if err := b.DB.HideState(t.Context()); err != nil {
		t.Fatal(err)
	}
	r := post(t, b, "/streams/v1/state/get", map[string]any{"query_id": q, "partition_id": p})
	wantStatus(t, r, 500)
	if strings.Contains(string(r.Body), "state") {
		t.Fatalf("500 body leaks SQL detail: %s", r.Body)
	}
}

func TestStateGetWithTenancyAForeignQueryReadsAsEmptyRows(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	q, p := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.red, "src")
	x.b.PutState(t, q, p, "a", `{}`)
	r := x.b.Do(t, "POST", "/streams/v1/state/get", x.red, map[string]any{"query_id": q, "partition_id": p})
	wantStatus(t, r, 200)
	if got := r.Map(t)["rows"]; got == nil || len(got.([]any)) != 0 {
		t.Fatalf("a foreign query id read %s, want empty rows", r.Body)
	}
}

func TestStateGetWithTenancyAForeignOrMissingPartitionIs404(t *testing.T) {
	t.Parallel()
	x := twoTenants(t)
	q, foreign := queryAs(t, x.b, x.blue), partitionAs(t, x.b, x.red, "src")
	for _, p := range []string{foreign, uuid.NewString()} {
		wantNotFound(t, x.b.Do(t, "POST", "/streams/v1/state/get", x.blue, map[string]any{"query_id": q, "partition_id": p}))
	}
}
