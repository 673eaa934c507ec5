//go:build !unix

package results

// writable cannot ask elsewhere: the store's open says, as it makes it.
func writable(string) error { return nil }
