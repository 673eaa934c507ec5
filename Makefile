# mtlbench: build, test and cross-compile.
GO      ?= go
BIN     ?= bin/mtlbench
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
SUITE   ?= suites/qwen3-moe.yaml

.PHONY: all build test vet tidy-check darwin bench run ci clean clang mac-smoke selftest-emu

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mtlbench

# The test command the README and CI use.
test:
	$(GO) test ./...

vet: tidy-check
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# go.mod and go.sum must be what `go mod tidy` makes of them.
tidy-check:
	@$(GO) mod tidy -diff || { echo "go.mod/go.sum are not tidy: run go mod tidy"; exit 1; }

# macOS on Apple Silicon, the platform mtlbench's users run on.
darwin:
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) build -o /dev/null ./...
	GOOS=darwin GOARCH=arm64 CGO_ENABLED=0 $(GO) vet ./...

# Engine benchmarks: tokens/s and the fraction of the memory roofline.
bench:
	$(GO) test -run '^$$' -bench . -benchtime 3x ./runner/engine/

# The main job: run a suite on this machine and record it.
run: build
	$(BIN) run $(SUITE)

# The Metal emulator compiles MSL as C++ with clang 16+ (Debian's default
# clang 14 rejects _Float16 on x86-64); its tests skip without one.
clang:
	@command -v clang++-19 >/dev/null || command -v clang++-16 >/dev/null || \
	  { apt-get update -q && apt-get install -y -q clang-19; } || \
	  echo "clang-19 could not be installed: the Metal emulator tests will skip"

# The first thing to run on a Mac: the Metal layer's own tests, the kernel
# self-test on the GPU, and the same prompt on Metal and on the CPU.
SMOKE_GEN := generate --model qwen3-moe-mini --tokens 12,7,300 --max-new-tokens 16
mac-smoke: build
	@[ "$$(uname -s)/$$(uname -m)" = Darwin/arm64 ] || { echo "mac-smoke: needs macOS on Apple silicon" >&2; exit 2; }
	CGO_ENABLED=0 $(GO) test -count=1 ./bridge/mtl/darwin/
	$(BIN) devices
	$(BIN) selftest --backend metal --failures
	$(BIN) $(SMOKE_GEN) --backend metal > $(BIN).smoke-metal && cat $(BIN).smoke-metal
	$(BIN) $(SMOKE_GEN) --backend cpu > $(BIN).smoke-cpu && cat $(BIN).smoke-cpu
	@if cmp -s $(BIN).smoke-metal $(BIN).smoke-cpu; then echo "mac-smoke: ok, Metal and CPU tokens match"; else echo "mac-smoke: tokens differ (late: near-tie; early: bug)"; exit 1; fi

# The Metal kernels against the reference, under emulation (needs clang 16+).
selftest-emu: build
	@if command -v clang++-19 >/dev/null || command -v clang++-16 >/dev/null; then \
	  $(BIN) selftest --backend metal-emu --failures; \
	else echo "no clang 16+: the metal-emu selftest is skipped (make clang)"; fi

ci: vet darwin clang selftest-emu test

clean:
	rm -rf bin
