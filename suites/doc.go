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
// sorted by name (of the suite's params, only those the case reads), which is the identity used to match a case across runs
// (results store, resume, comparisons), and a short display Name built from
// the group and its matrix parameters only.
//
// Conventions beyond the bare format:
//   - kind: may be left out: a case with op: (or op in its params or
//     matrix) is a kernel case, any other a model case.
//   - Suite params may hold either kind's parameters; each case takes only
//     those its kind knows, so one file can set prompt_len and head_size.
//   - op may also be given in a kernel case's params or matrix (to sweep
//     ops); Case.Op and Params["op"] then agree, and op is part of the Key.
//   - Every case is also decoded into typed parameters, defaults applied
//     (requests = batch, fusion on): Case.Model for model cases, Case.Kernel
//     (kernels/ops.Args, the op's declared parameters) for kernel cases.
//     Runners read those; Params keeps the values as written, for keys,
//     positions and the results store. Suite.Override applies `--set`
//     values by the same rules.
//   - Anchors, aliases and merge keys (<<) work; top-level keys starting with
//     "x-" are ignored so shared anchors have somewhere to live.
//   - YAML syntax errors carry yaml.v3's line but column 1, since yaml.v3
//     does not report the column.
//
// Checks that need outside knowledge (model shapes, KV capacity, what a
// backend supports) belong to the runner; Suite.ErrorAt lets it report them
// in the same file:line:col form, using Case.PosOf, Case.Pos, Model.Pos or
// Suite.Positions.
package suites
