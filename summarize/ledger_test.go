package summarize

import (
	"fmt"
	"strings"
	"testing"
)

func TestHereDocs(t *testing.T) {
	tests := []struct {
		cmd  string
		want string // each here-document's opening line and body, then the command line without the bodies
	}{
		{"cat <<EOF > a.txt\nx\ny\nEOF\nls", "[cat <<EOF > a.txt|x\ny] cat <<EOF > a.txt\nls"},
		{"cat <<'EOF' > a.py\nEOF\necho done", "[cat <<'EOF' > a.py|] cat <<'EOF' > a.py\necho done"},
		{"cat <<A > a\n1\nA\ncat <<\"B\" > b\n2\nB", "[cat <<A > a|1] [cat <<\"B\" > b|2] cat <<A > a\ncat <<\"B\" > b\n"},
		{"cat <<-END > a\n\tx\n\tEND\nls", "[cat <<-END > a|\tx] cat <<-END > a\nls"},
		{"cat <<< word && cat <<E > b\n1\nE", "[cat <<< word && cat <<E > b|1] cat <<< word && cat <<E > b\n"},
		{"cat <<EOF > a\nEOFX\nnever closed", "cat <<EOF > a\nEOFX\nnever closed"},
		{"echo a << b", "echo a << b"},
	}
	for _, tt := range tests {
		var b strings.Builder
		rest, at := "", 0
		for _, h := range hereDocs(tt.cmd) {
			fmt.Fprintf(&b, "[%s|%s] ", h.line, h.body)
			rest += tt.cmd[at:h.lo]
			at = h.hi
		}
		rest += tt.cmd[at:]
		if got := b.String() + rest; got != tt.want {
			t.Errorf("hereDocs(%q) = %q, want %q", tt.cmd, got, tt.want)
		}
	}
}

func TestShellActions(t *testing.T) {
	tests := []struct {
		cmd  string
		want string // "path=action" pairs, in order
	}{
		{"cat src/a.py", "src/a.py=read"},
		{"sed -n 1,20p src/a.py", "src/a.py=read"},
		{"sed -i 's/a/b/' src/a.py && python -m pytest tests/test_a.py -q", "src/a.py=edited tests/test_a.py=tested"},
		{"cd /repo && rm -f build/cache.json; touch notes.md", "/repo/build/cache.json=deleted /repo/notes.md=written"},
		{"cd repo && cat x/y.go", "x/y.go=read"}, // a relative cd cannot be followed
		{"echo hi > out/log.txt", "out/log.txt=written"},
		{"cat <<'EOF' > src/new.rs", "src/new.rs=written"},
		{"grep -rn TODO src/lib.rs | head", "src/lib.rs=searched"},
		{"go test ./pkg/... -run TestX", ""},
		{"cargo test --test it tests/it.rs", "tests/it.rs=tested"},
		{"sudo python3 scripts/migrate.py", "scripts/migrate.py=ran"},
		{"python3 scripts/load.py data/in.csv", "scripts/load.py=ran data/in.csv="}, // the script's input is no script
		{"python3 -m pylint --recursive=y src/gen/about.py", "src/gen/about.py="},   // a module's operands
		{"node -c ./x.js", "./x.js="},
		{"git checkout -- src/a.py", "src/a.py=edited"},
		{"ls", ""},
		{"python3 - < scripts/fix.py", "scripts/fix.py=read"},
		{"grep -n 'src/x.go' docs/notes.md", "docs/notes.md=searched"},
		{"sed -e 's/a/b/' -i src/a.py", "src/a.py=edited"},
		// A here-document's body is what it writes, not commands: manage.py is not run, and
		// rm in the body deletes nothing; the command after the delimiter is read again.
		{"cat <<'EOF' > run.sh\npython manage.py migrate\nrm -rf build/x.txt\nEOF\nchmod +x run.sh && ./run.sh", "run.sh=written run.sh= ./run.sh=ran"},
		{"cat <<-END >notes.md\n\tsee src/a.py\n\tEND\ncat src/b.py", "notes.md=written src/b.py=read"},
		{"./scripts/check.sh src/a.py", "./scripts/check.sh=ran src/a.py="},
		{"/usr/bin/env python3 run.py", "run.py=ran"},
		{".venv/bin/python -m pytest tests/test_a.py", "tests/test_a.py=tested"},                                       // an interpreter is no file of the work
		{"cat <<EOF > a.py\r\nrm -rf build/x.txt\r\nEOF\r\npython a.py", "a.py=written a.py=ran"},                      // CRLF line ends
		{"cat <<\\EOF > a.sh\nrm -rf build/x.txt\nEOF\nbash a.sh", "a.sh=written a.sh=ran"},                            // <<\EOF is EOF
		{"python -c 'print(1<<3)' && cat <<'EOF' > a.sh\nrm -rf build/x.txt\nEOF\nbash a.sh", "a.sh=written a.sh=ran"}, // a shift is no here-document
		{"grep -n \"<<\" src/lex.py && cat <<'EOF' > t.sh\nrm -rf build/x.txt\nEOF", "src/lex.py=searched t.sh=written"},
	}
	for _, tt := range tests {
		var got []string
		shellActions(tt.cmd, func(path, action string) { got = append(got, path+"="+action) })
		if g := strings.Join(got, " "); g != tt.want {
			t.Errorf("shellActions(%q) = %q, want %q", tt.cmd, g, tt.want)
		}
	}
}

