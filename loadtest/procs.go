package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"
)

// proc is a child process the driver started; its output goes to a log file in the temp dir.
type proc struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{} // closed when the process has exited
	err  error         // Wait's result, valid after done

	mu   sync.Mutex
	last []string // the last lines of a scanned stderr, for error messages
}

// maxLogBytes caps a scanned stderr log file: a server logs one line per call, and a soak
// makes millions. Lines past the cap are dropped from the file but still kept in last.
const maxLogBytes = 32 << 20

// keepLines is how many of the last stderr lines a proc remembers.
const keepLines = 30

// remember keeps line among the last ones seen.
func (p *proc) remember(line string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.last) == keepLines {
		copy(p.last, p.last[1:])
		p.last = p.last[:keepLines-1]
	}
	p.last = append(p.last, line)
}

// lastLines returns the last n lines the process wrote: from memory for a scanned stderr,
// from the log file otherwise.
func (p *proc) lastLines(n int) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.last == nil {
		return tail(p.log, n)
	}
	l := p.last
	if len(l) > n {
		l = l[len(l)-n:]
	}
	return strings.Join(l, "\n")
}

// loggedAddr returns the "addr" of the last JSON log line with msg among the lines the
// process wrote to its scanned stderr, or "".
func (p *proc) loggedAddr(msg string) string {
	p.mu.Lock()
	defer p.mu.Unlock()
	for i := len(p.last) - 1; i >= 0; i-- {
		var rec struct {
			Msg  string `json:"msg"`
			Addr string `json:"addr"`
		}
		if json.Unmarshal([]byte(p.last[i]), &rec) == nil && rec.Msg == msg && rec.Addr != "" {
			return rec.Addr
		}
	}
	return ""
}

