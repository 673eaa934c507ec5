package compare

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"

	"github.com/mtlbench/mtlbench/results"
	"github.com/mtlbench/mtlbench/suites"
)

// Run is what a comparison needs to know about one run of a side.
type Run struct {
	ID         int64
	Tag        string
	Commit     string
	Backend    string
	TimingMode string // "" counts as throughput
	Emulated   bool
	Machine    string // CPU or GPU name, for the "different machines" note
	SuitePath  string
	SuiteHash  string // the suite file's sha256: what the path held then
	// Status is the run's (results.RunComplete...); a side says which of
	// its runs did not complete, whose cases hold only what they stored.
	Status string
	// Overrides are what `run --set` changed in every case: a case keeps
	// its key, so it pairs with one of another run that ran the default.
	Overrides map[string]string
	// BackendNotes are the backend's notes the run was made with
	// (results.Run.BackendNotes): its switches, such as graphs or fast
	// math off; "" for runs stored before they were recorded.
	BackendNotes string
	// Threads is the --threads count the run was made with
	// (results.Run.Threads: "default" or a count); "" for runs stored
	// before it was recorded.
	Threads string
}

// RunOf converts a stored run.
func RunOf(r *results.Run) Run {
	machine := r.Machine.CPUModel
	if r.Machine.GPUName != "" {
		machine = r.Machine.GPUName
	}
	return Run{ID: r.ID, Tag: r.Tag, Commit: r.GitCommit, Backend: r.Backend, TimingMode: r.TimingMode,
		Emulated: r.Emulated, Machine: machine, SuitePath: r.SuitePath, SuiteHash: r.SuiteHash, Status: r.Status,
		Overrides: maps.Clone(r.Overrides), BackendNotes: r.BackendNotes, Threads: r.Threads}
}

func (r Run) timing() string {
	if r.TimingMode == "" {
		return results.TimingThroughput
	}
	return r.TimingMode
}

// Case is one case key of a side, its samples pooled over the side's runs.
type Case struct {
	Key, Name, Kind string
	// Params are the parameters recorded with the first run's case; they
	// may hold more than the key (the runner adds model and dtype).
	Params map[string]string
	// Identity lists the distinct values of each of IdentityParams the
	// pooled runs recorded for this key: more than one means the side
	// mixes figures of different models, weight formats or seeds.
	Identity map[string][]string
	// Layers lists the distinct "run/total" layer counts seen for this key
	// ("" for a case that is not layer-limited); more than one means the
	// side pools truncated and whole-model figures, which is not comparable.
	Layers []string
	// Samples holds every value per metric, pooled over runs.
	Samples map[string][]float64
	// ByRun holds the same values per metric and run, runs in the order
	// they were added: the gate's unit is the run when a side has several.
	ByRun map[string][]RunValues
	Units map[string]string
	// LeftOut counts per metric the samples no statistic takes
	// (results.CheckValue), which only a store written before the checks
	// on storing can hold: they are in neither Samples nor ByRun.
	LeftOut map[string]int
	// Errors are the messages of runs in which this case failed or was
	// skipped, so that a gate can say why a side has no data.
	Errors []string
	// Failures are the messages of Errors from runs in which the case
	// failed (not skipped): a candidate's failure is the gate's to fail.
	Failures []string
}

// RunValues are one run's values of one metric of one case.
type RunValues struct {
	Run    int64
	Values []float64
}

func (c *Case) addRunValue(metric string, run int64, v float64) {
	rs := c.ByRun[metric]
	if n := len(rs); n > 0 && rs[n-1].Run == run {
		rs[n-1].Values = append(rs[n-1].Values, v)
	} else {
		rs = append(rs, RunValues{Run: run, Values: []float64{v}})
	}
	c.ByRun[metric] = rs
}

// IdentityParams are the recorded parameters that say what was measured
// rather than how: the model, its weight format and the seed of its weights
// and prompts. Case keys leave them out (the runner adds them), so runs of
// different models can share a key.
var IdentityParams = []string{"model", "dtype", "seed"}