func TestToolAction(t *testing.T) {
	tests := []struct{ tool, command, want string }{
		{"str_replace_editor", "view", actRead},
		{"str_replace_editor", "create", actCreate},
		{"str_replace_editor", "str_replace", actEdit},
		{"Read", "", actRead},
		{"Edit", "", actEdit},
		{"MultiEdit", "", actEdit},
		{"Write", "", actWrite},
		{"Glob", "", actSearch},
		{"delete_file", "", actDelete},
		{"open", "", actRead},
		{"get_reservation_details", "", actRead},
		{"transfer_to_human_agents", "", actMention},
	}
	for _, tt := range tests {
		if got := toolAction(tt.tool, tt.command); got != tt.want {
			t.Errorf("toolAction(%q, %q) = %q, want %q", tt.tool, tt.command, got, tt.want)
		}
	}
}

func TestLedgerLine(t *testing.T) {
	var l ledger
	for i, a := range []string{actEdit, actRead, actEdit, actEdit + failedSuffix, actMention, actTest} {
		l.note("src/a.go", a, i)
	}
	if got, want := l.files["src/a.go"].line(""), "- src/a.go: read, edited ×2, edited (failed), tested"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	// What was done comes after the actions, as a statement.
	if got, want := l.files["src/a.go"].line("last edit wrote `def f(x):`"),
		"- src/a.go: read, edited ×2, edited (failed), tested; last edit wrote `def f(x):`"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
	// A file only named says so: a ledger line always says what was done.
	l.note("docs/x.md", actMention, 9)
	if got, want := l.files["docs/x.md"].line(""), "- docs/x.md: named"; got != want {
		t.Errorf("line = %q, want %q", got, want)
	}
}

// TestLedgerLineWithPrior: a file an earlier summary stated is one line, its actions and
// this range's counted together (words of another form kept before them), and one detail: what the range's last edit wrote, else what the earlier
// summary said was last written while the range did not change the file again.
func TestLedgerLineWithPrior(t *testing.T) {
	prior := "read ×2, edited; last edit wrote `x = 1`; then `python t.py` → ok"
	tests := []struct {
		name   string
		acts   map[string]int
		detail string
		want   string
	}{
		{"read again", map[string]int{actRead: 1}, "", "- a.py: read ×3, edited; last edit wrote `x = 1`; then `python t.py` → ok"},
		{"edited again, shown", map[string]int{actEdit: 2}, "last edit wrote `x = 2`", "- a.py: read ×2, edited ×3; last edit wrote `x = 2`"},
		{"edited again, short", map[string]int{actEdit: 1}, "", "- a.py: read ×2, edited ×2"},
		{"a failed edit changes nothing", map[string]int{actEdit + failedSuffix: 1}, "", "- a.py: read ×2, edited, edited (failed); last edit wrote `x = 1`; then `python t.py` → ok"},
	}
	other := []struct {
		prior string
		acts  map[string]int
		want  string
	}{
		{"read, then edited `parseExpr`", map[string]int{actRead: 1}, "- a.py: read, then edited `parseExpr`, read"},
		{"read ×x", map[string]int{actRead: 1}, "- a.py: read ×x, read"},
	}
	for _, tt := range other {
		f := &ledgerFile{path: "a.py", acts: tt.acts, prior: tt.prior}
		if got := f.line(""); got != tt.want {
			t.Errorf("with prior %q: line = %q, want %q", tt.prior, got, tt.want)
		}
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &ledgerFile{path: "a.py", acts: tt.acts, prior: prior}
			if got := f.line(tt.detail); got != tt.want {
				t.Errorf("line(%q) = %q, want %q", tt.detail, got, tt.want)
			}
		})
	}
}

func TestFilePath(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"./run.sh", "run.sh"},
		{"././x.py", "x.py"},
		{"/Users/u/repo/tests/./missing_colon.py", "/Users/u/repo/tests/missing_colon.py"},
		{"src//lib/a.go", "src/lib/a.go"},
		{"../x.py", "../x.py"},
		{"src/a.py", "src/a.py"},
	} {
		if got := filePath(tt.in); got != tt.want {
			t.Errorf("filePath(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
