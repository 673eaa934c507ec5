// Package history ships mtlbench's documented performance history: every
// figure reported by the project's source documents (/work/shared/seeds at
// creation time), one YAML file per document. The schema, the metric names
// and the loader live in package reports/history; this package only embeds
// the files, because go:embed cannot reach a parent folder.
//
// New files dropped here (for example a table imported with
// reports/history.ImportMarkdown and written with Save) are embedded on the
// next build.
package history

import "embed"

// Files holds every *.yaml file of this folder.
//
//go:embed *.yaml
var Files embed.FS
