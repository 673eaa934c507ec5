//go:build race

package readfile

// growCopies is how many times bytes.Buffer.Grow allocates the room it
// makes: twice under the race detector, whose build does not fold
// growSlice's make into its append.
const growCopies = 2
