package summarize

import (
	"fmt"
	"path"
	"slices"
	"sort"
	"strconv"
	"strings"

	"github.com/compactord/compactord/engine"
)

// File actions the ledger records, in the order a line lists them.
const (
	actRead    = "read"
	actSearch  = "searched"
	actCreate  = "created"
	actWrite   = "written"
	actEdit    = "edited"
	actDelete  = "deleted"
	actRun     = "ran"
	actTest    = "tested"
	actMention = "" // named, nothing done to it
)

// What a ledger line says of a file only named: namedNotOpened when the range is all there
// was (nothing was done to it), namedOnly when an earlier summary may have said more (the
// summary check's list of the paths a summarized part named, which says nothing of what
// was done to them). Either gives way to what the range does to the file.
const (
	namedNotOpened = "named, not opened"
	namedOnly      = "named"
)

// failedSuffix marks an action whose call failed: "edited (failed)".
const failedSuffix = " (failed)"

var actOrder = map[string]int{actRead: 1, actSearch: 2, actCreate: 3, actWrite: 4, actEdit: 5, actDelete: 6, actRun: 7, actTest: 8}

// ledger records the files of a conversation and what the agent did to each, taken from its
// tool calls and shell commands: the next turn needs to know that a file was edited, not
// just that it was named.
type ledger struct {
	files map[string]*ledgerFile
	// One file under two names (Claude Code's tools write /home/u/proj/assets/app.js, git
	// and the agent's prose assets/app.js or app.js) is one ledger line, under the longer
	// name: alias maps a shorter name to it; byBase lists the names filed, by base name.
	alias  map[string]string
	byBase map[string][]string
}

// maxSameBase bounds the names of one base name that a new name is compared with: beyond
// it (many files called __init__.py), names are not merged.
const maxSameBase = 16

type ledgerFile struct {
	path  string
	first int            // the first time it was named or acted on
	seq   int            // the last time
	acts  map[string]int // action → times
	prior string         // actions an earlier summary listed, kept verbatim
	// priorCites are the citations of the earlier summary's line, kept at the end of its own.
	priorCites []engine.Citation
}

// note records action (actMention for a bare mention) on path at seq and returns the file's
// entry. A mention of a program (programPath) names no file of the work and is not recorded
// (nil). A name that is the end of exactly one name filed ("app.js", "assets/app.js" after
// "/home/u/proj/assets/app.js") is that file; a name that exactly one name filed is the end
// of takes that file over.
func (l *ledger) note(path, action string, seq int) *ledgerFile {
	path = l.key(path)
	if action == actMention && programPath(path) {
		return nil
	}
	if l.files == nil {
		l.files, l.alias, l.byBase = map[string]*ledgerFile{}, map[string]string{}, map[string][]string{}
	}
	f := l.files[path]
	if f == nil {
		if k := l.longer(path); k != "" {
			l.alias[path] = k
			f = l.files[k]
		} else {
			f = &ledgerFile{path: path, acts: map[string]int{}, first: seq}
			l.files[path] = f
			l.absorb(f)
			b := pathBase(path)
			l.byBase[b] = append(l.byBase[b], path)
		}
	}
	f.seq = seq
	if action != actMention {
		f.acts[action]++
	}
	return f
}

// line renders f as "- path: read ×2, edited; detail": each action with its count, then
// detail (what was done, when not "").
func (f *ledgerFile) line(detail string) string {
	prior, priorDetail, _ := strings.Cut(f.prior, "; ")
	if (prior == namedNotOpened || prior == namedOnly) && len(f.acts) > 0 {
		prior = "" // what the range did to it says more
	}
	counts := f.acts
	if n, ok := actCounts(prior); ok {
		// The earlier summary's actions and the range's, counted once each.
		counts, prior = n, ""
		for a, k := range f.acts {
			counts[a] += k
		}
	}
	acts := make([]string, 0, len(counts))
	for a := range counts {
		acts = append(acts, a)
	}
	order := func(a string) int {
		if b, ok := strings.CutSuffix(a, failedSuffix); ok {
			return 2*actOrder[b] + 1
		}
		return 2 * actOrder[a]
	}
	sort.Slice(acts, func(i, j int) bool { return order(acts[i]) < order(acts[j]) })
	words := make([]string, 0, len(acts)+1)
	if prior != "" {
		words = append(words, prior)
	}
	for _, a := range acts {
		w := a
		if n := counts[a]; n > 1 {
			w = fmt.Sprintf("%s ×%d", a, n)
		}
		words = append(words, w)
	}
	line := "- " + f.path + ": " + strings.Join(words, ", ")
	if len(words) == 0 {
		line = "- " + f.path + ": named"
	}
	switch {
	case detail != "":
		line += "; " + detail
	case priorDetail != "" && !f.changedHere():
		// What the earlier summary said was last written to it still holds; an edit in
		// this range supersedes it.
		line += "; " + priorDetail
	}
	return line
}

