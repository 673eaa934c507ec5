//go:build !linux

package cuda

import (
	"errors"

	"github.com/mtlbench/mtlbench/bridge"
)

// errNoCUDA is what every entry point returns off Linux.
var errNoCUDA = errors.New("no CUDA driver: the CUDA backend runs on Linux only")

// Backend is the CUDA backend; off Linux it cannot be opened.
type Backend struct{ bridge.Backend }

// New fails off Linux.
func New(Options) (*Backend, error) { return nil, errNoCUDA }
