// Package offheap allocates large buffers outside the Go heap: model
// weights and kernel cases' data, which a GPU backend may alias
// (bridge.MappedWeighter) and the GC should neither scan nor pace against.
package offheap
