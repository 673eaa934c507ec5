//go:build !race

package readfile

// growCopies is how many times bytes.Buffer.Grow allocates the room it
// makes (race_test.go).
const growCopies = 1
