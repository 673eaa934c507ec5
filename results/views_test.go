package results

import "testing"

// case_medians gives the median benchmath gives (the mean of the middle two
// of an even count) with the parameters most queries filter on as columns.
func TestCaseMediansView(t *testing.T) {
	db := openTemp(t)
	id := mustRun(t, db, Run{SuiteName: "s", Tag: "pr"})
	cases := []Case{
		{Name: "decode/batch=4", Kind: CaseModel, Params: map[string]string{"batch": "4", "model": "qwen3-moe-mini", "prompt_len": "48"}},
		{Name: "decode/batch=1", Kind: CaseModel, Params: map[string]string{"batch": "1", "model": "qwen3-moe-mini"}},
	}
	if err := db.AddCases(id, cases); err != nil {
		t.Fatal(err)
	}
	for i, vals := range [][]float64{{3, 1, 10, 2}, {5, 7, 6}} {
		var ss []Sample
		for r, v := range vals {
			ss = append(ss, Sample{Rep: r, Metric: "decode_tok_s", Value: v, Unit: "tok/s"})
		}
		if err := db.FinishCase(cases[i].ID, ss, nil, 0, 0); err != nil {
			t.Fatal(err)
		}
	}
	rows, err := db.SQL().Query(`SELECT batch, model, tag, metric, n, median FROM case_medians ORDER BY batch`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	type row struct {
		batch      float64
		model, tag string
		metric     string
		n          int
		median     float64
	}
	var got []row
	for rows.Next() {
		var r row
		if err := rows.Scan(&r.batch, &r.model, &r.tag, &r.metric, &r.n, &r.median); err != nil {
			t.Fatal(err)
		}
		got = append(got, r)
	}
	want := []row{{1, "qwen3-moe-mini", "pr", "decode_tok_s", 3, 6}, {4, "qwen3-moe-mini", "pr", "decode_tok_s", 4, 2.5}}
	if len(got) != len(want) {
		t.Fatalf("case_medians: %+v, want %+v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Errorf("row %d: %+v, want %+v", i, got[i], want[i])
		}
	}
}
