// Package pipeline compiles a StreamQuery's pipeline (api/v1alpha1.Pipeline)
// and folds a source partition's events through it in memory: filter, key,
// event time, windows, aggregates, having and project. It knows nothing of
// HTTP; package streamworker runs it against a broker, exactly once.
package pipeline

import (
	"errors"
	"fmt"
	"regexp"
	"time"

	"github.com/google/cel-go/cel"
	"github.com/google/cel-go/checker"
	"github.com/google/cel-go/common/types"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
)

// CostLimit is the most CEL cost units one evaluation may spend, so that
// no expression can stall a worker; Kubernetes allows the same per call.
const CostLimit = 1_000_000

// Program is a compiled pipeline: each expression compiled and type-checked
// once, its window compiled for its type, times in milliseconds.
type Program struct {
	Hash string // the config hash

	filter, keyBy, eventTime cel.Program
	having, project          cel.Program
	aggs                     []aggregate
	ofs                      []cel.Program // distinct `of` expressions; aggregate.of indexes them

	columns []Column // nil: not known before the pipeline runs

	window   windowKind // nil for a stateless pipeline
	lateness int64
	late     string // "" to drop late events
	// IdleFlush is how long a partition stays quiet before its windows
	// are closed by wall-clock time.
	IdleFlush time.Duration
}

type aggregate struct {
	name string
	fn   v1.AggregateFn
	of   int // index in Program.ofs; -1 for count
}

