# compactord build. `make test` needs only Go; the other targets install their pinned tools
# into .bin/ through the Go module proxy on first use.

GO        ?= go
BIN       := $(CURDIR)/.bin
export PATH := $(BIN):$(PATH)

BUF_VERSION                := v1.73.0
PROTOC_GEN_GO_VERSION      := v1.36.12
PROTOC_GEN_GO_GRPC_VERSION := v1.6.1
STATICCHECK_VERSION        := v0.8.2
DEADCODE_VERSION           := v0.52.0
GRPCURL_VERSION            := v1.9.3
# The vtprotobuf plugin must match the runtime helpers its code imports: the version go.mod
# resolves (gRPC requires the module too).
VTPROTO_VERSION             = $(shell $(GO) list -m -f '{{.Version}}' github.com/planetscale/vtprotobuf)

# The race detector needs cgo; without a C toolchain the tests still run, without it.
RACE := $(shell [ "$$($(GO) env CGO_ENABLED)" = 1 ] && command -v "$$($(GO) env CC)" >/dev/null 2>&1 && echo -race)

.PHONY: all build install docker test test-clients lint deadcode generate check-generate breaking tools grpcurl fuzz bench k8s-validate loadtest loadtest-prepared chaos fidelity recall session clean

all: lint test build

# What compactord --version prints where the Go toolchain stamps nothing (a copy without
# .git, GOFLAGS=-buildvcs=false, the Docker build): the release and the commit.
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null)
REVISION ?= $(shell git rev-parse HEAD 2>/dev/null)
# Release builds: no build paths (-trimpath), no symbol table or DWARF (-s -w), and gRPC
# without golang.org/x/net/trace, whose html/template keeps every exported method of every
# linked type (grpcnotrace: compactord 87 MB -> 50 MB; docs/PERFORMANCE.md).
BUILD_FLAGS   := -trimpath -tags grpcnotrace
LDFLAGS       := -s -w
VERSION_FLAGS := -X main.buildVersion=$(VERSION) -X main.buildRevision=$(REVISION)

# The first build compiles every dependency: minutes on two cores (README.md, "Set up"). So that
# it shows progress, a line says what is being built and -v lists each package as it compiles;
# a later build lists only what changed.
FIRST_BUILD_NOTE := the first build compiles about 550 packages, listed as they compile, and takes minutes

# Static ./compactord and ./compactctl.
build:
	@echo "make build: compactord and compactctl into ./ ($(FIRST_BUILD_NOTE))"
	CGO_ENABLED=0 $(GO) build -v $(BUILD_FLAGS) -ldflags '$(LDFLAGS) $(VERSION_FLAGS)' -o compactord ./cmd/compactord
	CGO_ENABLED=0 $(GO) build -v $(BUILD_FLAGS) -ldflags '$(LDFLAGS)' -o compactctl ./cmd/compactctl

# compactord and compactctl into $(go env GOBIN), else $(go env GOPATH)/bin.
install:
	@echo "make install: compactord and compactctl into $$($(GO) env GOBIN | grep . || echo "$$($(GO) env GOPATH)/bin") ($(FIRST_BUILD_NOTE))"
	CGO_ENABLED=0 $(GO) install -v $(BUILD_FLAGS) -ldflags '$(LDFLAGS) $(VERSION_FLAGS)' ./cmd/compactord
	CGO_ENABLED=0 $(GO) install -v $(BUILD_FLAGS) -ldflags '$(LDFLAGS)' ./cmd/compactctl

# The container image, with the version compactord --version reports (the build has no .git).
IMAGE ?= compactord:dev
docker:
	docker build --build-arg VERSION=$(VERSION) --build-arg REVISION=$(REVISION) -t $(IMAGE) .

test:
	@[ -n "$(RACE)" ] || echo "make test: no cgo toolchain, running without -race"
	@[ -n "$$REDIS_URL" ] || echo "make test: REDIS_URL unset: the Redis tests are SKIPPED (.ci/run starts a redis-server for them)"
	$(GO) test $(RACE) -count=1 ./...
	cd loadtest && $(GO) test $(RACE) -count=1 ./...
	clients/test.sh

# The Python and Node client suites against the real binary; a missing toolchain is skipped
# loudly (an error with CI=true).
test-clients:
	clients/test.sh

lint: $(BIN)/staticcheck $(BIN)/buf
	@out=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needs to run on:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(BIN)/staticcheck ./...
	cd loadtest && $(GO) vet ./... && $(BIN)/staticcheck ./...
	$(BIN)/buf lint
	$(MAKE) --no-print-directory deadcode

