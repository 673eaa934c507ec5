// Package tune holds what kernel tuning shares between the tuner, the
// engine and the CLI: the registry of the tuning spaces the ops declare
// (kernels/ops), the tuned-config file format, and the lookup the engine
// does at run time.
//
// # Declaring a space
//
// A space (ops.Space, here Kernel) sits in its op's declaration, under
// Op.Tuning[backend] (kernels/ops/tuning.go). It lists its shape dimensions (Exact ones such as experts or hidden
// size must match a tuned bucket; Log ones such as the token count match the
// nearest bucket), its tunable Params with their legal values for a shape on
// a device (Limits: CPU threads; a GPU's max threads per threadgroup and
// threadgroup memory), Constraints that prune configs before anything runs,
// a Canonical form that folds configs running the same code into one (a
// chunk size means nothing unless the MoE strategy is chunked), and its
// Default. Candidates enumerates the survivors and reports every pruned config
// with its reason. The CPU declares moe (strategy loop|chunked|grouped,
// chunk 1..256) and matmul (work split: piece even|16..512 rows, threads
// 1..GOMAXPROCS); a GPU backend declares threadgroup and tile sizes with
// their memory constraints the same way.
//
// # Tuned configs
//
// A tuned-config file (JSON, FormatVersion) holds Entries keyed by device
// name, backend, kernel, dtype and shape bucket, each stamped with the tool
// version and the kernel source hash it was measured on. Store.Lookup
// consults, in order, the override folder Default is given (the command's
// $MTLBENCH_TUNED), the user's cache
// (os.UserCacheDir()/mtlbench/tuned, where `mtlbench tune` writes), then
// the files shipped in runner/tune/shipped (embedded), then the kernel's
// default; the nearest bucket wins, the layer order breaks ties, and a
// stale entry (another source hash) is ignored with a warning.
//
// Store.ForEngine is the lookup an engine's steps make (runner/engine's
// Options.Tuned). The tuner itself, which times candidates and writes
// entries, is package runner/tune/tuner.
package tune
