package kubectlelasti

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"reflect"
	"strings"

	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/cli-runtime/pkg/printers"
	"k8s.io/client-go/util/jsonpath"
)

// customColumnsPrinter is -o custom-columns=HEADER:PATH,...: kubectl's
// format (k8s.io/kubectl's printer, which would bring in all of kubectl),
// each PATH a JSONPath into one Summary, with or without braces and the
// leading dot, as kubectl takes them.
type customColumnsPrinter struct {
	headers []string
	paths   []*jsonpath.JSONPath
}

// maxColumns bounds the columns of one spec.
const maxColumns = 64

func newCustomColumnsPrinter(spec string) (*customColumnsPrinter, error) {
	if spec == "" {
		return nil, fmt.Errorf("custom-columns format specified but no custom columns given")
	}
	parts := strings.Split(spec, ",")
	if len(parts) > maxColumns {
		return nil, fmt.Errorf("custom-columns: %d columns, at most %d", len(parts), maxColumns)
	}
	p := &customColumnsPrinter{}
	for _, part := range parts {
		header, path, ok := strings.Cut(part, ":")
		if !ok || header == "" || path == "" {
			return nil, fmt.Errorf("unexpected custom-columns spec: %s, expected <header>:<json-path-expr>", part)
		}
		jp := jsonpath.New(header).AllowMissingKeys(true)
		if err := jp.Parse(relaxedJSONPath(path)); err != nil {
			return nil, fmt.Errorf("custom-columns %s: %v", header, err)
		}
		p.headers = append(p.headers, header)
		p.paths = append(p.paths, jp)
	}
	return p, nil
}

// relaxedJSONPath is path in braces with a leading dot: "name", ".name",
// "{name}" and "{.name}" all read field name, as in kubectl.
func relaxedJSONPath(path string) string {
	path = strings.TrimSpace(path)
	if strings.HasPrefix(path, "{") && strings.HasSuffix(path, "}") {
		path = path[1 : len(path)-1]
	}
	return "{." + strings.TrimPrefix(path, ".") + "}"
}

// PrintObj prints a SummaryList, or one Summary, with the header.
func (p *customColumnsPrinter) PrintObj(obj runtime.Object, w io.Writer) error {
	switch o := obj.(type) {
	case *SummaryList:
		return p.printFlushed(w, o.Items)
	case *Summary:
		return p.printFlushed(w, []Summary{*o})
	}
	return fmt.Errorf("custom-columns: cannot print %T", obj)
}

func (p *customColumnsPrinter) printFlushed(w io.Writer, summaries []Summary) error {
	tw := printers.GetNewTabWriter(w)
	if err := p.print(tw, summaries, true); err != nil {
		return err
	}
	return tw.Flush()
}

// print writes one row per summary to tw, under the header if header; it
// does not flush tw.
func (p *customColumnsPrinter) print(tw io.Writer, summaries []Summary, header bool) error {
	if header {
		fmt.Fprintln(tw, strings.Join(p.headers, "\t"))
	}
	for i := range summaries {
		// JSONPath reads what -o json prints: the JSON form.
		raw, err := json.Marshal(&summaries[i])
		if err != nil {
			return err
		}
		var data any
		if err := json.Unmarshal(raw, &data); err != nil {
			return err
		}
		cells := make([]string, len(p.paths))
		for j, jp := range p.paths {
			results, err := jp.FindResults(data)
			if err != nil {
				return err
			}
			var values []string
			for _, r := range results {
				for _, v := range r {
					var b bytes.Buffer
					if err := jp.PrintResults(&b, []reflect.Value{v}); err != nil {
						return err
					}
					values = append(values, b.String())
				}
			}
			cells[j] = "<none>"
			if len(values) > 0 {
				cells[j] = strings.Join(values, ",")
			}
		}
		fmt.Fprintln(tw, strings.Join(cells, "\t"))
	}
	return nil
}