// startProc starts a child that dies with the driver (Pdeathsig) and logs to dir/name.log.
// When addrMsg is non-empty, the child's stderr is scanned for a JSON log line with that
// "msg" and startProc returns once it has seen it, with its "addr".
func startProc(ctx context.Context, dir, name string, addrMsg string, bin string, args []string, env []string) (*proc, string, error) {
	logPath := filepath.Join(dir, name+".log")
	lf, err := os.Create(logPath)
	if err != nil {
		return nil, "", err
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdout = lf
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	var stderr io.ReadCloser
	if addrMsg != "" {
		if stderr, err = cmd.StderrPipe(); err != nil {
			lf.Close()
			return nil, "", err
		}
	} else {
		cmd.Stderr = lf
	}
	if err := cmd.Start(); err != nil {
		lf.Close()
		return nil, "", fmt.Errorf("starting %s: %w", name, err)
	}
	p := &proc{name: name, cmd: cmd, log: logPath, done: make(chan struct{})}
	if stderr != nil {
		p.last = []string{}
	}
	addrc := make(chan string, 1)
	var copyDone sync.WaitGroup
	if stderr != nil {
		copyDone.Add(1)
		go func() {
			defer copyDone.Done()
			sc := bufio.NewScanner(stderr)
			sc.Buffer(make([]byte, 64<<10), 1<<20)
			found := false
			written := 0
			for sc.Scan() {
				line := sc.Bytes()
				p.remember(string(line))
				if written < maxLogBytes {
					n, _ := lf.Write(line)
					m, _ := lf.Write([]byte{'\n'})
					written += n + m
				}
				if found {
					continue
				}
				var rec struct {
					Msg  string `json:"msg"`
					Addr string `json:"addr"`
				}
				if json.Unmarshal(line, &rec) == nil && rec.Msg == addrMsg && rec.Addr != "" {
					found = true
					addrc <- rec.Addr
				}
			}
			// Keep draining on a scanner error (an over-long line) so the child never blocks.
			_, _ = io.Copy(io.Discard, stderr)
		}()
	}
	go func() {
		p.err = cmd.Wait()
		copyDone.Wait()
		lf.Close()
		close(p.done)
	}()
	if addrMsg == "" {
		return p, "", nil
	}
	timer := time.NewTimer(60 * time.Second)
	defer timer.Stop()
	select {
	case addr := <-addrc:
		return p, addr, nil
	case <-p.done:
		return nil, "", fmt.Errorf("%s exited before serving (%v); log:\n%s", name, p.err, p.lastLines(20))
	case <-timer.C:
	case <-ctx.Done():
	}
	p.stop(5 * time.Second)
	return nil, "", fmt.Errorf("%s did not log %q within 60s; log:\n%s", name, addrMsg, p.lastLines(20))
}

// stop sends SIGTERM, waits up to grace, then kills. It is safe to call twice.
func (p *proc) stop(grace time.Duration) {
	select {
	case <-p.done:
		return
	default:
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	t := time.NewTimer(grace)
	defer t.Stop()
	select {
	case <-p.done:
	case <-t.C:
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// exited reports whether the process has exited, with its error.
func (p *proc) exited() (bool, error) {
	select {
	case <-p.done:
		return true, p.err
	default:
		return false, nil
	}
}

// rssKiB is the resident set size of pid from /proc/<pid>/status.
func rssKiB(pid int) (int64, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/status")
	if err != nil {
		return 0, err
	}
	for _, line := range strings.Split(string(b), "\n") {
		if rest, ok := strings.CutPrefix(line, "VmRSS:"); ok {
			f := strings.Fields(rest)
			if len(f) == 2 && f[1] == "kB" {
				return strconv.ParseInt(f[0], 10, 64)
			}
		}
	}
	return 0, errors.New("no VmRSS line")
}

// freePort returns a loopback port that was free a moment ago.
func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// startRedis starts a throwaway, persistence-free redis-server on a free loopback port and
// waits until it answers PING.
func startRedis(ctx context.Context, dir string) (*proc, string, error) {
	bin, err := exec.LookPath("redis-server")
	if err != nil {
		return nil, "", fmt.Errorf("redis-server not found (install it, or run with -replicas 1 -redis=false): %w", err)
	}
	var lastErr error
	for attempt := 0; attempt < 3; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, "", err
		}
		p, _, err := startProc(ctx, dir, "redis", "", bin, []string{
			"--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
		}, nil)
		if err != nil {
			return nil, "", err
		}
		addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
		if lastErr = waitPing(ctx, p, addr); lastErr == nil {
			return p, addr, nil
		}
		p.stop(2 * time.Second)
	}
	return nil, "", fmt.Errorf("redis-server did not come up: %w", lastErr)
}

// waitPing polls addr with a RESP PING for up to 10s.
func waitPing(ctx context.Context, p *proc, addr string) error {
	deadline := time.Now().Add(10 * time.Second)
	lastErr := errors.New("not tried")
	for i := 0; i < 200 && time.Now().Before(deadline); i++ {
		if done, err := p.exited(); done {
			return fmt.Errorf("redis-server exited: %v; log:\n%s", err, p.lastLines(10))
		}
		if err := ctx.Err(); err != nil {
			return err
		}
		if lastErr = ping(addr); lastErr == nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("no PONG from %s within 10s: %w", addr, lastErr)
}

// ping sends one RESP PING and expects +PONG.
func ping(addr string) error {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(time.Second)); err != nil {
		return err
	}
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return err
	}
	buf := make([]byte, 7)
	if _, err := io.ReadFull(c, buf); err != nil {
		return err
	}
	if string(buf) != "+PONG\r\n" {
		return fmt.Errorf("unexpected reply %q", buf)
	}
	return nil
}

// tail returns the last n lines of a file, for error messages.
func tail(path string, n int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return err.Error()
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// clockTicks is USER_HZ, the unit of /proc/<pid>/stat times: 100 on every Linux
// architecture Go supports.
const clockTicks = 100

// cpuTime is the user+system CPU time pid has used, from /proc/<pid>/stat.
func cpuTime(pid int) (time.Duration, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	// The command name (field 2) is in parentheses and may contain spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, errors.New("short stat")
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return time.Duration(ut+st) * time.Second / clockTicks, nil
}
