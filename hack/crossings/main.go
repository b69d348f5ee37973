// crossings walks, depth first and in source order, the calls a request
// makes from one entry function through the packages of a module, and
// counts the package crossings.
//
// Method: the call graph is golang.org/x/tools' VTA over the whole program
// (so closures, func values and interface calls are followed to their
// targets). From the entry, every call site of a function is visited in
// source order; a callee in the module is expanded the first time the walk
// reaches it (later calls to it count as a crossing but are not expanded
// again). Calls to the standard library and other modules are not followed.
// A closure belongs to the package that declares it; a call through a func
// value is followed only to functions the walk's own code made into values,
// and interface calls to Error, String and Unwrap are skipped. Each call
// from a function of package A to one of package B != A is a crossing, and
// the last line counts:
//   - packages: the packages of the module the walk enters;
//   - into a package entered before: crossings into one already entered;
//   - calls up the import graph: into a package that (transitively)
//     imports the caller's;
//   - re-entries: into a package still on the call stack below the caller,
//     the "returns to a package it had already left" of issue 42.
//
// hack/crossings/run.sh runs it for the four write paths (the cycle, the
// push, the transaction and the spool's drain).
//
// Usage: go run . -dir /path/to/regent -entry 'github.com/regent-mq/regent/broker/api/streams.(*Service).cycle'
package main

import (
	"flag"
	"fmt"
	"go/types"
	"log"
	"os"
	"sort"
	"strings"

	"golang.org/x/tools/go/callgraph"
	"golang.org/x/tools/go/callgraph/cha"
	"golang.org/x/tools/go/callgraph/vta"
	"golang.org/x/tools/go/packages"
	"golang.org/x/tools/go/ssa"
	"golang.org/x/tools/go/ssa/ssautil"
)

const module = "github.com/regent-mq/regent/"

// layer ranks the broker's packages, outside in, as broker/pg/db/seam_test.go
// sorts them; the packages it does not list (commit, metrics, tracing,
// config) are domain.
func layer(pkg string) int {
	p := strings.TrimPrefix(pkg, module)
	switch {
	case p == "broker/pg/db" || p == "broker/pg/migrate":
		return 2
	case p == "broker/app" || p == "broker/api/server" || p == "broker/api/httpx" || p == "broker/api/auth" ||
		p == "broker/api/queue" || p == "broker/api/streams" || p == "broker/api/admin" || p == "broker/api/console":
		return 0
	}
	return 1
}

func main() {
	dir := flag.String("dir", ".", "the module's directory")
	entry := flag.String("entry", "", "the entry function, as ssa prints it")
	verbose := flag.Bool("v", false, "print every crossing")
	flag.Parse()
	cfg := &packages.Config{Mode: packages.LoadAllSyntax, Dir: *dir}
	pkgs, err := packages.Load(cfg, "./broker/...", "./cmd/broker")
	if err != nil {
		log.Fatal(err)
	}
	prog, _ := ssautil.AllPackages(pkgs, ssa.InstantiateGenerics)
	prog.Build()
	all := ssautil.AllFunctions(prog)
	cg := vta.CallGraph(all, cha.CallGraph(prog))
	for _, name := range strings.Split(*entry, ";") {
		var start *ssa.Function
		for f := range all {
			if f.String() == name {
				start = f
			}
		}
		if start == nil {
			log.Fatalf("no function %s", name)
		}
		count(prog, cg, start, *verbose)
	}
}

func count(prog *ssa.Program, cg *callgraph.Graph, start *ssa.Function, verbose bool) {
	pkgOf := func(f *ssa.Function) string {
		for f.Parent() != nil {
			f = f.Parent()
		}
		if f.Origin() != nil {
			f = f.Origin()
		}
		if f.Pkg == nil {
			return ""
		}
		return f.Pkg.Pkg.Path()
	}
	// imports[p][q]: package p imports q, transitively.
	imports := map[string]map[string]bool{}
	var closure func(p *types.Package, into map[string]bool)
	closure = func(p *types.Package, into map[string]bool) {
		for _, q := range p.Imports() {
			if !into[q.Path()] {
				into[q.Path()] = true
				closure(q, into)
			}
		}
	}
	for _, p := range prog.AllPackages() {
		m := map[string]bool{}
		closure(p.Pkg, m)
		imports[p.Pkg.Path()] = m
	}
	seen := map[*ssa.Function]bool{}
	// created are the functions the walk's code made into values
	// (closures, method values, function values): only those can be the
	// target of a call of a func value.
	created := map[*ssa.Function]bool{}
	entered := map[string]bool{}
	var stack []string
	var packagesN, climbs, reentries, returns, crossings int
	var walk func(f *ssa.Function)
	walk = func(f *ssa.Function) {
		seen[f] = true
		for _, b := range f.Blocks {
			for _, in := range b.Instrs {
				for _, op := range in.Operands(nil) {
					if g, ok := (*op).(*ssa.Function); ok {
						if c, isCall := in.(ssa.CallInstruction); !isCall || c.Common().Value != g {
							created[g] = true
						}
					}
				}
				if mc, ok := in.(*ssa.MakeClosure); ok {
					created[mc.Fn.(*ssa.Function)] = true
				}
			}
		}
		node := cg.Nodes[f]
		if node == nil {
			return
		}
		edges := append([]*callgraph.Edge(nil), node.Out...)
		sort.SliceStable(edges, func(i, j int) bool { return edges[i].Pos() < edges[j].Pos() })
		from := pkgOf(f)
		for _, e := range edges {
			g := e.Callee.Func
			to := pkgOf(g)
			if !strings.HasPrefix(to, module) {
				continue
			}
			c := e.Site.Common()
			switch {
			case c.IsInvoke():
				if n := c.Method.Name(); n == "Error" || n == "String" || n == "Unwrap" {
					continue // what an error or a value prints is no step of the request
				}
			case c.StaticCallee() == nil && !created[g]:
				continue // a func value the walk never made
			}
			if to != from {
				crossings++
				kind := ""
				if !entered[to] {
					entered[to] = true
					packagesN++
				} else {
					returns++
					kind += " again"
				}
				if imports[to][from] {
					climbs++
					kind += " CLIMB"
				}
				for _, s := range stack[:len(stack)-1] {
					if s == to {
						reentries++
						kind += " REENTRY"
						break
					}
				}
				if verbose {
					fmt.Printf("%s%s -> %s%s  (%s)\n", strings.Repeat(" ", len(stack)), strings.TrimPrefix(from, module), strings.TrimPrefix(g.String(), module), kind, prog.Fset.Position(e.Pos()))
				}
			}
			if !seen[g] {
				stack = append(stack, to)
				walk(g)
				stack = stack[:len(stack)-1]
			}
		}
	}
	entered[pkgOf(start)] = true
	packagesN = 1
	stack = []string{pkgOf(start)}
	walk(start)
	fmt.Fprintf(os.Stdout, "%v: packages %d, crossings %d (into a package entered before: %d), calls up the import graph %d, re-entries into a package on the call stack %d\n", start, packagesN, crossings, returns, climbs, reentries)
}