// key returns the name the ledger files path under: path as filePath writes it, or the
// longer name of the same file it was merged into (each alias leads to a longer name, so
// the walk ends).
func (l *ledger) key(path string) string {
	path = filePath(path)
	for {
		k, ok := l.alias[path]
		if !ok {
			return path
		}
		path = k
	}
}

// pathBase is a name's last element.
func pathBase(p string) string { return p[strings.LastIndexByte(p, '/')+1:] }

// longer returns the one name filed that ends with "/"+p, or "" (none, or more than one).
func (l *ledger) longer(p string) string {
	if n, found := l.endings(p); n == 1 {
		return found
	}
	return ""
}

// endings counts the names filed that end with "/"+p (at most maxSameBase are read: more
// count as many) and returns the last of them.
func (l *ledger) endings(p string) (n int, last string) {
	names := l.byBase[pathBase(p)]
	if len(names) > maxSameBase {
		return len(names), ""
	}
	for _, name := range names {
		if strings.HasSuffix(name, "/"+p) {
			n, last = n+1, name
		}
	}
	return n, last
}

// absorb merges into f, just filed, each name filed before that f's name ends with and that
// is the end of no other name: the same file, named shorter before.
func (l *ledger) absorb(f *ledgerFile) {
	b := pathBase(f.path)
	names := l.byBase[b]
	if len(names) > maxSameBase {
		return
	}
	kept := names[:0:0]
	for _, n := range names {
		if k, _ := l.endings(n); !strings.HasSuffix(f.path, "/"+n) || k > 0 {
			kept = append(kept, n)
			continue
		}
		g := l.files[n]
		delete(l.files, n)
		l.alias[n] = f.path // (the names merged into n before follow on to f: key)
		f.first = min(f.first, g.first)
		f.seq = max(f.seq, g.seq)
		for a, k := range g.acts {
			f.acts[a] += k
		}
		if f.prior == "" {
			f.prior, f.priorCites = g.prior, g.priorCites
		}
	}
	l.byBase[b] = kept
}

// filePath is path as the ledger keys it: "./x" names the file x, and tests/./x.py and
// a//b the files tests/x.py and a/b.
func filePath(p string) string {
	for len(p) > len("./") && strings.HasPrefix(p, "./") {
		p = p[len("./"):]
	}
	if strings.Contains(p, "/./") || strings.Contains(p, "//") {
		p = path.Clean(p)
	}
	return p
}

// programPath reports whether path is a program's: under a bin/ or sbin/ directory (a
// script's #!/bin/bash, /usr/bin/env, .venv/bin/python), it names the program that runs the
// work, not a file of it.
func programPath(path string) bool {
	p := "/" + path
	return strings.Contains(p, "/bin/") || strings.Contains(p, "/sbin/")
}

// actCounts reads the actions of a ledger line as line writes them ("read ×2, edited"),
// each with its count; ok is false when a part is not one (an LLM's words about the file).
func actCounts(s string) (counts map[string]int, ok bool) {
	if s == "" {
		return nil, false
	}
	counts = map[string]int{}
	for _, p := range strings.Split(s, ", ") {
		a, n := p, 1
		if i := strings.LastIndex(p, " ×"); i > 0 {
			k, err := strconv.Atoi(p[i+len(" ×"):])
			if err != nil || k < 1 {
				return nil, false
			}
			a, n = p[:i], k
		}
		if _, known := actOrder[strings.TrimSuffix(a, failedSuffix)]; !known {
			return nil, false
		}
		counts[a] += n
	}
	return counts, true
}

