package metal

import (
	"testing"

	"github.com/mtlbench/mtlbench/bridge/quanttest"
)

func TestSetFusionsKeepsOnlyThoseNamed(t *testing.T) {
	quanttest.SetFusionsKeepsOnlyThoseNamed(t, &Backend{})
}
