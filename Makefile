# mtlbench: build, test and cross-compile.
GO      ?= go
BIN     ?= bin/mtlbench
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
# The commit also reaches the binary through Go's VCS stamp; this covers
# builds with -buildvcs=false.
COMMIT  ?= $(shell git rev-parse HEAD 2>/dev/null)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# The main job: Qwen3-30B-A3B on the GPU (Metal on a Mac, CUDA where
# nvidia-smi answers), else its CPU-sized form (the first 4 layers), which
# a CPU runs in minutes rather than the hours the layers that fit would take.
SUITE   ?= $(shell if [ "$$(uname -s)" = Darwin ] || nvidia-smi -L >/dev/null 2>&1; then echo suites/qwen3-moe.yaml; else echo suites/qwen3-moe-cpu.yaml; fi)

.PHONY: fuzz all build test vet tidy-check darwin bench run ci clean clang mac-smoke selftest-emu

all: build

build:
	CGO_ENABLED=0 $(GO) build -ldflags "$(LDFLAGS)" -o $(BIN) ./cmd/mtlbench

# The test command the README and CI use. The Metal kernels' packages
# compile and run every kernel variant under the emulator: on two cores
# bridge/metal takes 40 to 56 minutes beside the other packages, far past
# go test's default 10 per package, and a busy machine stretches it further.
test:
	$(GO) test -timeout 80m ./...
	$(MAKE) fuzz

# Each fuzz target for a bounded number of executions, each count about 5 s
# on two cores (with their instrumented builds under a minute in all): the
# suite parser, config.json, the safetensors header, GGUF (a scaled
# RoPE's too), mlx-lm and sharded HF folders, the store's schema version
# and tokenizer.json. A count, not a duration:
# Go 1.26's fuzzing coordinator can report its own -fuzztime deadline as a
# failure when a worker is still busy at it (go.dev/issue/75804, fixed in
# Go 1.27).
fuzz:
	$(GO) test ./suites -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20000x
	$(GO) test ./runner/model -run '^$$' -fuzz '^FuzzParseHFConfig$$' -fuzztime 150000x
	$(GO) test ./runner/safetensors -run '^$$' -fuzz '^FuzzParseHeader$$' -fuzztime 80000x
	$(GO) test ./runner/gguf -run '^$$' -fuzz '^FuzzOpen$$' -fuzztime 8000x
	$(GO) test ./runner/model -run '^$$' -fuzz '^FuzzOpenGGUF$$' -fuzztime 2000x
	$(GO) test ./runner/model -run '^$$' -fuzz '^FuzzOpenGGUFRoPE$$' -fuzztime 2500x
	$(GO) test ./runner/model -run '^$$' -fuzz '^FuzzOpenMLX$$' -fuzztime 4000x
	$(GO) test ./runner/model -run '^$$' -fuzz '^FuzzOpenHF$$' -fuzztime 3000x
	$(GO) test ./results -run '^$$' -fuzz '^FuzzSchemaVersion$$' -fuzztime 800x
	$(GO) test ./runner/tokenizer -run '^$$' -fuzz '^FuzzParse$$' -fuzztime 20000x
	$(GO) test ./runner/tokenizer -run '^$$' -fuzz '^FuzzFromGGUF$$' -fuzztime 15000x

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
# self-test on the GPU (at the newest MSL, at MSL 3.0 as macOS 13 compiles
# it, with serial passes, and with fast math off), the kernels' pipeline
# limits, the fallback to the next backend when the kernels do not compile
# (MSL 2.0 lacks what they use), a six-minute tune of one decode attention, one MoE, one prefill
# attention, one packed-matmul shape and the 4-bit decode's packed GEMV and
# experts, the fusion on/off pair, the same pair sampled with steps
# committed in pieces and whole, the same prompts (a short one, and one of
# 700 tokens whose decode runs split-K) on Metal and on the CPU, and 4-bit
# qwen3-moe-mini and GPT-2 held by generate --against to the CPU and to
# Metal without fusion. Every
# step runs even when one before it failed; each keeps its output in
# $(SMOKE)-STEP.log, and all of them go into $(SMOKE)-report.tar.gz, the file
# to send back (docs/metal-first-run.md).
SMOKE     := $(BIN).smoke
SMOKE_GEN := generate --model qwen3-moe-mini --tokens 12,7,300 --max-new-tokens 16
# 4-bit GPT-2 (two blocks): its LayerNorms, GELU and residual adds fold
# into the packed GEMVs (layernorm_gemv, gemv_gelu, gemv_residual). Its
# greedy tokens repeat the prompt's last, so its logits are compared (an
# f32 KV cache on both sides).
SMOKE_GPT2 := generate --model gpt2 --dtype q4 --layers 2 --kv-dtype f32 --tokens 464,2068,7586,21831,18045 --max-new-tokens 8 --tolerance 1e-4
# 4-bit qwen3-moe-mini: the packed decode path of Qwen3-30B-A3B at 4 bits
# (packed GEMVs with their norms, the packed MoE block in three dispatches).
SMOKE_Q4 := generate --model qwen3-moe-mini --dtype q4 --kv-dtype f32 --tokens 12,7,300 --max-new-tokens 16 --tolerance 1e-4
SMOKE_DB  := --db $(SMOKE).db
# Winners go to a file of their own, not the user's cache: a first run must
# not change what later runs pick.
SMOKE_TUNE := tune --backend metal $(SMOKE_DB) --out $(SMOKE)-tuned.json --budget 1m --tag mac-smoke
SMOKE_ATTN := --kernel paged_attention_decode --shape seqs=1,context=4096,num_heads=32,num_kv_heads=4,head_size=128,block_size=16
SMOKE_MOE  := --kernel moe --shape tokens=1,experts=128,top_k=8,hidden=2048,intermediate=768
SMOKE_PREFILL := --kernel paged_attention_prefill --shape seqs=1,tokens=512,num_heads=32,num_kv_heads=4,head_size=128,block_size=16
SMOKE_QMM  := --kernel qmatmul --dtype q4 --shape m=512,n=2048,k=2048
# Qwen3-30B-A3B's 4-bit decode: the q projection's GEMV and the experts.
SMOKE_QMV  := --kernel qmatmul --dtype q4 --shape m=1,n=4096,k=2048
SMOKE_QMOE := --kernel qmoe --dtype q4 --shape tokens=1,experts=128,top_k=8,hidden=2048,intermediate=768
# A 700-token prompt: decode past the attention's 512-key partition, so
# split-K decode with RoPE and QK-norm fused into it, then the reduce; f32
# weights (and so an f32 cache on Metal too), so Metal and the CPU agree to
# rounding.
SMOKE_LONG := generate --model qwen3-moe-mini --dtype f32 --tokens $(shell seq 7 706 | paste -sd, -) --max-new-tokens 8
# smoke_step NAME, COMMAND: runs COMMAND with its output in $(SMOKE)-NAME.log
# and on the terminal; a failure is noted in $(SMOKE)-failed and the next
# step runs.
define smoke_step
	@echo "== mac-smoke $(1): $(2)"; $(2) > $(SMOKE)-$(1).log 2>&1; rc=$$?; cat $(SMOKE)-$(1).log; \
	  echo "exit $$rc" >> $(SMOKE)-$(1).log; \
	  if [ $$rc -ne 0 ]; then echo "$(1) (exit $$rc)" >> $(SMOKE)-failed; echo "mac-smoke: $(1) failed (exit $$rc)"; fi
