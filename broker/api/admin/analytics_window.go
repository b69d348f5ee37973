package admin

import (
	"context"
	"math"
	"net/http"
	"time"

	"github.com/regent-mq/regent/broker/api/httpx"
	"github.com/regent-mq/regent/broker/pg/db"
)

// bucketKey formats a bucket's start as the dashboard compares them:
// fixed-width, second precision, UTC.
func bucketKey(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05Z") }

// timeRange reads from and to, defaulting to the span before now; from
// after to is a 400.
func timeRange(r *http.Request, span time.Duration) (from, to time.Time, err error) {
	now := time.Now()
	if to, err = timeQuery(r, "to", now); err != nil {
		return
	}
	if from, err = timeQuery(r, "from", to.Add(-span)); err != nil {
		return
	}
	if from.After(to) {
		err = httpx.BadRequest("from must not be after to")
	}
	return
}

// bucketWidth is the analytics' bucket for a range (§5).
func bucketWidth(span time.Duration) time.Duration {
	switch {
	case span <= time.Hour:
		return time.Minute
	case span <= 6*time.Hour:
		return 5 * time.Minute
	case span <= 24*time.Hour:
		return 15 * time.Minute
	case span <= 7*24*time.Hour:
		return time.Hour
	}
	return 6 * time.Hour
}

// window reads the analytics sub-routes' common parameters: from and to
// (the last hour), queue and hostname (the replica).
func window(r *http.Request) (db.Window, error) {
	from, to, err := timeRange(r, time.Hour)
	if err != nil {
		return db.Window{}, err
	}
	q := r.URL.Query()
	if err := httpx.CheckTexts("queue", q.Get("queue"), "hostname", q.Get("hostname")); err != nil {
		return db.Window{}, err
	}
	return db.Window{From: from, To: to, Width: bucketWidth(to.Sub(from)), Queue: q.Get("queue"), Replica: q.Get("hostname")}, nil
}

// windowed reads a request's window and what load finds in it for the
// caller's tenant; false when it has answered an error instead.
func windowed[T any](a *Analytics, w http.ResponseWriter, r *http.Request,
	load func(ctx context.Context, tenant string, win db.Window) (T, error)) (db.Window, T, bool) {
	var none T
	win, err := window(r)
	if err != nil {
		httpx.Fail(w, err)
		return win, none, false
	}
	v, err := load(r.Context(), tenant(r), win)
	if err != nil {
		a.fail(w, r, err)
		return win, none, false
	}
	return win, v, true
}

func timeRangeJSON(w db.Window) map[string]string {
	return map[string]string{"from": instantOf(w.From), "to": instantOf(w.To)}
}

func instantOf(t time.Time) string { return *instant(&t) }

func bucketMinutes(w db.Window) int { return int(w.Width / time.Minute) }

// round2 rounds to two decimals, as Queen writes rates and averages.
func round2(x float64) float64 { return math.Round(x*100) / 100 }

func perSecond(n int64, w db.Window) float64 { return round2(float64(n) / w.Width.Seconds()) }

func ratio(sum, count int64) int64 {
	if count == 0 {
		return 0
	}
	return int64(math.Round(float64(sum) / float64(count)))
}

// rollup sums the rows that share a key, in first-seen order.
func rollup[K comparable](rows []db.QueueMinutes, keyOf func(db.QueueMinutes) K) ([]K, map[K]*db.QueueMinutes) {
	var keys []K
	sums := map[K]*db.QueueMinutes{}
	for _, m := range rows {
		k := keyOf(m)
		s := sums[k]
		if s == nil {
			c := m
			sums[k] = &c
			keys = append(keys, k)
			continue
		}
		for f := range s.N {
			s.N[f] += m.N[f]
		}
		s.LagMax = max(s.LagMax, m.LagMax)
	}
	return keys, sums
}