// changedHere reports whether the agent changed the file in the range being summarized
// (not only before it, as an earlier summary says).
func (f *ledgerFile) changedHere() bool {
	for _, a := range []string{actCreate, actWrite, actEdit, actDelete} {
		if f.acts[a] > 0 {
			return true
		}
	}
	return false
}

// changed reports whether the agent changed the file: created, wrote, edited or deleted it.
func (f *ledgerFile) changed() bool {
	return f.changedHere() || strings.Contains(f.prior, actEdit) || strings.Contains(f.prior, actCreate)
}

// toolAction is what a structured tool call does to the file it names, from the tool's name
// and its "command" argument (SWE-agent's str_replace_editor: view, create, str_replace, …).
func toolAction(tool, command string) string {
	switch strings.ToLower(command) {
	case "view":
		return actRead
	case "create":
		return actCreate
	case "str_replace", "insert", "undo_edit", "edit":
		return actEdit
	}
	words := nameWords(tool)
	for _, r := range []struct {
		words  []string
		action string
	}{
		{[]string{"delete", "remove", "unlink"}, actDelete},
		{[]string{"edit", "replace", "patch", "insert", "update", "modify"}, actEdit},
		{[]string{"write", "create", "save"}, actWrite},
		{[]string{"grep", "search", "glob", "find", "list", "ls"}, actSearch},
		{[]string{"read", "view", "open", "cat", "show", "get"}, actRead},
		{[]string{"test"}, actTest},
	} {
		for _, w := range r.words {
			for _, tw := range words {
				if strings.HasPrefix(tw, w) {
					return r.action
				}
			}
		}
	}
	return actMention
}

// nameWords splits a tool name into lower-case words: "MultiEdit" → multi, edit;
// "read_file" → read, file.
func nameWords(name string) []string {
	var words []string
	start := 0
	for i := 1; i <= len(name); i++ {
		if i == len(name) || name[i] == '_' || name[i] == '-' || name[i] == '.' ||
			name[i] >= 'A' && name[i] <= 'Z' && name[i-1] >= 'a' && name[i-1] <= 'z' {
			if w := strings.Trim(name[start:i], "_-."); w != "" {
				words = append(words, strings.ToLower(w))
			}
			start = i
		}
	}
	return words
}

// shellActions calls note for every file a shell command line acts on: cat/head read it,
// sed -i edits it, rm deletes it, "> file" writes it, pytest and go test test it, python runs
// it. Commands are split at ;, &&, || and |; quoting is honoured only as far as word
// boundaries go, which is enough for the commands agents write. After "cd /abs/dir",
// relative paths are noted under that directory.
func shellActions(cmdline string, note func(path, action string)) {
	dir := ""
	at := func(p string) string {
		if dir == "" || strings.HasPrefix(p, "/") || strings.HasPrefix(p, "~") {
			return p
		}
		return path.Join(dir, p)
	}
	for _, simple := range splitShell(cmdline) {
		words := strings.Fields(simple)
		if len(words) == 0 {
			continue
		}
		if words[0] == "cd" {
			if len(words) == 2 && strings.HasPrefix(words[1], "/") {
				dir = path.Clean(strings.Trim(words[1], `"'`))
			} else {
				dir = "" // somewhere this cannot follow
			}
			continue
		}
		// Skip leading assignments, sudo, env, time, cd …: the command is the first other word.
		for len(words) > 1 && (strings.Contains(words[0], "=") || words[0] == "sudo" || pathBase(words[0]) == "env" || words[0] == "time") {
			words = words[1:]
		}
		action := shellAction(words)
		if w := words[0]; engine.IsPathLike(w) && !programPath(w) {
			note(at(w), actRun) // ./run.sh runs the script it names
		}
		name := pathBase(words[0])
		skipScript := scriptFirst[name]
		// An interpreter runs its first operand, the script; what follows is the script's
		// input, and with -m or -c (a module, code) no operand is a script.
		interp := action == actRun && interpreters[name]
		script := interp && !slices.Contains(words[1:], "-m") && !slices.Contains(words[1:], "-c")
		for i := 1; i < len(words); i++ {
			w := strings.Trim(words[i], `"'`)
			quoted := w != words[i] // "<<" is grep's pattern, not a redirection
			switch {
			case !quoted && strings.HasPrefix(w, ">"):
				// A redirection writes its target: ">f", "> f", ">>f".
				t := strings.TrimLeft(w, ">&12")
				if t == "" && i+1 < len(words) {
					i++
					t = strings.Trim(words[i], `"'`)
				}
				if engine.IsPathLike(t) {
					note(at(t), actWrite)
				}
			case !quoted && strings.HasPrefix(w, "<"):
				if w == "<" && i+1 < len(words) { // "< f" reads f
					i++
					if t := strings.Trim(words[i], `"'`); engine.IsPathLike(t) {
						note(at(t), actRead)
					}
				}
			case strings.HasPrefix(w, "-"):
				if skipScript && (words[i] == "-e" || words[i] == "-f") {
					skipScript = false
					i++ // the script or pattern follows the flag
				}
			case skipScript:
				skipScript = false // sed's script, grep's pattern: not a file
			case engine.IsPathLike(w) && interp:
				if script {
					note(at(w), actRun)
				} else {
					note(at(w), actMention)
				}
				script = false
			case engine.IsPathLike(w):
				note(at(w), action)
			}
		}
	}
}

