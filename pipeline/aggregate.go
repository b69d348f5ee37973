package pipeline

import (
	"math"

	"github.com/google/cel-go/common/types"
	"github.com/google/cel-go/common/types/ref"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// acc is one aggregate's accumulator: n events, v their sum (sum, avg) or
// extreme (min, max), x the value at event time t (first, last).
type acc struct {
	n int64
	v float64
	t int64
	x ref.Val
}

// fold folds one event into the window's accumulators.
func (w *win) fold(aggs []aggregate, e *sample) {
	w.dirty = true
	for i, a := range aggs {
		c := &w.accs[i]
		first := c.n == 0
		c.n++
		switch a.fn {
		case v1.FnSum, v1.FnAvg:
			c.v += e.nums[i]
		case v1.FnMin:
			if first || e.nums[i] < c.v {
				c.v = e.nums[i]
			}
		case v1.FnMax:
			if first || e.nums[i] > c.v {
				c.v = e.nums[i]
			}
		case v1.FnFirst:
			if first || e.ts < c.t {
				c.t, c.x = e.ts, stable(e.ofs[a.of])
			}
		case v1.FnLast:
			if first || e.ts >= c.t {
				c.t, c.x = e.ts, stable(e.ofs[a.of])
			}
		}
	}
}

// merge folds window o, which starts later than w, into w.
func (w *win) merge(aggs []aggregate, o *win) {
	for i, a := range aggs {
		c, d := &w.accs[i], &o.accs[i]
		switch a.fn {
		case v1.FnSum, v1.FnAvg:
			c.v += d.v
		case v1.FnMin:
			c.v = math.Min(c.v, d.v)
		case v1.FnMax:
			c.v = math.Max(c.v, d.v)
		case v1.FnFirst:
			if d.t < c.t {
				c.t, c.x = d.t, d.x
			}
		case v1.FnLast:
			if d.t >= c.t {
				c.t, c.x = d.t, d.x
			}
		}
		c.n += d.n
	}
}

// value is aggregate i's result.
func (w *win) value(p *Program, i int) ref.Val {
	c := &w.accs[i]
	switch p.aggs[i].fn {
	case v1.FnCount:
		return types.Int(c.n)
	case v1.FnAvg:
		return types.Double(c.v / float64(c.n))
	case v1.FnFirst, v1.FnLast:
		if c.x == nil {
			return types.NullValue
		}
		return c.x
	}
	return types.Double(c.v)
}
