// Package sqlquery compiles a streaming query written in SQL into the
// pipeline a StreamQuery runs (api/v1alpha1.Pipeline), so that a query in
// SQL and one written as a pipeline share one config hash, one worker, and
// the same savepoints and upgrades. The SQL is parsed by PostgreSQL's own
// grammar (libpg_query, compiled to WebAssembly and run by wazero, so the
// binaries stay pure Go and static); this package only walks the tree,
// keeps what the subset has, and refuses the rest naming the clause.
//
//	SELECT payload->>'region' AS region, count(*) AS orders, window_start
//	FROM orders
//	WHERE payload->>'status' = 'paid'
//	GROUP BY payload->>'region', TUMBLE((payload->>'ts')::timestamptz, INTERVAL '1 minute')
//	HAVING count(*) > 2
package sqlquery

import (
	"errors"
	"fmt"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"

	pg "github.com/pganalyze/pg_query_go/v6"
	pgquery "github.com/wasilibs/go-pgquery"

	v1 "github.com/regent-mq/regent/api/v1alpha1"
	"github.com/regent-mq/regent/pipeline"
)

// MaxLength is the longest query accepted, as the CRD's spec.sql states.
const MaxLength = 16384

// Query is a compiled SQL query.
type Query struct {
	// Source is the queue the query reads, its FROM.
	Source   string
	Pipeline v1.Pipeline
	Program  *pipeline.Program
}

// Compile parses sql, translates it into a pipeline and compiles that. An
// error names the clause at fault and says what the subset supports.
func Compile(sql string) (*Query, error) {
	if len(sql) > MaxLength {
		return nil, fmt.Errorf("the query is %d bytes long; at most %d are accepted", len(sql), MaxLength)
	}
	tree, err := parse(sql)
	if err != nil {
		return nil, fmt.Errorf("SQL: %w", err)
	}
	if len(tree.Stmts) != 1 {
		return nil, fmt.Errorf("SQL: %d statements; write exactly one SELECT", len(tree.Stmts))
	}
	sel := tree.Stmts[0].Stmt.GetSelectStmt()
	if sel == nil {
		return nil, errors.New("SQL: only a SELECT is supported")
	}
	c := &compiler{aggIndex: map[string]int{}, names: map[string]bool{}}
	if err := c.query(sel); err != nil {
		return nil, err
	}
	prog, err := pipeline.Compile(c.p)
	if err != nil {
		return nil, c.typeError(err)
	}
	return &Query{Source: c.from, Pipeline: c.p, Program: prog}, nil
}

// parseMu serialises the parser. go-pgquery keeps a pool of WebAssembly
// instances and compiles the module afresh for each new one: about 2 s of
// CPU and 230 MB of transient heap (measured). One at a time, there is only
// ever one; a parse takes under 1 ms.
var parseMu sync.Mutex

func parse(sql string) (*pg.ParseResult, error) {
	parseMu.Lock()
	defer parseMu.Unlock()
	return pgquery.Parse(sql)
}

// Load reads and compiles the SQL query in file.
func Load(file string) (*Query, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("read query: %w", err)
	}
	q, err := Compile(string(b))
	if err != nil {
		return nil, fmt.Errorf("%s: %w", file, err)
	}
	return q, nil
}

type compiler struct {
	p           v1.Pipeline
	from, alias string
	clause      string // the clause being translated, for errors

	keys     []string       // CEL of each GROUP BY key, per event
	aggIndex map[string]int // fn and CEL of an aggregate -> index in p.Aggregate
	aggOf    []string       // the SQL clause of each aggregate, for type errors
	names    map[string]bool
	// windowClause names the window function, for its errors.
	windowClause string
}

func (c *compiler) errorf(format string, args ...any) error {
	return fmt.Errorf(c.clause+": "+format, args...)
}

