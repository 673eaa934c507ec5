// Package layers holds the test that keeps the module's imports running
// down its layers:
//
//	cmd → runner, reports → bridge → kernels
//
// with suites and results below runner (runner may import both, reports
// may import results). bridge and kernels know nothing of suites, results,
// runners, reports or commands; results knows nothing of runners or
// reports; runner knows nothing of reports or commands; nothing imports
// cmd; and runner's subtrees (runner/engine, runner/tune, ...) import each
// other without cycles.
package layers
