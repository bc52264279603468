package metrics

import (
	"go/parser"
	"go/token"
	"regexp"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

// registering records every collector registered through it.
type registering struct {
	*prometheus.Registry
	collectors []prometheus.Collector
}

func (r *registering) Register(c prometheus.Collector) error {
	r.collectors = append(r.collectors, c)
	return r.Registry.Register(c)
}

func (r *registering) MustRegister(cs ...prometheus.Collector) {
	r.collectors = append(r.collectors, cs...)
	r.Registry.MustRegister(cs...)
}

var fqName = regexp.MustCompile(`fqName: "([^"]+)"`)

// TestDocNamesEverySeries: the package doc lists every series New registers (the Go runtime
// and process ones as go_* and process_*), whether or not it has a value yet.
func TestDocNamesEverySeries(t *testing.T) {
	f, err := parser.ParseFile(token.NewFileSet(), "metrics.go", nil, parser.ParseComments|parser.PackageClauseOnly)
	if err != nil {
		t.Fatal(err)
	}
	doc := f.Doc.Text()
	reg := &registering{Registry: prometheus.NewRegistry()}
	New(reg)
	names := map[string]bool{}
	for _, c := range reg.collectors {
		ch := make(chan *prometheus.Desc, 64)
		go func() { c.Describe(ch); close(ch) }()
		for d := range ch {
			m := fqName.FindStringSubmatch(d.String())
			if m == nil {
				t.Fatalf("cannot read the name of %v", d)
			}
			names[m[1]] = true
		}
	}
	if len(names) < 20 {
		t.Fatalf("only %d series registered: %v", len(names), names)
	}
	for name := range names {
		listed := name
		for _, p := range []string{"go_", "process_"} {
			if strings.HasPrefix(name, p) {
				listed = p + "*"
			}
		}
		if !regexp.MustCompile(`(^|[^\w*])` + regexp.QuoteMeta(listed) + `($|[^\w*])`).MatchString(doc) {
			t.Errorf("the package doc does not name %s", listed)
		}
	}
}