// query translates a SELECT, clause by clause.
func (c *compiler) query(s *pg.SelectStmt) error {
	c.clause = "SQL"
	switch {
	case s.Op != pg.SetOperation_SETOP_NONE:
		return c.errorf("UNION, INTERSECT and EXCEPT are not supported: write one SELECT")
	case len(s.ValuesLists) > 0:
		return c.errorf("VALUES is not supported: write a SELECT … FROM a queue")
	case s.WithClause != nil:
		return c.errorf("WITH is not supported: write one SELECT")
	case s.IntoClause != nil:
		return c.errorf("SELECT INTO is not supported: the output goes to the StreamQuery's sinkQueue")
	case len(s.SortClause) > 0:
		return errors.New("ORDER BY: not supported: a stream emits each window as it closes")
	case s.LimitCount != nil || s.LimitOffset != nil:
		return errors.New("LIMIT/OFFSET: not supported: a stream has no end to count to")
	case len(s.LockingClause) > 0:
		return c.errorf("FOR UPDATE/SHARE is not supported")
	case len(s.WindowClause) > 0:
		return errors.New("WINDOW: window functions (OVER) are not supported: group by TUMBLE, HOP or SESSION")
	case len(s.DistinctClause) > 0:
		return errors.New("SELECT DISTINCT: not supported: group by the columns instead")
	}
	if err := c.fromClause(s.FromClause); err != nil {
		return err
	}
	if s.WhereClause != nil {
		c.clause = "WHERE"
		f, err := c.expr(s.WhereClause, perEvent)
		if err != nil {
			return err
		}
		c.p.Filter = f.cel
	}
	if len(s.GroupClause) == 0 {
		return c.stateless(s)
	}
	return c.windowed(s)
}

func (c *compiler) fromClause(from []*pg.Node) error {
	c.clause = "FROM"
	if len(from) != 1 {
		return c.errorf("%d sources; name exactly one queue (joins are not supported)", len(from))
	}
	rv := from[0].GetRangeVar()
	switch {
	case from[0].GetJoinExpr() != nil:
		return c.errorf("JOIN is not supported: name one queue")
	case from[0].GetRangeSubselect() != nil:
		return c.errorf("subqueries are not supported: name one queue")
	case rv == nil:
		return c.errorf("name one queue (functions and subqueries are not supported)")
	case rv.Catalogname != "" || rv.Schemaname != "":
		return c.errorf("%q is a qualified name; a queue name with dots is quoted: FROM %q", rv.Schemaname+"."+rv.Relname, rv.Schemaname+"."+rv.Relname)
	case !rv.Inh:
		return c.errorf("ONLY is not supported")
	case !queuePattern.MatchString(rv.Relname):
		return c.errorf("%q is not a queue name (letters, digits, _ . -, at most 255)", rv.Relname)
	}
	c.from = rv.Relname
	if rv.Alias != nil {
		if len(rv.Alias.Colnames) > 0 {
			return c.errorf("column aliases on the queue are not supported")
		}
		c.alias = rv.Alias.Aliasname
	}
	return nil
}

var queuePattern = regexp.MustCompile(`^[A-Za-z0-9_.-]{1,255}$`)

// stateless translates a query without GROUP BY: each event that passes
// the WHERE is emitted, projected by the SELECT list.
func (c *compiler) stateless(s *pg.SelectStmt) error {
	if s.HavingClause != nil {
		return errors.New("HAVING: needs GROUP BY with a window (TUMBLE, HOP or SESSION)")
	}
	c.clause = "SELECT"
	if len(s.TargetList) == 1 && isStar(s.TargetList[0]) {
		return nil // the event's payload as it is
	}
	return c.project(s.TargetList, perEvent, "* is only supported alone (SELECT * emits each event's payload)")
}

// project translates the SELECT list into the pipeline's project: a map
// from each column's name to its value.
func (c *compiler) project(targets []*pg.Node, sc scope, star string) error {
	var fields []string
	seen := map[string]bool{}
	for _, t := range targets {
		if isStar(t) {
			return c.errorf("%s", star)
		}
		rt := t.GetResTarget()
		name, err := c.outputName(rt)
		if err != nil {
			return err
		}
		if seen[name] {
			return c.errorf("two columns are named %q: name them apart with AS", name)
		}
		seen[name] = true
		e, err := c.expr(rt.Val, sc)
		if err != nil {
			return err
		}
		fields = append(fields, strconv.Quote(name)+": "+e.cel)
	}
	c.p.Project = "{" + strings.Join(fields, ", ") + "}"
	return nil
}