func (c *Case) addIdentity(params map[string]string) {
	for _, k := range IdentityParams {
		v, ok := params[k]
		if !ok {
			continue
		}
		if c.Identity == nil {
			c.Identity = map[string][]string{}
		}
		if !slices.ContainsFunc(c.Identity[k], func(s string) bool { return strings.EqualFold(s, v) }) {
			c.Identity[k] = append(c.Identity[k], v)
		}
	}
}

// DisplayName is the case's name, or its key when it has none.
func (c *Case) DisplayName() string {
	if c.Name != "" {
		return c.Name
	}
	return c.Key
}

func layersOf(c results.Case) string {
	// Every layer run is the whole model, whether the run counted them or
	// (a peer engine's) did not say.
	if c.LayersRun == 0 && c.LayersTotal == 0 || c.LayersRun == c.LayersTotal {
		return ""
	}
	return fmt.Sprintf("%d/%d", c.LayersRun, c.LayersTotal)
}

// Side is one side of a comparison (the baseline or the candidate): one or
// more runs whose samples are pooled per case key.
type Side struct {
	Label string // what the user called it: "A", "main", a commit
	Runs  []Run
	cases map[string]*Case
	order []string
}

// NewSide returns an empty side.
func NewSide(label string) *Side {
	return &Side{Label: label, cases: map[string]*Case{}}
}

// AddRun records a run of this side (for the comparability checks).
func (s *Side) AddRun(r Run) { s.Runs = append(s.Runs, r) }

// Add pools one stored case and its samples into the side. Cases that have
// not finished contribute their error message and no samples.
func (s *Side) Add(c results.Case, samples []results.Sample) {
	key := c.Key
	if key == "" {
		key = results.CanonicalKey(c.Params)
	}
	sc := s.cases[key]
	if sc == nil {
		sc = &Case{Key: key, Name: c.Name, Kind: c.Kind, Samples: map[string][]float64{}, ByRun: map[string][]RunValues{}, Units: map[string]string{}}
		s.cases[key] = sc
		s.order = append(s.order, key)
	}
	if sc.Name == "" {
		sc.Name = c.Name
	}
	if sc.Params == nil && len(c.Params) > 0 {
		sc.Params = maps.Clone(c.Params)
	}
	if c.Status != results.CasePending {
		sc.addIdentity(c.Params)
	}
	switch c.Status {
	case results.CaseFailed, results.CaseSkipped:
		msg := c.Status
		if c.Error != "" {
			msg += ": " + c.Error
		}
		if c.RunID != 0 {
			msg = fmt.Sprintf("run %d: %s", c.RunID, msg)
		}
		sc.Errors = append(sc.Errors, msg)
		if c.Status == results.CaseFailed {
			sc.Failures = append(sc.Failures, msg)
		}
	case results.CasePending:
		// Never run (an interrupted run): no layer counts to record either.
	default:
		if l := layersOf(c); !slices.Contains(sc.Layers, l) {
			sc.Layers = append(sc.Layers, l)
		}
	}
	for _, smp := range samples {
		if results.CheckValue(smp.Metric, smp.Unit, smp.Value) != nil {
			if sc.LeftOut == nil {
				sc.LeftOut = map[string]int{}
			}
			sc.LeftOut[smp.Metric]++
			continue
		}
		sc.Samples[smp.Metric] = append(sc.Samples[smp.Metric], smp.Value)
		sc.addRunValue(smp.Metric, c.RunID, smp.Value)
		if sc.Units[smp.Metric] == "" {
			sc.Units[smp.Metric] = smp.Unit
		}
	}
}

// overridden is the parameters a run of the side set with `run --set`.
func (s *Side) overridden() map[string]bool {
	set := map[string]bool{}
	for _, r := range s.Runs {
		for k := range r.Overrides {
			set[k] = true
		}
	}
	return set
}

// Case returns the pooled case with this key, or nil.
func (s *Side) Case(key string) *Case { return s.cases[key] }

// Keys lists the side's case keys in the order they were first added (the
// suite's order for runs of one suite).
func (s *Side) Keys() []string { return slices.Clone(s.order) }