# Fails on dead code (golang.org/x/tools/cmd/deadcode), in one throwaway go.work holding both
# modules so that code only the load test runs counts as used. Code the commands link (every
# main package: cmd/..., clients/protoset, internal/readme/run, k8s/schemagen, loadtest, ...)
# is dead unless a command reaches it: without -test, code only tests call is dead too. The
# packages that exist for tests (TEST_SUPPORT, under internal/), and any package no command
# links, are dead code's other kind: there a function neither a command nor a test reaches
# (-test) is dead.
TEST_SUPPORT := certtest corpus cputime golden hostile irtest llmtest rawh2 redistest tcpproxy
deadcode: $(BIN)/deadcode
	@set -e; work=$$(mktemp -d); trap 'rm -rf "$$work"' EXIT; export GOWORK="$$work/go.work"; \
	  $(GO) work init . ./loadtest; \
	  $(GO) list ./... ./loadtest/... >"$$work/all"; \
	  $(GO) list -f '{{if eq .Name "main"}}{{.ImportPath}}{{end}}' ./... ./loadtest/... >"$$work/mains"; \
	  $(GO) list -deps -f '{{with .Module}}{{if .Main}}{{$$.ImportPath}}{{end}}{{end}}' $$(cat "$$work/mains") >"$$work/linked"; \
	  grep -vE '/internal/($(subst $() ,|,$(TEST_SUPPORT)))$$' "$$work/linked" >"$$work/prod"; \
	  grep -vxF -f "$$work/prod" "$$work/all" >"$$work/rest" || [ $$? -eq 1 ]; \
	  re() { sed 's/[.]/\\./g' "$$1" | paste -sd'|' - | sed 's/.*/^(&)$$/'; }; \
	  $(BIN)/deadcode -filter "$$(re "$$work/prod")" $$(cat "$$work/mains") >"$$work/dead"; \
	  [ ! -s "$$work/rest" ] || $(BIN)/deadcode -test -filter "$$(re "$$work/rest")" ./... ./loadtest/... >>"$$work/dead"; \
	  if [ -s "$$work/dead" ]; then echo "deadcode: functions nothing reaches (remove them):"; cat "$$work/dead"; exit 1; fi

# The Go code (buf, pinned plugins), then the Python and Node clients (clients/generate.sh;
# versions in clients/VERSIONS and clients/node/package-lock.json).
generate: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-go-vtproto
	$(BIN)/buf generate
	clients/generate.sh

# Fails when the checked-in generated code differs from what `make generate` produces.
check-generate: generate
	@git add -N api clients >/dev/null 2>&1; \
	  if ! git diff --exit-code --stat -- api clients; then \
	    echo "generated code is out of date: run 'make generate' and commit"; exit 1; fi

# Compares the API with the last release: the newest v* tag when the clone has one, else
# API_BASELINE, the commit whose API clients were first built against (no release is tagged
# yet). Only additions pass: a renamed, renumbered or retyped field fails. CI runs it.
API_BASELINE := 957fe36b9f93f36e4fe56f2c9d8bcf3a2fcfeef7
API_RELEASE   = $(or $(shell git describe --tags --abbrev=0 --match 'v*' 2>/dev/null),$(API_BASELINE))
# The api module alone is compared (the workspace also holds third_party/googleapis, which the
# baseline does not), read from the repository's git directory: in a git worktree, .git is a
# file that buf cannot clone, and the common directory holds the same commits.
API_GIT_DIR   = $(or $(shell git rev-parse --git-common-dir 2>/dev/null),.git)
breaking: $(BIN)/buf
	@echo "buf breaking against $(API_RELEASE)"
	$(BIN)/buf breaking api --against '$(API_GIT_DIR)#ref=$(API_RELEASE),subdir=api'

# Renders every kustomize overlay and validates it offline (kubeconform -strict, kube-score).
k8s-validate:
	k8s/validate.sh

# Every fuzz target, FUZZTIME each (go test runs one target per invocation).
FUZZTIME ?= 30s
FUZZ_TARGETS := ./engine:FuzzValidate ./engine/tokenizer:FuzzImageSize ./engine:FuzzTruncate ./engine:FuzzPruneToTarget \
	./summarize:FuzzExtractiveSummary ./engine/tokenizer:FuzzBPEMatchesTiktoken ./engine/tokenizer:FuzzPretokMatchesRegexp2 ./engine/format:FuzzLift ./engine/format:FuzzLower \
	./engine/format:FuzzAppendString ./engine/format:FuzzAppendEscapedReference ./cmd/compactord:FuzzConfigFile \
	./fidelity:FuzzCheck ./service:FuzzDecodeRequest
# One replica with a throwaway Redis as its summary cache, every scenario in
# loadtest/scenarios.yaml measured round after round over a 5-minute memory soak; writes
# loadtest/results/loadtest-1-replicas.md (needs redis-server on PATH). The server gets the GC
# settings of k8s/base/deployment.yaml, and store bounds small enough that the soak's
# 15-second fill reaches them (at the default
# 64 MiB each, stores take hours of traffic to fill; the soak looks for growth beyond them).
# In the same rounds, every scenario with a target is also measured against
# loadtest/floorserver (compactord's gRPC stack doing no work: the floor of its ratio).
LOADTEST_ENV := -server-env GOGC=400 -server-env GOMEMLIMIT=400MiB \
	-server-arg=--cache-max-bytes=2MiB -server-arg=--token-memo-bytes=4MiB