func isStar(n *pg.Node) bool {
	cr := n.GetResTarget().GetVal().GetColumnRef()
	return cr != nil && len(cr.Fields) > 0 && cr.Fields[len(cr.Fields)-1].GetAStar() != nil
}

// windowed translates a query with GROUP BY: keys and one window function
// in GROUP BY, aggregates in SELECT and HAVING.
func (c *compiler) windowed(s *pg.SelectStmt) error {
	c.clause = "GROUP BY"
	var keys []string
	for _, g := range s.GroupClause {
		if fc := g.GetFuncCall(); fc != nil && windowFns[funcName(fc)] {
			if c.p.Window != nil {
				return c.errorf("two window functions; group by exactly one of TUMBLE, HOP and SESSION")
			}
			if err := c.window(fc); err != nil {
				return err
			}
			continue
		}
		if g.GetGroupingSet() != nil {
			return c.errorf("GROUPING SETS, ROLLUP and CUBE are not supported")
		}
		if g.GetAConst() != nil {
			return c.errorf("GROUP BY a constant or a column's position is not supported: write the key's expression")
		}
		k, err := c.expr(g, perEvent)
		if err != nil {
			return err
		}
		c.keys = append(c.keys, k.cel)
		if k.t != tString {
			k.cel = "string(" + k.cel + ")"
		}
		keys = append(keys, k.cel)
	}
	if c.p.Window == nil {
		return c.errorf("needs a window: TUMBLE(time, size), HOP(time, slide, size) or SESSION(time, gap); Regent aggregates over windows of event time")
	}
	c.p.KeyBy = keyBy(keys)
	// Named aggregates first, so that a HAVING or a larger expression that
	// repeats one reuses its name.
	c.clause = "SELECT"
	for _, t := range s.TargetList {
		rt := t.GetResTarget()
		if fc := rt.GetVal().GetFuncCall(); fc != nil && aggregateFns[funcName(fc)] != "" && rt.Name != "" {
			if _, err := c.aggregate(fc, rt.Name); err != nil {
				return err
			}
		}
	}
	if err := c.project(s.TargetList, perWindow, "* is not supported with GROUP BY: list the keys, aggregates and window_start/window_end"); err != nil {
		return err
	}
	if s.HavingClause != nil {
		c.clause = "HAVING"
		h, err := c.expr(s.HavingClause, perWindow)
		if err != nil {
			return err
		}
		c.p.Having = h.cel
	}
	if len(c.p.Aggregate) == 0 {
		// A window needs an aggregate; SQL does not: a query that only
		// lists its groups counts them without showing the count.
		c.clause = "SELECT"
		if _, err := c.addAggregate(v1.FnCount, "", ""); err != nil {
			return err
		}
	}
	return nil
}

// keyBy is the CEL of the group's key: the one GROUP BY key, or several
// joined, each after its length, so that no two groups share a key.
func keyBy(keys []string) string {
	if len(keys) < 2 {
		return strings.Join(keys, "")
	}
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = `string(size(` + k + `)) + ":" + ` + k
	}
	return strings.Join(parts, ` + "," + `)
}

// typeError maps the pipeline compiler's field names back to the clauses
// they came from.
func (c *compiler) typeError(err error) error {
	msg := err.Error()
	field, rest, _ := strings.Cut(msg, ": ")
	clause := map[string]string{"filter": "WHERE", "keyBy": "GROUP BY", "eventTime": "GROUP BY (the window's time)",
		"having": "HAVING", "project": "SELECT"}[field]
	if field == "window" || field == "late" {
		return fmt.Errorf("%s: %w", c.windowClause, err)
	}
	if strings.HasPrefix(field, "aggregate[") {
		if i, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(field, "aggregate["), "].of")); err == nil && i < len(c.aggOf) {
			clause = c.aggOf[i]
		}
	}
	if clause == "" {
		return fmt.Errorf("the compiled pipeline: %w", err)
	}
	return fmt.Errorf("%s: %s", clause, rest)
}