// interpreters are the commands that run a script named as their first operand.
var interpreters = map[string]bool{"python": true, "python3": true, "node": true, "ruby": true, "bash": true, "sh": true, "deno": true, "bun": true}

// scriptFirst are the commands whose first operand is a script or pattern, not a file.
var scriptFirst = map[string]bool{"sed": true, "perl": true, "awk": true, "grep": true, "rg": true, "ag": true}

// shellAction is what the command words[0] does to the files among its arguments.
func shellAction(words []string) string {
	name := pathBase(words[0])
	has := func(flag string) bool {
		for _, w := range words[1:] {
			if w == flag || strings.HasPrefix(w, flag) && strings.HasPrefix(flag, "-i") {
				return true
			}
		}
		return false
	}
	switch name {
	case "cat", "head", "tail", "less", "more", "nl", "wc", "diff", "file", "stat", "bat":
		return actRead
	case "grep", "rg", "ag", "find", "ls", "tree", "fd":
		return actSearch
	case "sed", "perl":
		if has("-i") {
			return actEdit
		}
		return actRead
	case "patch", "ed", "apply_patch":
		return actEdit
	case "git":
		if len(words) > 1 && (words[1] == "apply" || words[1] == "checkout" || words[1] == "restore") {
			return actEdit
		}
	case "rm", "unlink", "rmdir":
		return actDelete
	case "touch", "mkdir", "cp", "mv", "tee":
		return actWrite
	case "pytest", "tox", "nox", "jest", "vitest", "mocha", "rspec", "phpunit":
		return actTest
	case "go", "cargo", "npm", "yarn", "pnpm", "make", "dotnet", "mvn", "gradle":
		for _, w := range words[1:] {
			if w == "test" || w == "check" || w == "vet" {
				return actTest
			}
		}
		return actRun
	}
	if interpreters[name] {
		for i, w := range words[1:] {
			if w == "-m" && i+2 < len(words) && (words[i+2] == "pytest" || words[i+2] == "unittest") {
				return actTest
			}
		}
		return actRun
	}
	return actMention
}

// splitShell splits a command line into simple commands at newlines, ;, &&, || and |; the
// body of a here-document is the text it writes, not commands.
func splitShell(s string) []string {
	if docs := hereDocs(s); len(docs) > 0 {
		var b strings.Builder
		at := 0
		for _, h := range docs {
			b.WriteString(s[at:h.lo])
			at = h.hi
		}
		b.WriteString(s[at:])
		s = b.String()
	}
	return strings.FieldsFunc(strings.NewReplacer("&&", "\n", "||", "\n", ";", "\n", "|", "\n").Replace(s),
		func(r rune) bool { return r == '\n' })
}

// patchActions notes the files of an apply_patch body (Codex): "*** Update File: p",
// "*** Add File: p", "*** Delete File: p".
func patchActions(patch string, note func(path, action string)) {
	for _, line := range strings.Split(patch, "\n") {
		for prefix, action := range map[string]string{"*** Update File: ": actEdit, "*** Add File: ": actCreate, "*** Delete File: ": actDelete} {
			if p, ok := strings.CutPrefix(strings.TrimSpace(line), prefix); ok {
				note(strings.TrimSpace(p), action)
			}
		}
	}
}
