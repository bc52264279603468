// Command run does what the README tells a newcomer to do, as the newcomer would: in a
// throwaway copy of the repository, it runs every "run: setup" block (with the network),
// then the quick start: the "run: server" block in the background, then every "run" block
// and every sh example, in README order, on loopback alone. It fails on the first block that
// fails, and when the steps leave a file that .gitignore does not cover (or change a tracked
// one). CI runs it (.ci/run):
//
//	go run ./internal/readme/run [-keep]
//
// The copy gets its own HOME and GOPATH (the module and build caches are shared, so nothing
// is downloaded twice); when the process may create a network namespace (unshare), the quick
// start runs in one with only a loopback interface, so the README's fixed ports never meet
// another process's. Nothing stands in for a missing sudo: as root on a fresh Debian image,
// which has none, the set-up must work without it.
package main

import (
	"errors"
	"flag"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/compactord/compactord/internal/readme"
)

// serverAddr is where the quick start's server listens: compactord's default without
// authentication.
const serverAddr = "127.0.0.1:50051"

func main() {
	keep := flag.Bool("keep", false, "keep the throwaway copy (its path is printed)")
	flag.Parse()
	if err := run(*keep); err != nil {
		fmt.Fprintln(os.Stderr, "readme run:", err)
		os.Exit(1)
	}
}

func run(keep bool) error {
	text, err := os.ReadFile("README.md")
	if err != nil {
		return fmt.Errorf("run it from the repository root: %w", err)
	}
	setup, quick, err := scripts(readme.Blocks(string(text)))
	if err != nil {
		return err
	}
	work, err := os.MkdirTemp("", "compactord-readme-")
	if err != nil {
		return err
	}
	if keep {
		fmt.Println("readme run: the copy stays in", work)
	} else {
		defer os.RemoveAll(work)
	}
	repo := filepath.Join(work, "compactord")
	if err := copyRepo(repo); err != nil {
		return err
	}
	snap := filepath.Join(work, "snapshot.git")
	if err := snapshot(repo, snap); err != nil {
		return err
	}
	env, err := environment(work)
	if err != nil {
		return err
	}
	for name, s := range map[string]string{"setup.sh": setup, "quickstart.sh": quick} {
		if err := os.WriteFile(filepath.Join(work, name), []byte(s), 0o644); err != nil {
			return err
		}
	}

	fmt.Println("readme run: set-up blocks, in", repo)
	if err := bash(repo, env, nil, filepath.Join(work, "setup.sh")); err != nil {
		return fmt.Errorf("set up: %w", err)
	}
	fmt.Println("readme run: quick start")
	if err := bash(repo, env, isolation(), filepath.Join(work, "quickstart.sh")); err != nil {
		return fmt.Errorf("quick start: %w", err)
	}
	return leftovers(repo, snap)
}

// scripts turns the runnable blocks into the set-up script and the quick-start script.
// Every block is announced with its README line; the server block runs in the background
// until the script exits, and the steps start once it accepts connections.
func scripts(blocks []readme.Block) (setup, quick string, err error) {
	const head = "set -euo pipefail\n"
	var s, q strings.Builder
	s.WriteString(head)
	q.WriteString(head + "source ../setup.env\n")
	servers := 0
	for _, b := range blocks {
		if !b.Runnable() {
			continue
		}
		announce := fmt.Sprintf("echo %q\n", fmt.Sprintf("--- README.md:%d (%s)", b.Line, b.Marker))
		switch b.Marker {
		case readme.Setup:
			s.WriteString(announce + b.Text)
		case readme.Server:
			cmd := command(b.Text)
			if cmd == "" || strings.Contains(cmd, "\n") {
				return "", "", fmt.Errorf("README.md:%d: a server block is one command", b.Line)
			}
			servers++
			host, port, _ := net.SplitHostPort(serverAddr)
			fmt.Fprintf(&q, `%s(exec %s) >../server.log 2>&1 &
server=$!
trap 'kill $server 2>/dev/null; wait $server 2>/dev/null || true' EXIT
for _ in $(seq 600); do
  (exec 3<>/dev/tcp/%s/%s) 2>/dev/null && break
  kill -0 $server 2>/dev/null || { cat ../server.log; echo "the server exited"; exit 1; }
  sleep 0.1
done
(exec 3<>/dev/tcp/%s/%s) 2>/dev/null || { cat ../server.log; echo "the server is not listening on %s"; exit 1; }
`, announce, cmd, host, port, host, port, serverAddr)
		default:
			if servers == 0 {
				return "", "", fmt.Errorf("README.md:%d: a quick-start step before the server block", b.Line)
			}
			q.WriteString(announce + b.Text)
		}
	}
	if servers != 1 {
		return "", "", fmt.Errorf("the README has %d server blocks, want 1", servers)
	}
	// The quick start's terminals have the PATH the set-up exported (the README says so).
	s.WriteString("declare -p PATH >../setup.env\n")
	return s.String(), q.String(), nil
}

// command is a block's command without its comment lines and trailing comments' lines.
func command(text string) string {
	var lines []string
	for _, l := range strings.Split(strings.TrimSpace(text), "\n") {
		if l = strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "#") {
			lines = append(lines, l)
		}
	}
	return strings.Join(lines, "\n")
}

