# mtlbench: build, test and cross-compile.
GO      ?= go
BIN     ?= bin/mtlbench
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.version=$(VERSION)
SUITE   ?= suites/qwen3-moe.yaml

.PHONY: all build test vet darwin bench run ci clean

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mtlbench

# The test command the README and CI use.
test:
	$(GO) test ./...

vet:
	$(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go')); if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

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

ci: vet darwin test

clean:
	rm -rf bin
