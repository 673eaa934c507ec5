package darwin

import (
	"errors"
	"fmt"
	"strings"
)

// MTLCommandBufferStatus values (Metal/MTLCommandBuffer.h).
const (
	cbStatusComplete = 4 // MTLCommandBufferStatusCompleted
	cbStatusError    = 5 // MTLCommandBufferStatusError
)

// maxNamedKernels bounds the kernels a command buffer error lists: a decode
// step runs a few dozen.
const maxNamedKernels = 16

// commandBufferError is the error of a command buffer whose status after
// waitUntilCompleted is not completed. Metal's NSError says what went wrong
// (a page fault, a timeout) but not in which dispatch, so the error names
// the kernels the command buffer ran; code is the NSError's code, hasErr
// false where Metal gave no NSError.
func commandBufferError(status uint64, hasErr bool, code int64, desc string, kernels []string) error {
	var b strings.Builder
	fmt.Fprintf(&b, "metal: command buffer %s", statusName(status))
	if hasErr {
		fmt.Fprintf(&b, " (%s): %s", commandBufferErrorName(code), desc)
	} else {
		b.WriteString(" with no NSError")
	}
	switch n := len(kernels); {
	case n == 0:
		b.WriteString("; it dispatched no kernel")
	case n <= maxNamedKernels:
		fmt.Fprintf(&b, "; its kernels: %s", strings.Join(kernels, ", "))
	default:
		fmt.Fprintf(&b, "; its kernels: %s and %d more", strings.Join(kernels[:maxNamedKernels], ", "), n-maxNamedKernels)
	}
	return errors.New(b.String())
}

// commandBufferErrorName names an MTLCommandBufferError code
// (MTLCommandBufferErrorDomain).
func commandBufferErrorName(code int64) string {
	name := map[int64]string{
		0: "None", 1: "Internal", 2: "Timeout", 3: "PageFault", 4: "AccessRevoked",
		7: "NotPermitted", 8: "OutOfMemory", 9: "InvalidResource", 10: "Memoryless",
		11: "DeviceRemoved", 12: "StackOverflow",
	}[code]
	if name == "" {
		return fmt.Sprintf("error code %d", code)
	}
	return fmt.Sprintf("MTLCommandBufferError%s, code %d", name, code)
}

// statusName says what an MTLCommandBufferStatus means, for messages.
func statusName(s uint64) string {
	switch s {
	case 0:
		return "not enqueued"
	case 1:
		return "enqueued"
	case 2:
		return "committed"
	case 3:
		return "scheduled"
	case cbStatusComplete:
		return "completed"
	case cbStatusError:
		return "failed"
	}
	return fmt.Sprintf("in status %d", s)
}