// copyRepo copies the files git knows (tracked, and untracked but not ignored) into dst, as
// a fresh clone of this tree would have them.
func copyRepo(dst string) error {
	out, err := exec.Command("git", "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
	if err != nil {
		return fmt.Errorf("git ls-files: %w", err)
	}
	for _, name := range strings.Split(strings.TrimSuffix(string(out), "\x00"), "\x00") {
		st, err := os.Lstat(name)
		if errors.Is(err, fs.ErrNotExist) {
			continue // deleted in the work tree
		}
		if err != nil {
			return err
		}
		to := filepath.Join(dst, name)
		if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
			return err
		}
		if st.Mode()&fs.ModeSymlink != 0 {
			link, err := os.Readlink(name)
			if err == nil {
				err = os.Symlink(link, to)
			}
			if err != nil {
				return err
			}
			continue
		}
		b, err := os.ReadFile(name)
		if err == nil {
			err = os.WriteFile(to, b, st.Mode().Perm())
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// snapshot commits the copy into a git directory outside it (the copy itself has no .git,
// as an exported tree), so that leftovers can ask git what the steps created.
func snapshot(repo, gitDir string) error {
	for _, args := range [][]string{
		{"init", "-q"},
		{"add", "-A"},
		{"-c", "user.name=readme", "-c", "user.email=readme@localhost", "commit", "-q", "-m", "fresh copy"},
	} {
		if out, err := git(repo, gitDir, args...).CombinedOutput(); err != nil {
			return fmt.Errorf("git %s: %v\n%s", args[len(args)-1], err, out)
		}
	}
	return nil
}

// git is a git command on the work tree repo with its repository in gitDir.
func git(repo, gitDir string, args ...string) *exec.Cmd {
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir, "--work-tree=" + repo}, args...)...)
	cmd.Dir = repo
	return cmd
}

// leftovers fails when the steps left files .gitignore does not cover, or changed tracked
// ones: a newcomer's `git status` must stay clean.
func leftovers(repo, gitDir string) error {
	out, err := git(repo, gitDir, "status", "--porcelain", "--untracked-files=all").Output()
	if err != nil {
		return fmt.Errorf("git status: %w", err)
	}
	if s := strings.TrimSpace(string(out)); s != "" {
		return fmt.Errorf("the README's steps left files .gitignore does not cover, or changed tracked ones:\n%s", s)
	}
	fmt.Println("readme run: every block ran; git status is clean")
	return nil
}

// environment is the newcomer's: a fresh HOME and GOPATH (sharing the module and build
// caches), no GOBIN and none of compactord's variables.
func environment(work string) ([]string, error) {
	var env []string
	for _, kv := range os.Environ() {
		k, _, _ := strings.Cut(kv, "=")
		switch {
		case k == "HOME", k == "GOPATH", k == "GOBIN", k == "GOMODCACHE", k == "GOCACHE", k == "CI",
			k == "REDIS_URL", strings.HasPrefix(k, "COMPACTORD_"), strings.HasPrefix(k, "VIRTUAL_ENV"):
			continue
		}
		env = append(env, kv)
	}
	goEnv := func(name string) (string, error) {
		out, err := exec.Command("go", "env", name).Output()
		return strings.TrimSpace(string(out)), err
	}
	modcache, err := goEnv("GOMODCACHE")
	if err != nil {
		return nil, err
	}
	gocache, err := goEnv("GOCACHE")
	if err != nil {
		return nil, err
	}
	home := filepath.Join(work, "home")
	if err := os.MkdirAll(home, 0o755); err != nil {
		return nil, err
	}
	return append(env, "HOME="+home, "GOPATH="+filepath.Join(work, "gopath"), "GOMODCACHE="+modcache,
		"GOCACHE="+gocache, "DEBIAN_FRONTEND=noninteractive"), nil
}

// isolation is the command prefix that runs the quick start in a network namespace of its
// own (loopback only), or nil when this process may not create one; then the README's ports
// must be free.
func isolation() []string {
	prefix := []string{"unshare", "--net"}
	if os.Geteuid() != 0 {
		prefix = append(prefix, "--map-root-user")
	}
	probe := exec.Command(prefix[0], append(prefix[1:], "ip", "link", "set", "lo", "up")...)
	if probe.Run() == nil {
		return append(prefix, "sh", "-c", `ip link set lo up && exec "$0" "$@"`)
	}
	return nil
}

// bash runs script in dir with env, under prefix (see isolation), streaming its output.
func bash(dir string, env, prefix []string, script string) error {
	if prefix == nil && strings.HasSuffix(script, "quickstart.sh") {
		if c, err := net.DialTimeout("tcp", serverAddr, time.Second); err == nil {
			c.Close()
			return fmt.Errorf("%s is taken and no network namespace is available: stop what listens there", serverAddr)
		}
	}
	args := append(append([]string{}, prefix...), "bash", script)
	cmd := exec.Command(args[0], args[1:]...)
	cmd.Dir, cmd.Env = dir, env
	cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
	return cmd.Run()
}
