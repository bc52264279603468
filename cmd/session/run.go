package main

import (
	"context"
	"os/exec"
	"runtime"
	"strings"
	"sync"
	"time"

	"github.com/compactord/compactord/auth"
	"github.com/compactord/compactord/engine"
	"github.com/compactord/compactord/internal/corpus"
	"github.com/compactord/compactord/internal/measure"
	"google.golang.org/grpc/metadata"
)

// tenant is the tenant every call of a replay and of its cache's fill names, so that they
// share the summary cache.
const tenant = "session-replay"

// counterMemoBytes bounds the token-count memo the servers of a run share.
const counterMemoBytes = 256 << 20

// result is one replay of one session at one window.
type result struct {
	s   *session
	tr  trace
	fig figures
	// Of the fill before a warm replay: the calls made and those that failed.
	fillCalls, fillFailed int
}

// compacted reports whether the replay compacted at least once.
func (r result) compacted() bool { return len(r.tr.compactions) > 0 }

// report is a run over a corpus.
type report struct {
	corpus   string
	opt      options
	env      env
	sessions []session
	// fake says whether the summarizer runs against the fake provider, which bills usage.
	fake bool
	// cold[w][s] is session s replayed at window opt.windows[w] on a fresh server; warm[w][s]
	// the same after the fill (nil without -warm).
	cold, warm [][]result
}

// env is where and when a report was made.
type env struct {
	date    string
	machine string
	cores   int
	elapsed time.Duration
}

func environment(elapsed time.Duration) env {
	machine := runtime.GOARCH
	if out, err := exec.Command("uname", "-m").Output(); err == nil {
		machine = strings.TrimSpace(string(out))
	}
	return env{date: time.Now().UTC().Format("2006-01-02"), machine: machine, cores: runtime.NumCPU(), elapsed: elapsed}
}

// replayAll replays every file at every window of o, each replay on a fresh server (and,
// with o.warm, again on a server filled first), in parallel; the result does not depend on
// the order they run in.
func replayAll(ctx context.Context, o options, files []corpus.File) (report, error) {
	rep := report{opt: o}
	sum, err := measure.NewSummarizer(o.summarizer)
	if err != nil {
		return rep, err
	}
	defer sum.Close()
	rep.fake = sum.Agent != nil
	claudeMD, err := measure.ClaudeMD()
	if err != nil {
		return rep, err
	}
	ctx = metadata.NewIncomingContext(ctx, metadata.Pairs(auth.TenantKey, tenant))
	counter := engine.NewCounter(counterMemoBytes)
	// newHost is a host on a server of its own; against the fake provider, with a provider
	// of its own too, so that no replay reads another's prompt cache.
	newHost := func() (host, func()) {
		if sum.Agent == nil {
			return host{srv: sum.Server(counter), summarizer: sum.Name, headroom: int32(o.headroom)}, func() {}
		}
		own, err := measure.NewSummarizer(o.summarizer)
		if err != nil {
			panic(err) // the same name built sum
		}
		return host{srv: own.Server(counter), summarizer: own.Name, agent: own.Agent, headroom: int32(o.headroom)}, own.Close
	}

	rep.sessions = make([]session, len(files))
	parallel(len(files), func(i int) {
		h, done := newHost()
		defer done()
		rep.sessions[i] = prepare(ctx, h.srv, files[i], claudeMD)
	})

	rep.cold = make([][]result, len(o.windows))
	if o.warm {
		rep.warm = make([][]result, len(o.windows))
	}
	for w := range o.windows {
		rep.cold[w] = make([]result, len(files))
		if o.warm {
			rep.warm[w] = make([]result, len(files))
		}
	}
	parallel(len(files)*len(o.windows), func(j int) {
		w, i := j/len(files), j%len(files)
		s := &rep.sessions[i]
		if s.err != nil {
			rep.cold[w][i] = result{s: s}
			if o.warm {
				rep.warm[w][i] = result{s: s}
			}
			return
		}
		window := s.window(o.windows[w])
		h, done := newHost()
		tr := h.replay(ctx, s, window)
		done()
		rep.cold[w][i] = result{s: s, tr: tr, fig: measureEnd(s, tr)}
		if !o.warm {
			return
		}
		h, done = newHost()
		defer done()
		calls, failed := h.fill(ctx, s)
		tr = h.replay(ctx, s, window)
		rep.warm[w][i] = result{s: s, tr: tr, fig: measureEnd(s, tr), fillCalls: calls, fillFailed: failed}
	})
	return rep, nil
}

// parallel calls f(0) … f(n-1) on as many goroutines as the process may run at once.
func parallel(n int, f func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(n, runtime.GOMAXPROCS(0)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range next {
				f(i)
			}
		}()
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