// Describe is a one-line account of the side: its label and runs.
func (s *Side) Describe() string {
	ids := make([]string, len(s.Runs))
	for i, r := range s.Runs {
		ids[i] = strconv.FormatInt(r.ID, 10)
	}
	word := "runs"
	if len(ids) == 1 {
		word = "run"
	}
	d := fmt.Sprintf("%s (%s %s", s.Label, word, strings.Join(ids, ","))
	// A pool says every backend and commit its runs have, not the first
	// run's as if all shared it.
	var backends, commits, emulated []string
	for i, r := range s.Runs {
		if r.Backend != "" && !slices.Contains(backends, r.Backend) {
			backends = append(backends, r.Backend)
		}
		if c := r.Commit[:min(len(r.Commit), 10)]; c != "" && !slices.Contains(commits, c) {
			commits = append(commits, c)
		}
		if r.Emulated {
			emulated = append(emulated, ids[i])
		}
	}
	switch {
	case len(backends) == 1:
		d += ", " + backends[0]
	case len(backends) > 1:
		d += ", backends " + strings.Join(backends, ", ")
	}
	switch {
	case len(emulated) == len(s.Runs) && len(emulated) > 0:
		d += ", emulated"
	case len(emulated) == 1:
		d += ", run " + emulated[0] + " emulated"
	case len(emulated) > 1:
		d += ", runs " + strings.Join(emulated, ",") + " emulated"
	}
	switch {
	case len(commits) == 1:
		d += ", commit " + commits[0]
	case len(commits) > 1:
		d += ", commits " + strings.Join(commits, ", ")
	}
	// What such a run stored is compared as it stands (show marks its
	// cases unfinished): say so.
	for _, r := range s.Runs {
		if r.Status != "" && r.Status != results.RunComplete {
			d += fmt.Sprintf("; run %d %s", r.ID, r.Status)
		}
	}
	return d + ")"
}

// Load builds a side from the results store. refs is comma-separated; each
// element is resolved with ResolveRef (run id, tag, "latest" or commit
// prefix) and may name several runs, all pooled unless latest > 0 keeps
// only that many of each element's newest runs. The error wraps
// results.ErrNotFound when a reference matches no run.
func Load(db *results.DB, label, refs string, latest int) (*Side, error) {
	side := NewSide(label)
	seen := map[int64]bool{}
	list, err := results.SplitRefs(refs)
	if err != nil {
		return nil, err
	}
	for _, ref := range list {
		ids, err := db.ResolveRef(ref)
		if err != nil {
			return nil, err
		}
		if latest > 0 && len(ids) > latest {
			ids = ids[:latest] // ResolveRef lists newest first
		}
		for _, id := range ids {
			if seen[id] {
				continue
			}
			seen[id] = true
			if err := loadRun(db, side, id); err != nil {
				return nil, err
			}
		}
	}
	return side, nil
}

func loadRun(db *results.DB, side *Side, id int64) error {
	r, err := db.GetRun(id)
	if err != nil {
		return err
	}
	side.AddRun(RunOf(r))
	cases, err := db.Cases(id)
	if err != nil {
		return err
	}
	samples, err := db.RunSamples(id)
	if err != nil {
		return err
	}
	// Keyed as cases are keyed now: a run stored before a keying rule
	// changed pairs with new runs of its cases. A top_k is read against the
	// vocabulary the run recorded; one that recorded none keeps it.
	results.KeyReader(suites.RunKeys).Rekey(cases)
	for _, c := range cases {
		side.Add(c, samples[c.ID])
	}
	return nil
}

// Shared lists the runs both sides hold, by id: a gate of a run against
// itself passes whatever the run measured.
func Shared(a, b *Side) []int64 {
	in := map[int64]bool{}
	for _, r := range a.Runs {
		in[r.ID] = true
	}
	var ids []int64
	for _, r := range b.Runs {
		if in[r.ID] {
			ids = append(ids, r.ID)
			in[r.ID] = false
		}
	}
	return ids
}