loadtest:
	cd loadtest && $(GO) run . -soak 5m $(LOADTEST_ENV)

# Compact at the trigger, each conversation new, with the fake LLM at a model's latency (5 s):
# without preparation, then after Compact with prepare (loadtest/prepared.go); writes
# loadtest/results/prepared.md (needs redis-server). About a minute.
loadtest-prepared:
	cd loadtest && $(GO) run . -prepared -llm-latency 5s

# Faults under load against three replicas sharing a Redis: Redis killed and restarted,
# Redis stalled behind a proxy, a replica sent SIGTERM, the LLM misbehaving, and all of it at
# once for a minute; writes loadtest/results/chaos.md (needs redis-server). About 3 minutes.
chaos:
	cd loadtest && $(GO) run . -chaos

# The fidelity measure (cmd/fidelity) over the real corpus (internal/corpus/testdata/real, or
# CORPUS=dir): forced compaction at 60% and 30% of each conversation's tokens with the
# extractive summarizer and a one-line fake LLM; writes docs/fidelity-report.md.
FIDELITY_SUMMARIZERS ?= extractive,oneline
FIDELITY_OUT ?= docs/fidelity-report.md
fidelity:
	$(GO) run ./cmd/fidelity $(if $(CORPUS),-corpus $(CORPUS)) -summarizer $(FIDELITY_SUMMARIZERS) -o $(FIDELITY_OUT)

# Continuation recall (cmd/recall) over the project's corpus (the fixtures and the real
# conversations, or CORPUS=dir): each conversation split at 70%, its history compacted at a
# window of 50% of its tokens, and the facts the agent uses next counted in what compaction
# kept, against truncation and observation masking at the same budget; writes
# docs/recall-report.md.
RECALL_OUT ?= docs/recall-report.md
recall:
	$(GO) run ./cmd/recall $(if $(CORPUS),-corpus $(CORPUS)) -o $(RECALL_OUT)

# The session replay (cmd/session) over the project's corpus (or CORPUS=dir): each conversation
# replayed turn by turn as a host runs it (Plan before every assistant message at a window of
# 35% and 60% of its tokens, Compact when the plan acts, what it returns persisted); Claude Code
# conversations carry the real CLAUDE.md block. WARM=1 also replays each session after other
# calls filled the cache with summaries of it (issue 37); HEADROOM=n sets every call's
# Policy.headroom_turns (the trade between compacting less often and keeping more). Writes
# docs/session-report.md (SESSION_OUT=file elsewhere); the held-out conversations:
# make session CORPUS=internal/corpus/testdata/other SESSION_OUT=/tmp/other.md.
SESSION_OUT ?= docs/session-report.md
session:
	$(GO) run ./cmd/session $(if $(CORPUS),-corpus $(CORPUS)) $(if $(HEADROOM),-headroom $(HEADROOM)) $(if $(WARM),-warm) -o $(SESSION_OUT)

fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  echo "fuzz $${t#*:} in $${t%%:*}"; \
	  $(GO) test $${t%%:*} -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME); \
	done

bench:
	$(GO) test ./engine/... ./service -run '^$$' -bench . -benchmem

tools: $(BIN)/buf $(BIN)/protoc-gen-go $(BIN)/protoc-gen-go-grpc $(BIN)/protoc-gen-go-vtproto $(BIN)/staticcheck $(BIN)/deadcode $(BIN)/grpcurl

# grpcurl alone, into .bin/ (the README's quick start uses it).
grpcurl: $(BIN)/grpcurl

$(BIN)/buf:
	GOBIN=$(BIN) $(GO) install github.com/bufbuild/buf/cmd/buf@$(BUF_VERSION)
$(BIN)/protoc-gen-go:
	GOBIN=$(BIN) $(GO) install google.golang.org/protobuf/cmd/protoc-gen-go@$(PROTOC_GEN_GO_VERSION)
$(BIN)/protoc-gen-go-grpc:
	GOBIN=$(BIN) $(GO) install google.golang.org/grpc/cmd/protoc-gen-go-grpc@$(PROTOC_GEN_GO_GRPC_VERSION)
$(BIN)/protoc-gen-go-vtproto:
	GOBIN=$(BIN) $(GO) install github.com/planetscale/vtprotobuf/cmd/protoc-gen-go-vtproto@$(VTPROTO_VERSION)
$(BIN)/staticcheck:
	GOBIN=$(BIN) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
$(BIN)/deadcode:
	GOBIN=$(BIN) $(GO) install golang.org/x/tools/cmd/deadcode@$(DEADCODE_VERSION)
$(BIN)/grpcurl:
	GOBIN=$(BIN) $(GO) install github.com/fullstorydev/grpcurl/cmd/grpcurl@$(GRPCURL_VERSION)

clean:
	rm -f compactord compactctl