endef
mac-smoke: build
	@[ "$$(uname -s)/$$(uname -m)" = Darwin/arm64 ] || { echo "mac-smoke: needs macOS on Apple silicon" >&2; exit 2; }
	@rm -f $(SMOKE)-*.log $(SMOKE)-failed $(SMOKE)-tuned.json $(SMOKE)-report.tar.gz $(SMOKE).db $(SMOKE).db-*
	$(call smoke_step,machine,sh -c 'sw_vers; uname -a; sysctl -n machdep.cpu.brand_string; system_profiler SPDisplaysDataType SPHardwareDataType; ioreg -r -c AGXAccelerator -d 1 | grep gpu-core-count; go version; git rev-parse HEAD; git status --short; true')
	$(call smoke_step,devices,$(BIN) devices)
	$(call smoke_step,env,$(BIN) env)
	$(call smoke_step,darwin-tests,env CGO_ENABLED=0 $(GO) test -count=1 ./bridge/mtl/darwin/)
	$(call smoke_step,selftest,$(BIN) selftest --backend metal --failures)
	$(call smoke_step,pipelines,$(BIN) devices --pipelines)
	$(call smoke_step,selftest-msl-3.0,env MTLBENCH_METAL_MSL=3.0 $(BIN) selftest --backend metal --failures)
	$(call smoke_step,selftest-serial,env MTLBENCH_METAL_SERIAL=1 $(BIN) selftest --backend metal --failures)
	$(call smoke_step,selftest-fast-math-off,env MTLBENCH_METAL_FAST_MATH=0 $(BIN) selftest --backend metal --failures)
	$(call smoke_step,fallback,sh -c 'MTLBENCH_METAL_MSL=2.0 $(BIN) $(SMOKE_GEN) --backend auto 2>&1 | tee /dev/stderr | grep -q "warning: Metal did not open"')
	$(call smoke_step,tune-attention,$(BIN) $(SMOKE_TUNE) $(SMOKE_ATTN))
	$(call smoke_step,tune-moe,$(BIN) $(SMOKE_TUNE) $(SMOKE_MOE))
	$(call smoke_step,tune-prefill,$(BIN) $(SMOKE_TUNE) $(SMOKE_PREFILL))
	$(call smoke_step,tune-packed,$(BIN) $(SMOKE_TUNE) $(SMOKE_QMM))
	$(call smoke_step,tune-packed-decode,$(BIN) $(SMOKE_TUNE) $(SMOKE_QMV))
	$(call smoke_step,tune-packed-experts,$(BIN) $(SMOKE_TUNE) $(SMOKE_QMOE))
	$(call smoke_step,fusion,$(BIN) run suites/mac-smoke.yaml --backend metal $(SMOKE_DB) --tag mac-smoke-fusion)
	$(call smoke_step,stream,$(BIN) run suites/mac-smoke.yaml --backend metal $(SMOKE_DB) --set sampling=temperature:0.7 --tag mac-smoke-stream)
	$(call smoke_step,stream-off,env MTLBENCH_METAL_STREAM=0 $(BIN) run suites/mac-smoke.yaml --backend metal $(SMOKE_DB) --set sampling=temperature:0.7 --tag mac-smoke-stream-off)
	$(call smoke_step,tokens-metal,$(BIN) $(SMOKE_GEN) --backend metal)
	$(call smoke_step,tokens-metal-nofusion,$(BIN) $(SMOKE_GEN) --backend metal --fusion off)
	$(call smoke_step,tokens-cpu,$(BIN) $(SMOKE_GEN) --backend cpu)
	$(call smoke_step,tokens-long-metal,$(BIN) $(SMOKE_LONG) --backend metal)
	$(call smoke_step,tokens-long-cpu,$(BIN) $(SMOKE_LONG) --backend cpu)
	$(call smoke_step,q4-metal-cpu,$(BIN) $(SMOKE_Q4) --backend metal --against cpu)
	$(call smoke_step,q4-metal-nofusion,$(BIN) $(SMOKE_Q4) --backend metal --against metal --against-fusion off)
	$(call smoke_step,gpt2-metal-cpu,$(BIN) $(SMOKE_GPT2) --backend metal --against cpu)
	$(call smoke_step,gpt2-metal-nofusion,$(BIN) $(SMOKE_GPT2) --backend metal --against metal --against-fusion off)
	@m=$$(grep -E '^[0-9 ]+$$' $(SMOKE)-tokens-metal.log); \
	  n=$$(grep -E '^[0-9 ]+$$' $(SMOKE)-tokens-metal-nofusion.log); c=$$(grep -E '^[0-9 ]+$$' $(SMOKE)-tokens-cpu.log); \
	  lm=$$(grep -E '^[0-9 ]+$$' $(SMOKE)-tokens-long-metal.log); lc=$$(grep -E '^[0-9 ]+$$' $(SMOKE)-tokens-long-cpu.log); \
	  { echo "metal:           $$m"; echo "metal fusion off: $$n"; echo "cpu:             $$c"; \
	    echo "700-token prompt, metal: $$lm"; echo "700-token prompt, cpu:   $$lc"; } > $(SMOKE)-tokens.log; \
	  cat $(SMOKE)-tokens.log; \
	  if [ -z "$$m" ] || [ "$$m" != "$$n" ]; then echo "tokens: fusion on and off differ on Metal" >> $(SMOKE)-failed; fi; \
	  if [ -z "$$m" ] || [ "$$m" != "$$c" ]; then echo "tokens: Metal and CPU differ (late: near-tie; early: bug)" >> $(SMOKE)-failed; fi; \
	  if [ -z "$$lm" ] || [ "$$lm" != "$$lc" ]; then echo "tokens: Metal and CPU differ after a 700-token prompt (split-K decode)" >> $(SMOKE)-failed; fi
	@tar czf $(SMOKE)-report.tar.gz $(SMOKE)-*.log $$(ls $(SMOKE)-failed $(SMOKE)-tuned.json $(SMOKE).db 2>/dev/null)
	@if [ -s $(SMOKE)-failed ]; then echo "mac-smoke: FAILED:"; sed 's/^/  /' $(SMOKE)-failed; \
	  echo "send $(SMOKE)-report.tar.gz (docs/metal-first-run.md, section 5)"; exit 1; \
	else echo "mac-smoke: ok, every step passed and Metal, Metal without fusion and CPU tokens match ($(SMOKE)-report.tar.gz has the logs)"; fi

# The Metal kernels against the reference, under emulation (needs clang 16+).
selftest-emu: build
	@if command -v clang++-19 >/dev/null || command -v clang++-16 >/dev/null; then \
	  $(BIN) selftest --backend metal-emu --failures; \
	else echo "no clang 16+: the metal-emu selftest is skipped (make clang)"; fi

ci: vet darwin clang selftest-emu test

clean:
	rm -rf bin
