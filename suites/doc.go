// Package suites parses mtlbench benchmark suites: YAML files that name a
// model, a backend, timing settings and a list of case groups, each of which
// may carry a parameter matrix that expands into many cases.
//
// Parse decodes the YAML into a yaml.Node tree first (never straight into Go
// structs) so every value keeps its line and column; all problems found are
// reported together, one per line, as
//
//	suites/x.yaml:12:5: unknown key "bach" in matrix (did you mean "batch"?)
//
// The result is a validated Suite whose Cases are already expanded: suite
// params, then case params, then one matrix point are merged (later wins),
// in file order, with each matrix walked row-major in the order its keys are
// written (the first key varies slowest).
//
// Each Case has a Key, "kind/group/a=1/b=2" over all merged parameters
// sorted by name, which is the identity used to match a case across runs
// (results store, resume, comparisons), and a short display Name built from
// the group and its matrix parameters only.
//
// Checks that need outside knowledge (model shapes, KV capacity, what a
// backend supports) belong to the runner; Suite.ErrorAt lets it report them
// in the same file:line:col form, using Value.Pos, Case.Pos, Model.Pos or
// Suite.Positions.
package suites
