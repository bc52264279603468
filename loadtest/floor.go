package main

import (
	"context"
	"debug/buildinfo"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime/debug"
	"sort"
	"strings"

	compactorv1 "github.com/compactord/compactord/api/compactor/v1"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/protobuf/proto"
)

// buildFloor builds loadtest/floorserver into dir and checks that it links the same module
// versions as the compactord binary bin, so that its gRPC stack is compactord's. It returns
// the binary's path and the versions of the modules that make up the call path.
func buildFloor(ctx context.Context, dir, bin string) (string, string, error) {
	out := filepath.Join(dir, "floorserver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", out, "./floorserver")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", "", fmt.Errorf("building floorserver: %w\n%s", err, b)
	}
	versions, err := sameModules(bin, out)
	if err != nil {
		return "", "", err
	}
	return out, versions, nil
}

// callPathModules are the modules whose versions the report names for the floor.
var callPathModules = []string{"google.golang.org/grpc", "google.golang.org/protobuf", "golang.org/x/net"}

// sameModules fails when the binaries a and b were built with different versions of a
// module they both link (or different Go toolchains), and returns the versions of
// callPathModules.
func sameModules(a, b string) (string, error) {
	ia, err := buildinfo.ReadFile(a)
	if err != nil {
		return "", fmt.Errorf("reading build info: %w", err)
	}
	ib, err := buildinfo.ReadFile(b)
	if err != nil {
		return "", fmt.Errorf("reading build info: %w", err)
	}
	v, err := compareModules(ia, ib)
	if err != nil {
		return "", fmt.Errorf("%s and %s: %w", filepath.Base(a), filepath.Base(b), err)
	}
	return v, nil
}

// compareModules is sameModules on the build information of the two binaries.
func compareModules(a, b *debug.BuildInfo) (string, error) {
	if a.GoVersion != b.GoVersion {
		return "", fmt.Errorf("built with %s and %s", a.GoVersion, b.GoVersion)
	}
	version := func(d *debug.Module) string {
		if d.Replace != nil {
			return d.Replace.Path + "@" + d.Replace.Version
		}
		return d.Version
	}
	va := map[string]string{}
	for _, d := range a.Deps {
		va[d.Path] = version(d)
	}
	var diff []string
	for _, d := range b.Deps {
		if v, ok := va[d.Path]; ok && v != version(d) {
			diff = append(diff, fmt.Sprintf("%s %s vs %s", d.Path, v, version(d)))
		}
	}
	if len(diff) > 0 {
		sort.Strings(diff)
		return "", fmt.Errorf("different module versions: %s", strings.Join(diff, "; "))
	}
	vs := []string{a.GoVersion}
	for _, p := range callPathModules {
		if v, ok := va[p]; ok {
			vs = append(vs, p+" "+v)
		}
	}
	return strings.Join(vs, ", "), nil
}

// startFloor starts a floor server (loadtest/floorserver) answering every call of t's
// scenario with the response a replica gives to t's request, checks it answers t's request
// with exactly that, and returns a trial of the same scenario against it. The floor trial
// runs in the same rounds as t, with baseline slices of its own on the floor server. The
// server is appended to procs, to be stopped with the others.
func (e *env) startFloor(ctx context.Context, t *trial, base *Scenario, floorBin, dir string, serverEnv []string, procs *[]*proc) (*trial, error) {
	sc := t.sc
	want, err := invoke(ctx, e.replicas[0], sc, t.p.Request)
	if err != nil {
		return nil, err
	}
	if sc.Cache == "hit" {
		if st := cacheStatus(want); st != compactorv1.CacheStatus_CACHE_STATUS_HIT {
			return nil, fmt.Errorf("%s answered cache_status %s, want CACHE_STATUS_HIT", e.replicas[0].name, st)
		}
	}
	b, err := proto.MarshalOptions{Deterministic: true}.Marshal(want)
	if err != nil {
		return nil, err
	}
	respPath := filepath.Join(dir, "floor-"+sc.Name+".pb")
	if err := os.WriteFile(respPath, b, 0o600); err != nil {
		return nil, err
	}
	name := "floor-" + sc.Name
	p, addr, err := startProc(ctx, dir, name, "serving", floorBin, []string{"-method", sc.Method(), "-response", respPath}, serverEnv)
	if err != nil {
		return nil, err
	}
	*procs = append(*procs, p)
	conn, err := grpc.NewClient(addr, grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20)))
	if err != nil {
		return nil, err
	}
	r := &replica{name: name, addr: addr, proc: p, conn: conn}
	got, err := invoke(ctx, r, sc, t.p.Request)
	if err != nil {
		conn.Close()
		return nil, err
	}
	if !proto.Equal(got, want) {
		conn.Close()
		return nil, fmt.Errorf("%s answered differently from %s", name, e.replicas[0].name)
	}
	ft := newTrial(sc, t.p, base)
	ft.env = &env{host: addr, protoset: e.protoset, replicas: []*replica{r}, llm: e.llm}
	return ft, nil
}
