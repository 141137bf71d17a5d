package release_test

import (
	"bytes"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"testing"

	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"sigs.k8s.io/yaml"
)

// The reference pages the code can write are written from it: the API from
// the CRD's schema, the conditions and reasons from the constants that set
// them. Each test renders its page and fails when docs/ holds another text;
// UPDATE_DOCS=1 (make docs) writes the rendered page instead.

func TestAPIReferenceIsTheCRD(t *testing.T) {
	checkGenerated(t, "docs/reference/api.md", renderAPIReference(t))
}

func TestConditionsReferenceIsTheCode(t *testing.T) {
	checkGenerated(t, "docs/reference/conditions.md", renderConditionsReference(t))
}

// checkGenerated compares docs/<page> with want, or writes it when
// UPDATE_DOCS is set.
func checkGenerated(t *testing.T, page string, want []byte) {
	t.Helper()
	path := filepath.Join(root, page)
	if os.Getenv("UPDATE_DOCS") != "" {
		if err := os.WriteFile(path, want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v: run make docs", err)
	}
	if !bytes.Equal(got, want) {
		t.Errorf("%s is not what the code writes: run make docs and commit it", page)
	}
}

const generatedNote = "<!-- Written by `make docs` from %s; edit that, not this page. -->\n\n"

// renderAPIReference writes every field of the ElastiService schema with its
// type, bounds and description, depth first in the schema's order.
func renderAPIReference(t *testing.T) []byte {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(root, "manifests", "01-crd.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var crd apiextensionsv1.CustomResourceDefinition
	if err := yaml.UnmarshalStrict(data, &crd); err != nil {
		t.Fatal(err)
	}
	var b bytes.Buffer
	fmt.Fprintf(&b, "# API reference: `%s/%s`, `%s`\n\n", crd.Spec.Group, crd.Spec.Versions[0].Name, crd.Spec.Names.Kind)
	fmt.Fprintf(&b, generatedNote, "`manifests/01-crd.yaml`")
	b.WriteString("KubeElasti's API, field by field, with the bounds the apiserver enforces. " +
		"The operator checks the same bounds again, and a few the schema cannot express " +
		"(see [limits](../operations/limits.md)); a spec past one gets `Ready=False` with reason `InvalidSpec`.\n\n")
	for _, v := range crd.Spec.Versions {
		if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
			t.Fatalf("version %s has no schema", v.Name)
		}
		for _, top := range []string{"spec", "status"} {
			prop, ok := v.Schema.OpenAPIV3Schema.Properties[top]
			if !ok {
				continue
			}
			fmt.Fprintf(&b, "## `%s`\n\n", top)
			if prop.Description != "" {
				fmt.Fprintf(&b, "%s\n\n", oneLine(prop.Description))
			}
			b.WriteString("| field | type | bounds | description |\n|---|---|---|---|\n")
			writeFields(&b, top, prop)
			b.WriteString("\n")
		}
	}
	return b.Bytes()
}

// writeFields writes s's properties in name order (the schema is a map),
// each followed by its own fields.
func writeFields(b *bytes.Buffer, path string, s apiextensionsv1.JSONSchemaProps) {
	names := make([]string, 0, len(s.Properties))
	for name := range s.Properties {
		names = append(names, name)
	}
	sort.Strings(names)
	required := map[string]bool{}
	for _, r := range s.Required {
		required[r] = true
	}
	for _, name := range names {
		p := s.Properties[name]
		field := path + "." + name
		bounds := schemaBounds(p)
		if required[name] {
			bounds = append([]string{"required"}, bounds...)
		}
		fmt.Fprintf(b, "| `%s` | %s | %s | %s |\n", field, schemaType(p), strings.Join(bounds, "; "), cell(p.Description))
		switch {
		case len(p.Properties) > 0:
			writeFields(b, field, p)
		case p.Items != nil && p.Items.Schema != nil && len(p.Items.Schema.Properties) > 0:
			writeFields(b, field+"[]", *p.Items.Schema)
		}
	}
}

func schemaType(p apiextensionsv1.JSONSchemaProps) string {
	switch {
	case p.XIntOrString:
		return "int or string"
	case p.Type == "array" && p.Items != nil && p.Items.Schema != nil:
		return "array of " + schemaType(*p.Items.Schema)
	case p.Type == "object" && p.AdditionalProperties != nil && p.AdditionalProperties.Schema != nil:
		return "map of " + schemaType(*p.AdditionalProperties.Schema)
	case p.Type == "":
		if p.XPreserveUnknownFields != nil && *p.XPreserveUnknownFields {
			return "any"
		}
		return "object"
	}
	return p.Type
}

func schemaBounds(p apiextensionsv1.JSONSchemaProps) []string {
	var out []string
	add := func(format string, args ...any) { out = append(out, fmt.Sprintf(format, args...)) }
	if p.MinLength != nil {
		add("length ≥ %d", *p.MinLength)
	}
	if p.MaxLength != nil {
		add("length ≤ %d", *p.MaxLength)
	}
	if p.MinItems != nil {
		add("≥ %d items", *p.MinItems)
	}
	if p.MaxItems != nil {
		add("≤ %d items", *p.MaxItems)
	}
	if p.MinProperties != nil {
		add("≥ %d keys", *p.MinProperties)
	}
	if p.MaxProperties != nil {
		add("≤ %d keys", *p.MaxProperties)
	}
	if p.Minimum != nil {
		add("≥ %s", strconv.FormatFloat(*p.Minimum, 'f', -1, 64))
	}
	if p.Maximum != nil {
		add("≤ %s", strconv.FormatFloat(*p.Maximum, 'f', -1, 64))
	}
	if p.Pattern != "" {
		add("pattern `%s`", p.Pattern)
	}
	if len(p.Enum) > 0 {
		var vals []string
		for _, e := range p.Enum {
			vals = append(vals, "`"+strings.Trim(string(e.Raw), `"`)+"`")
		}
		add("one of %s", strings.Join(vals, ", "))
	}
	if p.Default != nil {
		add("default `%s`", strings.Trim(string(p.Default.Raw), `"`))
	}
	for _, rule := range p.XValidations {
		msg := rule.Message
		if msg == "" {
			msg = rule.Rule
		}
		add("%s", msg)
	}
	return mapCells(out)
}

func mapCells(in []string) []string {
	for i, s := range in {
		in[i] = cell(s)
	}
	return in
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

func cell(s string) string { return strings.ReplaceAll(oneLine(s), "|", `\|`) }

// reasonConst is a constant that names a condition type or a reason: its
// name starts with Condition or Reason and its value is a string.
var reasonConst = regexp.MustCompile(`^(Condition|Reason)[A-Z]\w*$`)

type namedConst struct {
	name, value, doc, pkg string
}

// renderConditionsReference lists the condition types of the API and every
// condition or event reason the product's packages declare as a constant,
// with the comment that says when it is set.
func renderConditionsReference(t *testing.T) []byte {
	t.Helper()
	var consts []namedConst
	err := filepath.WalkDir(filepath.Join(root, "pkg"), func(path string, d os.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && d.Name() == "generated" {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
			return nil
		}
		f, err := parser.ParseFile(token.NewFileSet(), path, nil, parser.ParseComments)
		if err != nil {
			return err
		}
		rel, _ := filepath.Rel(root, filepath.Dir(path))
		for _, decl := range f.Decls {
			gen, ok := decl.(*ast.GenDecl)
			if !ok || gen.Tok != token.CONST {
				continue
			}
			for _, spec := range gen.Specs {
				vs := spec.(*ast.ValueSpec)
				for i, n := range vs.Names {
					if !reasonConst.MatchString(n.Name) || i >= len(vs.Values) {
						continue
					}
					lit, ok := vs.Values[i].(*ast.BasicLit)
					if !ok || lit.Kind != token.STRING {
						continue
					}
					v, _ := strconv.Unquote(lit.Value)
					doc := vs.Doc.Text()
					if doc == "" && len(gen.Specs) == 1 {
						doc = gen.Doc.Text()
					}
					consts = append(consts, namedConst{name: n.Name, value: v, doc: doc, pkg: filepath.ToSlash(rel)})
				}
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(consts) == 0 {
		t.Fatal("no Condition or Reason constants found: the scan is broken")
	}
	sort.Slice(consts, func(i, j int) bool {
		if consts[i].value != consts[j].value {
			return consts[i].value < consts[j].value
		}
		return consts[i].pkg < consts[j].pkg
	})
	var b bytes.Buffer
	b.WriteString("# Conditions, reasons and events\n\n")
	fmt.Fprintf(&b, generatedNote, "the `Condition…` and `Reason…` constants under `pkg/`")
	b.WriteString("Every `status.conditions` type and every reason the operator writes on a condition " +
		"or an event, with the comment in the code that says when. " +
		"`kubectl describe elastiservice NAME` shows both; `kubectl elasti explain NAME` reads them for you.\n\n")
	for _, kind := range []string{"Condition", "Reason"} {
		if kind == "Condition" {
			b.WriteString("## Condition types\n\n| type | declared in | when |\n|---|---|---|\n")
		} else {
			b.WriteString("\n## Reasons\n\n| reason | declared in | when |\n|---|---|---|\n")
		}
		seen := map[string]bool{}
		for _, c := range consts {
			if !strings.HasPrefix(c.name, kind) {
				continue
			}
			key := c.value + "\x00" + c.pkg
			if seen[key] {
				continue
			}
			seen[key] = true
			when := cell(strings.TrimPrefix(strings.TrimSpace(c.doc), c.name))
			if when == "" {
				when = "(no comment in the code)"
			}
			fmt.Fprintf(&b, "| `%s` | `%s` | %s |\n", c.value, c.pkg, when)
		}
	}
	return b.Bytes()
}

// Every metric the code registers is in docs/reference/metrics.md, and the
// page names no metric the code does not have.
func TestMetricsReferenceListsEveryMetric(t *testing.T) {
	metricName := regexp.MustCompile(`"(elasti_[a-z0-9_]+)"`)
	defined := map[string]bool{}
	for _, dir := range []string{"pkg", "cmd"} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || !strings.HasSuffix(path, ".go") || strings.HasSuffix(path, "_test.go") {
				return err
			}
			src, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			// Every elasti_ string in the product is a metric name
			// (its fqName, or a constant that holds one).
			for _, m := range metricName.FindAllSubmatch(src, -1) {
				defined[string(m[1])] = true
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if len(defined) < 10 {
		t.Fatalf("found only %d metrics in the code: the scan is broken", len(defined))
	}
	page, err := os.ReadFile(filepath.Join(root, "docs", "reference", "metrics.md"))
	if err != nil {
		t.Fatal(err)
	}
	documented := map[string]bool{}
	for _, m := range regexp.MustCompile("`(elasti_[a-z0-9_]+)").FindAllSubmatch(page, -1) {
		documented[string(m[1])] = true
	}
	for name := range defined {
		if !documented[name] {
			t.Errorf("metric %s is not in docs/reference/metrics.md", name)
		}
	}
	for name := range documented {
		if !defined[name] {
			t.Errorf("docs/reference/metrics.md names %s, which no code registers", name)
		}
	}
}
