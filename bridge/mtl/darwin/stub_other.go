//go:build !(darwin && arm64)

package darwin

import (
	"errors"

	"github.com/mtlbench/mtlbench/bridge/mtl"
)

// errNoMetal is what New returns off Apple silicon Macs. Intel Macs are
// left out: their ABI passes MTLSize by value and returns structs through
// objc_msgSend_stret, which this package does not do.
var errNoMetal = errors.New("metal: the Metal backend needs macOS on Apple silicon (darwin/arm64); use the metal-emu backend elsewhere")

// New fails off darwin/arm64.
func New() (mtl.Device, error) { return nil, errNoMetal }