var (
	namePattern  = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}$`)
	queuePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)
	reserved     = map[string]bool{"key": true, "windowStart": true, "windowEnd": true, "partition": true,
		"payload": true, "transactionId": true, "createdAt": true}
)

// Compile checks the pipeline's structure, compiles and type-checks every
// expression, and returns the program. An error carries the field and the
// CEL compiler's message.
func Compile(spec v1.Pipeline) (*Program, error) {
	window, err := checkShape(&spec)
	if err != nil {
		return nil, err
	}
	c := spec.Canonical()
	p := &Program{Hash: spec.ConfigHash(), window: window}
	if c.Late != v1.LateDrop {
		p.late = c.Late
	}
	ev, err := cel.NewEnv(
		cel.Variable("payload", cel.DynType),
		cel.Variable("partition", cel.StringType),
		cel.Variable("transactionId", cel.StringType),
		cel.Variable("createdAt", cel.TimestampType),
		cel.Variable("key", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
	)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	if p.filter, err = compile(ev, "filter", c.Filter, cel.BoolType); err != nil {
		return nil, err
	}
	if p.keyBy, err = compile(ev, "keyBy", c.KeyBy, cel.StringType); err != nil {
		return nil, err
	}
	if p.eventTime, err = compile(ev, "eventTime", c.EventTime, cel.TimestampType, cel.IntType, cel.UintType, cel.DoubleType); err != nil {
		return nil, err
	}
	if c.Window == nil {
		if p.project, err = compile(ev, "project", c.Project, cel.MapType(cel.StringType, cel.DynType)); err == nil && c.Project != "" {
			p.columns = projectColumns(ev, c.Project)
		}
		return p, err
	}
	_, _, _, lateness, idle := c.Window.Durations()
	p.lateness, p.IdleFlush = lateness.Milliseconds(), idle
	ofs := map[string]int{}
	wvars := []cel.EnvOption{
		cel.Variable("key", cel.StringType),
		cel.Variable("windowStart", cel.TimestampType),
		cel.Variable("windowEnd", cel.TimestampType),
		cel.Variable("partition", cel.StringType),
		cel.CrossTypeNumericComparisons(true),
	}
	for i, a := range c.Aggregate {
		ag := aggregate{name: a.Name, fn: a.Fn, of: -1}
		t := cel.DoubleType
		switch a.Fn {
		case v1.FnCount:
			t = cel.IntType
		case v1.FnFirst, v1.FnLast:
			t = cel.DynType
		}
		if a.Fn != v1.FnCount {
			j, seen := ofs[a.Of]
			if !seen {
				want := []*cel.Type{cel.IntType, cel.UintType, cel.DoubleType}
				if a.Fn == v1.FnFirst || a.Fn == v1.FnLast {
					want = nil
				}
				prg, err := compile(ev, fmt.Sprintf("aggregate[%d].of", i), a.Of, want...)
				if err != nil {
					return nil, err
				}
				j = len(p.ofs)
				p.ofs = append(p.ofs, prg)
				ofs[a.Of] = j
			}
			ag.of = j
		}
		p.aggs = append(p.aggs, ag)
		wvars = append(wvars, cel.Variable(a.Name, t))
	}
	wenv, err := cel.NewEnv(wvars...)
	if err != nil {
		return nil, fmt.Errorf("CEL environment: %w", err)
	}
	if p.having, err = compile(wenv, "having", c.Having, cel.BoolType); err != nil {
		return nil, err
	}
	if p.project, err = compile(wenv, "project", c.Project, cel.MapType(cel.StringType, cel.DynType)); err != nil {
		return nil, err
	}
	p.columns = windowColumns(c.Aggregate)
	if c.Project != "" {
		p.columns = projectColumns(wenv, c.Project)
	}
	return p, nil
}

// compile compiles one expression (nil program when src is empty) and
// checks that its result has one of the types want (any type when want is
// empty); dyn passes, and is checked when evaluated.
func compile(env *cel.Env, field, src string, want ...*cel.Type) (cel.Program, error) {
	if src == "" {
		return nil, nil
	}
	ast, iss := env.Compile(src)
	if iss.Err() != nil {
		return nil, fmt.Errorf("%s: %w", field, iss.Err())
	}
	if out := ast.OutputType(); len(want) > 0 && out.Kind() != types.DynKind {
		ok := false
		for _, t := range want {
			ok = ok || out.IsAssignableType(t) || (t.Kind() == types.MapKind && out.Kind() == types.MapKind)
		}
		if !ok {
			names := ""
			for i, t := range want {
				if i > 0 {
					names += " or "
				}
				names += t.String()
			}
			return nil, fmt.Errorf("%s: %q has type %s, want %s", field, src, out, names)
		}
	}
	opts := []cel.ProgramOption{cel.EvalOptions(cel.OptOptimize)}
	// Tracking the cost of every evaluation doubles its allocations; an
	// expression whose worst case is known to be under the limit (no
	// comprehension over a list of unknown size) cannot exceed it.
	if est, err := env.EstimateCost(ast, unknownSizes{}); err != nil || est.Max > CostLimit {
		opts = append(opts, cel.CostLimit(CostLimit))
	}
	prg, err := env.Program(ast, opts...)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", field, err)
	}
	return prg, nil
}

// unknownSizes knows nothing of payloads: any list or string in one may be
// of any size, so the estimate of an expression that iterates over one is
// unbounded and its evaluations are metered.
type unknownSizes struct{}

func (unknownSizes) EstimateSize(checker.AstNode) *checker.SizeEstimate { return nil }
func (unknownSizes) EstimateCallCost(string, string, *checker.AstNode, []checker.AstNode) *checker.CallEstimate {
	return nil
}

// checkShape holds the rules the CRD's schema also states, for pipelines
// that come from a file, and compiles the window (nil for none).
func checkShape(p *v1.Pipeline) (windowKind, error) {
	if p.Late != "" && p.Late != v1.LateDrop && !queuePattern.MatchString(p.Late) {
		return nil, fmt.Errorf("late: %q is neither drop nor a queue name", p.Late)
	}
	w := p.Window
	if w == nil {
		switch {
		case len(p.Aggregate) > 0:
			return nil, errors.New("aggregate needs a window")
		case p.Having != "":
			return nil, errors.New("having needs a window")
		}
		return nil, nil
	}
	if len(p.Aggregate) == 0 {
		return nil, errors.New("a window needs at least one aggregate")
	}
	window, err := compileWindow(w)
	if err != nil {
		return nil, err
	}
	_, _, _, lateness, idle := w.Durations()
	if lateness < 0 || idle <= 0 {
		return nil, errors.New("window: allowedLateness must not be negative, and idleFlush must be positive")
	}
	names := map[string]bool{}
	for i, a := range p.Aggregate {
		switch {
		case !namePattern.MatchString(a.Name):
			return nil, fmt.Errorf("aggregate[%d]: name %q is not an identifier", i, a.Name)
		case reserved[a.Name]:
			return nil, fmt.Errorf("aggregate[%d]: name %q is reserved", i, a.Name)
		case names[a.Name]:
			return nil, fmt.Errorf("aggregate[%d]: name %q appears twice", i, a.Name)
		}
		names[a.Name] = true
		switch a.Fn {
		case v1.FnCount:
			if a.Of != "" {
				return nil, fmt.Errorf("aggregate[%d] (%s): count takes no of", i, a.Name)
			}
		case v1.FnSum, v1.FnMin, v1.FnMax, v1.FnAvg, v1.FnFirst, v1.FnLast:
			if a.Of == "" {
				return nil, fmt.Errorf("aggregate[%d] (%s): %s needs of", i, a.Name, a.Fn)
			}
		default:
			return nil, fmt.Errorf("aggregate[%d] (%s): fn %q is not count, sum, min, max, avg, first or last", i, a.Name, a.Fn)
		}
	}
	return window, nil
}

// Lateness is the window's allowed lateness.
func (p *Program) Lateness() time.Duration { return time.Duration(p.lateness) * time.Millisecond }
