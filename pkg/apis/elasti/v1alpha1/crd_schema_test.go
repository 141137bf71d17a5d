package v1alpha1

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apiextensions-apiserver/pkg/apis/apiextensions"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	structuralschema "k8s.io/apiextensions-apiserver/pkg/apiserver/schema"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/apimachinery/pkg/util/validation/field"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/kube-openapi/pkg/validation/strfmt"
	"k8s.io/kube-openapi/pkg/validation/validate"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/yaml"
)

// crdFile is the hand-written CRD that `kubectl apply -f manifests/` installs.
const crdFile = "../../../../manifests/01-crd.yaml"

// samplesGlob matches the example manifests users copy from.
const samplesGlob = "../../../../deploy/samples/*.yaml"

// Schema paths are written as in the error messages: dot-separated JSON
// field names, with "[]" for array items and "{}" for map values, e.g.
// "spec.triggers[].metadata".

// triggerMetadataPath is the only place unknown fields are preserved.
const triggerMetadataPath = "spec.triggers[].metadata"

// expectedEnums lists every enum the schema may have, with the Go constants
// it must equal (as a set).
var expectedEnums = map[string][]string{
	"spec.scaleTargetRef.apiVersion": {APIVersionApps, APIVersionArgoV1},
	"spec.scaleTargetRef.kind": {
		LegacyKindDeployments, LegacyKindRollouts, KindDeployment, KindStatefulSet, KindRollout,
	},
	"spec.triggers[].type":                    {TriggerTypePrometheus},
	"spec.autoscaler.type":                    {AutoscalerTypeHPA, AutoscalerTypeKEDA},
	"spec.probeResponse[].path.type":          {MatchExact, MatchPathPrefix, MatchRegularExpression},
	"spec.probeResponse[].headers[].type":     {MatchExact, MatchRegularExpression},
	"spec.probeResponse[].queryParams[].type": {MatchExact, MatchRegularExpression},
	"spec.wakeWith[].apiVersion":              {APIVersionApps, APIVersionArgoV1},
	"spec.wakeWith[].kind": {
		LegacyKindDeployments, LegacyKindRollouts, KindDeployment, KindStatefulSet, KindRollout,
	},
	"status.mode": {ModeProxy, ModeServe},
	"status.conditions[].status": {
		string(metav1.ConditionTrue), string(metav1.ConditionFalse), string(metav1.ConditionUnknown),
	},
}

// expectedDefaults lists every default the schema may have.
var expectedDefaults = map[string]any{
	"spec.minTargetReplicas":      DefaultMinTargetReplicas,
	"spec.cooldownPeriod":         DefaultCooldownPeriodSeconds,
	"spec.enabledPeriod.schedule": DefaultEnabledSchedule,
	"spec.enabledPeriod.duration": DefaultEnabledDuration,
}

func loadCRD(t *testing.T) *apiextensionsv1.CustomResourceDefinition {
	t.Helper()
	data, err := os.ReadFile(crdFile)
	if err != nil {
		t.Fatalf("reading %s: %v", crdFile, err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := yaml.UnmarshalStrict(data, crd); err != nil {
		t.Fatalf("decoding %s: %v", crdFile, err)
	}
	return crd
}

// loadVersion returns the v1alpha1 version of the CRD; it must have a schema.
func loadVersion(t *testing.T) *apiextensionsv1.CustomResourceDefinitionVersion {
	t.Helper()
	crd := loadCRD(t)
	for i := range crd.Spec.Versions {
		v := &crd.Spec.Versions[i]
		if v.Name == SchemeGroupVersion.Version {
			if v.Schema == nil || v.Schema.OpenAPIV3Schema == nil {
				t.Fatalf("%s: version %s has no openAPIV3Schema", crdFile, v.Name)
			}
			return v
		}
	}
	t.Fatalf("%s: no version %s", crdFile, SchemeGroupVersion.Version)
	return nil
}

func rootSchema(t *testing.T) *apiextensionsv1.JSONSchemaProps {
	t.Helper()
	return loadVersion(t).Schema.OpenAPIV3Schema
}

func TestCRDNamesAndVersion(t *testing.T) {
	crd := loadCRD(t)
	plural := Resource("elastiservices")

	if want := plural.String(); crd.Name != want {
		t.Errorf("metadata.name = %q, want %q", crd.Name, want)
	}
	if crd.Spec.Group != SchemeGroupVersion.Group {
		t.Errorf("spec.group = %q, want %q", crd.Spec.Group, SchemeGroupVersion.Group)
	}
	wantNames := apiextensionsv1.CustomResourceDefinitionNames{
		Kind:       reflect.TypeFor[ElastiService]().Name(),
		ListKind:   reflect.TypeFor[ElastiServiceList]().Name(),
		Plural:     plural.Resource,
		Singular:   "elastiservice",
		ShortNames: []string{"elastisvc"},
	}
	if !reflect.DeepEqual(crd.Spec.Names, wantNames) {
		t.Errorf("spec.names = %+v, want %+v", crd.Spec.Names, wantNames)
	}
	if crd.Spec.Scope != apiextensionsv1.NamespaceScoped {
		t.Errorf("spec.scope = %q, want %q", crd.Spec.Scope, apiextensionsv1.NamespaceScoped)
	}
	if len(crd.Spec.Versions) != 1 {
		t.Fatalf("spec.versions has %d entries, want exactly one (%s)", len(crd.Spec.Versions), SchemeGroupVersion.Version)
	}
	v := loadVersion(t)
	if !v.Served || !v.Storage {
		t.Errorf("version %s: served=%v storage=%v, want both true", v.Name, v.Served, v.Storage)
	}
	if v.Subresources == nil || v.Subresources.Status == nil {
		t.Errorf("version %s: the status subresource must be enabled", v.Name)
	}
	if v.Subresources != nil && v.Subresources.Scale != nil {
		t.Errorf("version %s: unexpected scale subresource", v.Name)
	}
}

// TestCRDPrinterColumns checks that every column's JSONPath names a field the
// schema has, with a matching type.
func TestCRDPrinterColumns(t *testing.T) {
	v := loadVersion(t)
	root := v.Schema.OpenAPIV3Schema
	filter := regexp.MustCompile(`\[[^\]]*\]`)

	want := map[string]string{
		"Mode":        ".status.mode",
		"Target":      ".spec.scaleTargetRef.name",
		"TargetKind":  ".spec.scaleTargetRef.kind",
		"Service":     ".spec.service",
		"Ready":       `.status.conditions[?(@.type=="Ready")].status`,
		"Age":         ".metadata.creationTimestamp",
		"Replicas":    ".status.targetReplicas",
		"Last Wake":   ".status.lastScaledUpTime",
		"Ready After": ".status.lastColdStart",
		"Held":        ".status.lastHeld",
	}
	got := map[string]string{}
	for _, c := range v.AdditionalPrinterColumns {
		got[c.Name] = c.JSONPath
		if c.Name != "Age" && c.Description == "" {
			t.Errorf("printer column %s has no description", c.Name)
		}
		if strings.HasPrefix(c.JSONPath, ".metadata.") {
			if c.JSONPath != ".metadata.creationTimestamp" || c.Type != "date" {
				t.Errorf("printer column %s: unexpected metadata column %q of type %q", c.Name, c.JSONPath, c.Type)
			}
			continue
		}
		path := strings.TrimPrefix(filter.ReplaceAllString(c.JSONPath, "[]"), ".")
		s := lookup(root, path)
		if s == nil {
			t.Errorf("printer column %s: JSONPath %s names %q, which is not in the schema", c.Name, c.JSONPath, path)
			continue
		}
		// A date column reads a date-time string.
		if c.Type == "date" && s.Type == "string" && s.Format == "date-time" {
			continue
		}
		if s.Type != c.Type {
			t.Errorf("printer column %s: column type %q, but %s has schema type %q", c.Name, c.Type, path, s.Type)
		}
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("printer columns = %v, want %v", got, want)
	}
}

// TestCRDSchemaMatchesGoTypes walks ElastiService by reflection alongside the
// schema: every JSON field must be a property and vice versa, with a
// compatible type, and required must follow omitempty.
func TestCRDSchemaMatchesGoTypes(t *testing.T) {
	w := &typeWalker{}
	w.walk("", reflect.TypeFor[ElastiService](), rootSchema(t))
	for _, e := range w.errs {
		t.Error(e)
	}
}

// TestCRDEnumsMatchConstants checks every enum against the Go constants, and
// that no enum exists the table does not know about.
func TestCRDEnumsMatchConstants(t *testing.T) {
	seen := map[string]bool{}
	walkSchema("", rootSchema(t), func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if len(s.Enum) == 0 {
			return
		}
		seen[path] = true
		want, ok := expectedEnums[path]
		if !ok {
			t.Errorf("%s: schema has an enum but no Go constants are known for it; add it to expectedEnums", path)
			return
		}
		var got []string
		for _, e := range s.Enum {
			var v any
			if err := json.Unmarshal(e.Raw, &v); err != nil {
				t.Errorf("%s: enum value %s: %v", path, e.Raw, err)
				continue
			}
			str, isString := v.(string)
			if !isString {
				t.Errorf("%s: enum value %s is a %T, want a string", path, e.Raw, v)
				continue
			}
			got = append(got, str)
		}
		if !sameSet(got, want) {
			t.Errorf("%s: enum = %q, want the Go constants %q", path, sorted(got), sorted(want))
		}
	})
	for path := range expectedEnums {
		if !seen[path] {
			t.Errorf("%s: schema has no enum, want %q", path, sorted(expectedEnums[path]))
		}
	}
}

// TestCRDDefaultsAndBounds checks defaults and numeric bounds against the Go
// constants.
func TestCRDDefaultsAndBounds(t *testing.T) {
	root := rootSchema(t)
	seen := map[string]bool{}
	walkSchema("", root, func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s.Default == nil {
			return
		}
		seen[path] = true
		want, ok := expectedDefaults[path]
		if !ok {
			t.Errorf("%s: unexpected default %s", path, s.Default.Raw)
			return
		}
		if !jsonEqual(s.Default.Raw, want) {
			t.Errorf("%s: default = %s, want %#v", path, s.Default.Raw, want)
		}
	})
	for path, want := range expectedDefaults {
		if !seen[path] {
			t.Errorf("%s: schema has no default, want %#v", path, want)
		}
	}

	bounds := []struct {
		path     string
		min, max *float64
	}{
		{"spec.minTargetReplicas", ptr.To[float64](1), nil},
		{"spec.cooldownPeriod", ptr.To[float64](0), ptr.To[float64](MaxCooldownPeriodSeconds)},
		{"spec.probeResponse[].response.status", ptr.To[float64](MinProbeStatus), ptr.To[float64](MaxProbeStatus)},
		{"spec.hold.maxRequests", ptr.To[float64](1), ptr.To[float64](MaxHoldRequests)},
		{"status.resolverPorts[].port", ptr.To[float64](1), ptr.To[float64](65535)},
		{"status.resolverPorts[].resolverPort", ptr.To[float64](1), ptr.To[float64](65535)},
	}
	for _, b := range bounds {
		s := lookup(root, b.path)
		if s == nil {
			t.Errorf("%s: not in the schema", b.path)
			continue
		}
		if !reflect.DeepEqual(s.Minimum, b.min) {
			t.Errorf("%s: minimum = %s, want %s", b.path, fmtFloat(s.Minimum), fmtFloat(b.min))
		}
		if !reflect.DeepEqual(s.Maximum, b.max) {
			t.Errorf("%s: maximum = %s, want %s", b.path, fmtFloat(s.Maximum), fmtFloat(b.max))
		}
	}
	for _, path := range []string{"spec.service", "spec.scaleTargetRef.name", "status.resolverPorts[].service"} {
		if s := lookup(root, path); s == nil || s.MinLength == nil || *s.MinLength != 1 {
			t.Errorf("%s: want minLength 1", path)
		}
	}
	// The operator enforces these itself (pkg/validation), since an older
	// CRD may be installed; the schema repeats those every real manifest
	// meets, so the apiserver refuses the rest up front.
	for path, want := range map[string]int64{
		"spec.service": 63, "spec.scaleTargetRef.name": 253,
		"spec.enabledPeriod.timeZone": MaxTimeZoneLength, "spec.enabledPeriod.preWarm": MaxPreWarmLength,
		"spec.hold.timeout":                      MaxHoldTimeoutLength,
		"spec.triggers[].metadata.query":         MaxTriggerQueryBytes,
		"spec.triggers[].metadata.serverAddress": MaxTriggerServerAddressLength,
		"spec.triggers[].metadata.uptimeFilter":  MaxTriggerUptimeFilterLength,
		"spec.triggers[].metadata.headers{}":     MaxTriggerHeaderValueLength,
	} {
		if s := lookup(root, path); s == nil || ptr.Deref(s.MaxLength, -1) != want {
			t.Errorf("%s: want maxLength %d", path, want)
		}
	}
	for path, want := range map[string]int64{
		"spec.triggers[].metadata":         MaxTriggerMetadataKeys,
		"spec.triggers[].metadata.headers": MaxTriggerHeaders,
	} {
		if s := lookup(root, path); s == nil || ptr.Deref(s.MaxProperties, -1) != want {
			t.Errorf("%s: want maxProperties %d", path, want)
		}
	}
	for path, want := range map[string]int64{
		"spec.triggers":                    MaxTriggers,
		"spec.probeResponse":               MaxProbeRules,
		"spec.probeResponse[].headers":     MaxProbeMatches,
		"spec.probeResponse[].queryParams": MaxProbeMatches,
		"status.recentColdStarts":          MaxRecentColdStarts,
		"spec.wakeWith":                    MaxWakeWith,
	} {
		if s := lookup(root, path); s == nil || ptr.Deref(s.MaxItems, -1) != want {
			t.Errorf("%s: want maxItems %d", path, want)
		}
	}
	// Every string of a probeResponse rule is bounded, as the operator
	// bounds it (pkg/validation): the resolver keeps them all.
	probeLengths := map[string]int64{
		"spec.probeResponse[].path.value":          MaxProbeValueLength,
		"spec.probeResponse[].headers[].name":      MaxProbeNameLength,
		"spec.probeResponse[].headers[].value":     MaxProbeValueLength,
		"spec.probeResponse[].queryParams[].name":  MaxProbeNameLength,
		"spec.probeResponse[].queryParams[].value": MaxProbeValueLength,
		"spec.probeResponse[].method":              MaxProbeMethodLength,
		"spec.probeResponse[].response.body":       MaxProbeBodyLength,
	}
	walkSchema("", root, func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if !strings.HasPrefix(path, "spec.probeResponse") || s.Type != "string" || len(s.Enum) > 0 {
			return
		}
		want, ok := probeLengths[path]
		if !ok {
			t.Errorf("%s: a probeResponse string without a known bound; add it to probeLengths", path)
			return
		}
		if ptr.Deref(s.MaxLength, -1) != want {
			t.Errorf("%s: maxLength = %d, want %d", path, ptr.Deref(s.MaxLength, -1), want)
		}
		delete(probeLengths, path)
	})
	for path := range probeLengths {
		t.Errorf("%s: not a string in the schema", path)
	}
	if s := lookup(root, "status.conditions"); s == nil ||
		ptr.Deref(s.XListType, "") != "map" || !reflect.DeepEqual(s.XListMapKeys, []string{"type"}) {
		t.Errorf("status.conditions: want x-kubernetes-list-type map with x-kubernetes-list-map-keys [type]")
	}
	// One resolver port per Service port: the apiserver refuses a second
	// entry for the same (service, port).
	if s := lookup(root, "status.resolverPorts"); s == nil ||
		ptr.Deref(s.XListType, "") != "map" || !reflect.DeepEqual(s.XListMapKeys, []string{"service", "port"}) {
		t.Errorf("status.resolverPorts: want x-kubernetes-list-type map with x-kubernetes-list-map-keys [service port]")
	}
}

// TestCRDPreserveUnknownFieldsOnlyOnTriggerMetadata keeps pruning on
// everywhere except the free-form trigger metadata.
func TestCRDPreserveUnknownFieldsOnlyOnTriggerMetadata(t *testing.T) {
	root := rootSchema(t)
	walkSchema("", root, func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if s.XPreserveUnknownFields != nil && path != triggerMetadataPath {
			t.Errorf("%s: x-kubernetes-preserve-unknown-fields is set; only %s may preserve unknown fields", path, triggerMetadataPath)
		}
		if s.AdditionalProperties != nil && path != triggerMetadataPath+".headers" {
			t.Errorf("%s: additionalProperties is set; no field of ElastiService is a map", path)
		}
	})
	if s := lookup(root, triggerMetadataPath); s == nil || !ptr.Deref(s.XPreserveUnknownFields, false) {
		t.Errorf("%s: want x-kubernetes-preserve-unknown-fields: true", triggerMetadataPath)
	}
}

// TestCRDDescriptions wants a description on every schema node, so that
// kubectl explain documents every field. The root metadata is the exception:
// the apiserver forbids anything but type there.
func TestCRDDescriptions(t *testing.T) {
	walkSchema("", rootSchema(t), func(path string, s *apiextensionsv1.JSONSchemaProps) {
		if path == "metadata" {
			return
		}
		if strings.TrimSpace(s.Description) == "" {
			name := path
			if name == "" {
				name = "(root)"
			}
			t.Errorf("%s: schema has no description", name)
		}
	})
}

// TestCRDIsStructural runs the apiserver's own structural-schema checks on
// the schema, converted to the internal API version as the apiserver does.
func TestCRDIsStructural(t *testing.T) {
	s := structural(t)
	if errs := structuralschema.ValidateStructural(field.NewPath("openAPIV3Schema"), s); len(errs) > 0 {
		for _, e := range errs {
			t.Errorf("not a structural schema: %v", e)
		}
	}
}

// TestCRDValidatesObjects validates objects against the schema: what the Go
// types marshal must be accepted, and the bounds, enums and patterns must
// reject what they are meant to.
func TestCRDValidatesObjects(t *testing.T) {
	validator := validate.NewSchemaValidator(structural(t).ToKubeOpenAPI(), nil, "", strfmt.Default)
	check := func(t *testing.T, obj map[string]any, wantValid bool) {
		t.Helper()
		res := validator.Validate(obj)
		if wantValid && !res.IsValid() {
			t.Errorf("rejected a valid object: %v", res.Errors)
		}
		if !wantValid && res.IsValid() {
			t.Errorf("accepted an invalid object")
		}
	}

	t.Run("full object from Go", func(t *testing.T) {
		check(t, toMap(t, fullObject()), true)
	})
	t.Run("minimal object with schema defaults", func(t *testing.T) {
		obj := toMap(t, &ElastiService{
			TypeMeta:   metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "ElastiService"},
			ObjectMeta: metav1.ObjectMeta{Name: "min", Namespace: "default"},
			Spec: ElastiServiceSpec{
				Service:        "web",
				ScaleTargetRef: ScaleTargetRef{APIVersion: APIVersionApps, Kind: LegacyKindDeployments, Name: "web"},
				EnabledPeriod:  &EnabledPeriod{},
			},
		})
		// Apply every default in the schema, as the apiserver would.
		walkSchema("", rootSchema(t), func(path string, s *apiextensionsv1.JSONSchemaProps) {
			if s.Default != nil {
				var v any
				if err := utiljson.Unmarshal(s.Default.Raw, &v); err != nil {
					t.Fatalf("%s: default %s: %v", path, s.Default.Raw, err)
				}
				setPath(obj, path, v)
			}
		})
		check(t, obj, true)
	})

	type mutation struct {
		name  string
		mut   func(*ElastiService)
		valid bool
	}
	cases := []mutation{
		{"missing service", func(e *ElastiService) { e.Spec.Service = "" }, false},
		{"missing target name", func(e *ElastiService) { e.Spec.ScaleTargetRef.Name = "" }, false},
		{"unknown kind", func(e *ElastiService) { e.Spec.ScaleTargetRef.Kind = "Job" }, false},
		{"unknown apiVersion", func(e *ElastiService) { e.Spec.ScaleTargetRef.APIVersion = "batch/v1" }, false},
		{"minTargetReplicas 0 is dropped by omitempty", func(e *ElastiService) { e.Spec.MinTargetReplicas = 0 }, true},
		{"minTargetReplicas negative", func(e *ElastiService) { e.Spec.MinTargetReplicas = -1 }, false},
		{"cooldown at maximum", func(e *ElastiService) { e.Spec.CooldownPeriod = MaxCooldownPeriodSeconds }, true},
		{"cooldown above maximum", func(e *ElastiService) { e.Spec.CooldownPeriod = MaxCooldownPeriodSeconds + 1 }, false},
		{"cooldown negative", func(e *ElastiService) { e.Spec.CooldownPeriod = -5 }, false},
		{"unknown trigger type", func(e *ElastiService) { e.Spec.Triggers[0].Type = "cpu" }, false},
		{"service of 63", func(e *ElastiService) { e.Spec.Service = strings.Repeat("s", 63) }, true},
		{"service of 64", func(e *ElastiService) { e.Spec.Service = strings.Repeat("s", 64) }, false},
		{"target name of 253", func(e *ElastiService) { e.Spec.ScaleTargetRef.Name = strings.Repeat("n", 253) }, true},
		{"target name of 254", func(e *ElastiService) { e.Spec.ScaleTargetRef.Name = strings.Repeat("n", 254) }, false},
		{"metadata of 16 keys", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(MaxTriggerMetadataKeys, 0, 0, 1) }, true},
		{"metadata of 17 keys", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(MaxTriggerMetadataKeys+1, 0, 0, 1) }, false},
		{"16 headers", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(2, MaxTriggerHeaders, 1, 1) }, true},
		{"17 headers", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(2, MaxTriggerHeaders+1, 1, 1) }, false},
		{"header value at its bound", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(2, 1, MaxTriggerHeaderValueLength, 1) }, true},
		{"header value one past", func(e *ElastiService) {
			e.Spec.Triggers[0].Metadata = metadataOf(2, 1, MaxTriggerHeaderValueLength+1, 1)
		}, false},
		{"query at its bound", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(2, 0, 0, MaxTriggerQueryBytes) }, true},
		{"query one past", func(e *ElastiService) { e.Spec.Triggers[0].Metadata = metadataOf(2, 0, 0, MaxTriggerQueryBytes+1) }, false},
		{"10 triggers", func(e *ElastiService) { e.Spec.Triggers = slices.Repeat(e.Spec.Triggers[:1], MaxTriggers) }, true},
		{"11 triggers", func(e *ElastiService) { e.Spec.Triggers = slices.Repeat(e.Spec.Triggers[:1], MaxTriggers+1) }, false},
		{"8 wakeWith", func(e *ElastiService) {
			e.Spec.WakeWith = slices.Repeat([]Dependency{{APIVersion: APIVersionApps, Kind: KindStatefulSet, Name: "db"}}, MaxWakeWith)
		}, true},
		{"9 wakeWith", func(e *ElastiService) {
			e.Spec.WakeWith = slices.Repeat([]Dependency{{APIVersion: APIVersionApps, Kind: KindStatefulSet, Name: "db"}}, MaxWakeWith+1)
		}, false},
		{"wakeWith without a name", func(e *ElastiService) {
			e.Spec.WakeWith = []Dependency{{APIVersion: APIVersionApps, Kind: KindStatefulSet}}
		}, false},
		{"wakeWith of an unknown kind", func(e *ElastiService) {
			e.Spec.WakeWith = []Dependency{{APIVersion: APIVersionApps, Kind: "Job", Name: "db"}}
		}, false},
		{"unknown autoscaler type", func(e *ElastiService) { e.Spec.Autoscaler.Type = "vpa" }, false},
		{"headers match PathPrefix", func(e *ElastiService) { e.Spec.ProbeResponse[0].Headers[0].Type = MatchPathPrefix }, false},
		{"probe status 42", func(e *ElastiService) { e.Spec.ProbeResponse[0].Response.Status = 42 }, false},
		{"probe status 600", func(e *ElastiService) { e.Spec.ProbeResponse[0].Response.Status = 600 }, false},
		{"probe status 199", func(e *ElastiService) { e.Spec.ProbeResponse[0].Response.Status = 199 }, false},
		{"probe rules at every bound", func(e *ElastiService) { e.Spec.ProbeResponse = largestProbeResponse(0) }, true},
		{"probe rules one too many", func(e *ElastiService) {
			e.Spec.ProbeResponse = slices.Repeat(e.Spec.ProbeResponse[:1], MaxProbeRules+1)
		}, false},
		{"probe headers one too many", func(e *ElastiService) {
			e.Spec.ProbeResponse = largestProbeResponse(0)
			e.Spec.ProbeResponse[0].Headers = append(e.Spec.ProbeResponse[0].Headers, e.Spec.ProbeResponse[0].Headers[0])
		}, false},
		{"probe query parameters one too many", func(e *ElastiService) {
			e.Spec.ProbeResponse = largestProbeResponse(0)
			e.Spec.ProbeResponse[0].QueryParams = append(e.Spec.ProbeResponse[0].QueryParams, e.Spec.ProbeResponse[0].QueryParams[0])
		}, false},
		{"probe path one character too long", func(e *ElastiService) { e.Spec.ProbeResponse = largestProbeResponse(1) }, false},
		{"unknown mode", func(e *ElastiService) { e.Status.Mode = "sleep" }, false},
		{"condition status Maybe", func(e *ElastiService) { e.Status.Conditions[0].Status = "Maybe" }, false},
		{"condition without reason", func(e *ElastiService) { e.Status.Conditions[0].Reason = "" }, false},
		{"resolver port without name", func(e *ElastiService) { e.Status.ResolverPorts[0].Name = "" }, true},
		{"resolver port 0", func(e *ElastiService) { e.Status.ResolverPorts[0].ResolverPort = 0 }, false},
		{"resolver port 65536", func(e *ElastiService) { e.Status.ResolverPorts[0].ResolverPort = 65536 }, false},
		{"service port 0", func(e *ElastiService) { e.Status.ResolverPorts[0].Port = 0 }, false},
		{"resolver port without service", func(e *ElastiService) { e.Status.ResolverPorts[0].Service = "" }, false},
	}
	for _, sched := range []string{"0 0 * * *", "0 9 * * 1-5", "*/15 * * * *", "30 2 1,15 * MON-FRI", "0  9 * *  1"} {
		cases = append(cases, mutation{"schedule " + sched, func(e *ElastiService) { e.Spec.EnabledPeriod.Schedule = sched }, true})
	}
	for _, sched := range []string{"0 0 * *", "0 0 * * * *", "daily", " 0 0 * * *"} {
		cases = append(cases, mutation{"schedule " + sched, func(e *ElastiService) { e.Spec.EnabledPeriod.Schedule = sched }, false})
	}
	for _, d := range []string{"30m", "1h30m", "24h", "90s", "1.5h", "500ms", "2h45m30s"} {
		if _, err := time.ParseDuration(d); err != nil {
			t.Fatalf("test table: %q is not a Go duration: %v", d, err)
		}
		cases = append(cases, mutation{"duration " + d, func(e *ElastiService) { e.Spec.EnabledPeriod.Duration = d }, true})
	}
	for _, d := range []string{"1d", "24", "h", "-1h", "1h 30m", "forever"} {
		cases = append(cases, mutation{"duration " + d, func(e *ElastiService) { e.Spec.EnabledPeriod.Duration = d }, false})
	}
	// The operator resolves the zone (pkg/validation); the schema bounds
	// the name and keeps it to the characters IANA names use.
	for _, z := range []string{"UTC", "Europe/Berlin", "America/Argentina/ComodRivadavia", "Etc/GMT+5", "Etc/GMT-14", "America/Port-au-Prince", "EST5EDT"} {
		cases = append(cases, mutation{"time zone " + z, func(e *ElastiService) { e.Spec.EnabledPeriod.TimeZone = z }, true})
	}
	for _, z := range []string{"Europe/", "/etc/localtime", "../zoneinfo/UTC", "Europe Berlin", "Europe//Berlin", strings.Repeat("A", MaxTimeZoneLength+1)} {
		cases = append(cases, mutation{"time zone " + z, func(e *ElastiService) { e.Spec.EnabledPeriod.TimeZone = z }, false})
	}
	for _, d := range []string{"15m", "90s", "1h"} {
		cases = append(cases, mutation{"preWarm " + d, func(e *ElastiService) { e.Spec.EnabledPeriod.PreWarm = d }, true})
	}
	for _, d := range []string{"15", "-5m", "a while", strings.Repeat("1", MaxPreWarmLength) + "s"} {
		cases = append(cases, mutation{"preWarm " + d, func(e *ElastiService) { e.Spec.EnabledPeriod.PreWarm = d }, false})
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			obj := fullObject()
			c.mut(obj)
			check(t, toMap(t, obj), c.valid)
		})
	}
}

// largestProbeResponse is at every probeResponse bound, in two-byte
// characters (the schema counts characters); extra lengthens the first
// rule's path past its bound.
func largestProbeResponse(extra int) []ProbeResponseRule {
	str := func(n int) string { return strings.Repeat("é", n) }
	var rules []ProbeResponseRule
	for range MaxProbeRules {
		r := ProbeResponseRule{
			Method:   str(MaxProbeMethodLength),
			Path:     &PathMatch{Type: MatchPathPrefix, Value: str(MaxProbeValueLength)},
			Response: ProbeCannedAnswer{Status: MaxProbeStatus, Body: str(MaxProbeBodyLength)},
		}
		for range MaxProbeMatches {
			m := NameValueMatch{Name: str(MaxProbeNameLength), Type: MatchRegularExpression, Value: str(MaxProbeValueLength)}
			r.Headers = append(r.Headers, m)
			r.QueryParams = append(r.QueryParams, m)
		}
		rules = append(rules, r)
	}
	rules[0].Path.Value += str(extra)
	return rules
}

// TestCRDAcceptsSamples validates every ElastiService in deploy/samples, so
// a schema change cannot silently break the documented examples.
func TestCRDAcceptsSamples(t *testing.T) {
	paths, err := filepath.Glob(samplesGlob)
	if err != nil {
		t.Fatal(err)
	}
	if len(paths) == 0 {
		t.Fatalf("no samples match %s; the samples must be checked against the schema", samplesGlob)
	}
	validator := validate.NewSchemaValidator(structural(t).ToKubeOpenAPI(), nil, "", strfmt.Default)
	checked := 0
	for _, p := range paths {
		data, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for i := 0; ; i++ {
			obj := map[string]any{}
			if err := dec.Decode(&obj); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				t.Fatalf("%s: document %d: %v", p, i, err)
			}
			if obj["kind"] != "ElastiService" || obj["apiVersion"] != SchemeGroupVersion.String() {
				continue
			}
			checked++
			if res := validator.Validate(obj); !res.IsValid() {
				t.Errorf("%s: document %d is refused by the schema: %v", p, i, res.Errors)
			}
		}
	}
	t.Logf("validated %d ElastiServices from %s", checked, samplesGlob)
}

// fullObject sets every field of ElastiService.
func fullObject() *ElastiService {
	now := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	return &ElastiService{
		TypeMeta:   metav1.TypeMeta{APIVersion: SchemeGroupVersion.String(), Kind: "ElastiService"},
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default", Generation: 3},
		Spec: ElastiServiceSpec{
			ScaleTargetRef:    ScaleTargetRef{APIVersion: APIVersionArgoV1, Kind: KindRollout, Name: "web"},
			Service:           "web",
			MinTargetReplicas: 2,
			CooldownPeriod:    300,
			Triggers: []ScaleTrigger{{
				Type: TriggerTypePrometheus,
				Metadata: json.RawMessage(`{"query":"sum(rate(x[1m]))","serverAddress":"http://prom:9090",` +
					`"threshold":"0.5","headers":{"X-Org":"a"}}`),
			}},
			Autoscaler:    &AutoscalerSpec{Type: AutoscalerTypeKEDA, Name: "web"},
			EnabledPeriod: &EnabledPeriod{Schedule: "0 9 * * 1-5", Duration: "8h", TimeZone: "Europe/Berlin", PreWarm: "15m"},
			ProbeResponse: []ProbeResponseRule{{
				Path:        &PathMatch{Type: MatchPathPrefix, Value: "/health"},
				Headers:     []NameValueMatch{{Name: "User-Agent", Type: MatchRegularExpression, Value: "^kube-probe/"}},
				QueryParams: []NameValueMatch{{Name: "probe", Type: MatchExact, Value: "1"}},
				Method:      "GET",
				Response:    ProbeCannedAnswer{Status: 200, Body: "ok"},
			}},
		},
		Status: ElastiServiceStatus{
			LastReconciledTime: &now,
			LastScaledUpTime:   &now,
			Mode:               ModeServe,
			ObservedGeneration: 3,
			Conditions: []metav1.Condition{{
				Type:               ConditionReady,
				Status:             metav1.ConditionTrue,
				ObservedGeneration: 3,
				LastTransitionTime: now,
				Reason:             "Serving",
				Message:            "target has ready pods",
			}, {
				Type:               ConditionResolverPortsAssigned,
				Status:             metav1.ConditionFalse,
				ObservedGeneration: 3,
				LastTransitionTime: now,
				Reason:             ReasonResolverPortRangeExhausted,
				Message:            "no free port in 20000-20001",
			}},
			ResolverPorts: []ResolverPort{
				{Service: "web", Name: "http", Port: 80, ResolverPort: 20000},
				{Service: "web", Port: 9000, ResolverPort: 20001},
			},
		},
	}
}

// typeWalker compares a Go type with a schema and collects errors naming the
// field path.
type typeWalker struct {
	errs []string
}

var (
	rawMessageType = reflect.TypeFor[json.RawMessage]()
	timeType       = reflect.TypeFor[metav1.Time]()
	durationType   = reflect.TypeFor[metav1.Duration]()
	objectMetaType = reflect.TypeFor[metav1.ObjectMeta]()
)

func (w *typeWalker) errorf(path, format string, args ...any) {
	if path == "" {
		path = "(root)"
	}
	w.errs = append(w.errs, path+": "+fmt.Sprintf(format, args...))
}

// expect reports a mismatch of schema type and format.
func (w *typeWalker) expect(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps, schemaType, format string) bool {
	ok := true
	if s.Type != schemaType {
		w.errorf(path, "Go type %s needs schema type %q, schema has %q", typ, schemaType, s.Type)
		ok = false
	}
	if s.Format != format {
		w.errorf(path, "Go type %s needs format %q, schema has %q", typ, format, s.Format)
		ok = false
	}
	return ok
}

func (w *typeWalker) walk(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	for typ.Kind() == reflect.Pointer {
		typ = typ.Elem()
	}
	switch typ {
	case rawMessageType:
		// Free-form JSON read by the trigger parser: an object kept as is.
		if path != triggerMetadataPath {
			w.errorf(path, "json.RawMessage is only expected at %s", triggerMetadataPath)
		}
		w.expect(path, typ, s, "object", "")
		if !ptr.Deref(s.XPreserveUnknownFields, false) {
			w.errorf(path, "free-form json.RawMessage needs x-kubernetes-preserve-unknown-fields: true")
		}
		// The keys the parser reads, typed so the schema can bound them;
		// threshold, a string or a number, stays untyped.
		for name := range s.Properties {
			if !slices.Contains([]string{"query", "serverAddress", "uptimeFilter", "headers"}, name) {
				w.errorf(path, "free-form json.RawMessage lists property %q, which the trigger parser does not read", name)
			}
		}
		return
	case timeType:
		w.expect(path, typ, s, "string", "date-time")
		return
	case durationType:
		// metav1.Duration marshals as a Go duration string such as "1.5s".
		w.expect(path, typ, s, "string", "")
		return
	case objectMetaType:
		// The apiserver owns the metadata schema; the CRD may only say object.
		w.expect(path, typ, s, "object", "")
		if len(s.Properties) > 0 {
			w.errorf(path, "the schema of metadata must not list properties")
		}
		return
	}

	switch typ.Kind() {
	case reflect.String:
		w.expect(path, typ, s, "string", "")
	case reflect.Bool:
		w.expect(path, typ, s, "boolean", "")
	case reflect.Int32:
		w.expect(path, typ, s, "integer", "int32")
	case reflect.Int64:
		w.expect(path, typ, s, "integer", "int64")
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		w.errorf(path, "Go type %s: use int32 or int64 in API types", typ)
	case reflect.Float32, reflect.Float64:
		w.errorf(path, "Go type %s: floats are not allowed in API types", typ)
	case reflect.Slice:
		if typ.Elem().Kind() == reflect.Uint8 {
			w.expect(path, typ, s, "string", "byte")
			return
		}
		if !w.expect(path, typ, s, "array", "") {
			return
		}
		if s.Items == nil || s.Items.Schema == nil {
			w.errorf(path, "array needs an items schema")
			return
		}
		w.walk(path+"[]", typ.Elem(), s.Items.Schema)
	case reflect.Map:
		if !w.expect(path, typ, s, "object", "") {
			return
		}
		if typ.Key().Kind() != reflect.String {
			w.errorf(path, "Go map key type %s is not string", typ.Key())
		}
		if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
			w.errorf(path, "Go map needs additionalProperties with a schema")
			return
		}
		w.walk(path+"{}", typ.Elem(), s.AdditionalProperties.Schema)
	case reflect.Struct:
		if !w.expect(path, typ, s, "object", "") {
			return
		}
		w.walkStruct(path, typ, s)
	default:
		w.errorf(path, "Go type %s has no schema mapping", typ)
	}
}

func (w *typeWalker) walkStruct(path string, typ reflect.Type, s *apiextensionsv1.JSONSchemaProps) {
	fields := jsonFields(typ)
	required := map[string]bool{}
	for _, r := range s.Required {
		if required[r] {
			w.errorf(path, "required lists %q twice", r)
		}
		required[r] = true
	}

	names := map[string]bool{}
	for _, f := range fields {
		names[f.name] = true
		fp := join(path, f.name)
		prop, ok := s.Properties[f.name]
		if !ok {
			w.errorf(fp, "Go field %s.%s has no property %q in the schema", typ.Name(), f.goName, f.name)
			continue
		}
		switch {
		// The top level (apiVersion, kind, metadata, spec, status) is
		// checked by the apiserver itself.
		case path == "":
		case !f.omitempty && !required[f.name]:
			w.errorf(fp, "Go field %s.%s has no omitempty, so it is always sent: list %q in required of %s",
				typ.Name(), f.goName, f.name, orRoot(path))
		case f.omitempty && required[f.name]:
			w.errorf(fp, "required in the schema, but Go field %s.%s is omitempty: its zero value is dropped and then rejected",
				typ.Name(), f.goName)
		}
		w.walk(fp, f.typ, &prop)
	}
	for _, name := range sortedKeys(s.Properties) {
		if !names[name] {
			w.errorf(join(path, name), "schema property has no JSON field in Go type %s", typ)
		}
	}
	for _, r := range s.Required {
		if !names[r] {
			w.errorf(join(path, r), "listed in required of %s, but Go type %s has no such JSON field", orRoot(path), typ)
		}
	}
}

type jsonField struct {
	name, goName string
	omitempty    bool
	typ          reflect.Type
}

// jsonFields lists the JSON fields of a struct as encoding/json sees them:
// "-" is skipped and untagged or ",inline" embedded structs are flattened.
func jsonFields(typ reflect.Type) []jsonField {
	var out []jsonField
	for i := range typ.NumField() {
		f := typ.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			if ft.Kind() == reflect.Struct {
				out = append(out, jsonFields(ft)...)
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		optList := strings.Split(opts, ",")
		out = append(out, jsonField{
			name:      name,
			goName:    f.Name,
			omitempty: slices.Contains(optList, "omitempty") || slices.Contains(optList, "omitzero"),
			typ:       f.Type,
		})
	}
	return out
}

// walkSchema calls fn for s and every schema below it, in a stable order.
func walkSchema(path string, s *apiextensionsv1.JSONSchemaProps, fn func(string, *apiextensionsv1.JSONSchemaProps)) {
	if s == nil {
		return
	}
	fn(path, s)
	for _, name := range sortedKeys(s.Properties) {
		prop := s.Properties[name]
		walkSchema(join(path, name), &prop, fn)
	}
	if s.Items != nil {
		walkSchema(path+"[]", s.Items.Schema, fn)
		for i := range s.Items.JSONSchemas {
			walkSchema(fmt.Sprintf("%s[%d]", path, i), &s.Items.JSONSchemas[i], fn)
		}
	}
	if s.AdditionalProperties != nil {
		walkSchema(path+"{}", s.AdditionalProperties.Schema, fn)
	}
	for kw, list := range map[string][]apiextensionsv1.JSONSchemaProps{"allOf": s.AllOf, "anyOf": s.AnyOf, "oneOf": s.OneOf} {
		for i := range list {
			walkSchema(fmt.Sprintf("%s(%s[%d])", path, kw, i), &list[i], fn)
		}
	}
	if s.Not != nil {
		walkSchema(path+"(not)", s.Not, fn)
	}
}

// lookup finds the schema at a path like "spec.triggers[].type".
func lookup(s *apiextensionsv1.JSONSchemaProps, path string) *apiextensionsv1.JSONSchemaProps {
	for _, part := range strings.Split(path, ".") {
		name, items := strings.CutSuffix(part, "[]")
		name, values := strings.CutSuffix(name, "{}")
		prop, ok := s.Properties[name]
		if !ok {
			return nil
		}
		s = &prop
		if items {
			if s.Items == nil || s.Items.Schema == nil {
				return nil
			}
			s = s.Items.Schema
		}
		if values {
			if s.AdditionalProperties == nil || s.AdditionalProperties.Schema == nil {
				return nil
			}
			s = s.AdditionalProperties.Schema
		}
	}
	return s
}

// structural converts the schema to the internal API version, as the
// apiserver does, and builds its structural form.
func structural(t *testing.T) *structuralschema.Structural {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensions.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	internal := &apiextensions.CustomResourceDefinition{}
	if err := scheme.Convert(loadCRD(t), internal, nil); err != nil {
		t.Fatalf("converting the CRD to the internal version: %v", err)
	}
	validation, err := apiextensions.GetSchemaForVersion(internal, SchemeGroupVersion.Version)
	if err != nil || validation == nil || validation.OpenAPIV3Schema == nil {
		t.Fatalf("no schema for %s after conversion: %v", SchemeGroupVersion.Version, err)
	}
	s, err := structuralschema.NewStructural(validation.OpenAPIV3Schema)
	if err != nil {
		t.Fatalf("not a structural schema: %v", err)
	}
	return s
}

// toMap turns an object into the JSON map the apiserver validates, with
// integers kept as int64.
func toMap(t *testing.T, obj any) map[string]any {
	t.Helper()
	data, err := json.Marshal(obj)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]any{}
	if err := utiljson.Unmarshal(data, &out); err != nil {
		t.Fatal(err)
	}
	return out
}

// setPath sets a value at a schema path without "[]", if it is not set and
// its parent object exists or can be made.
func setPath(obj map[string]any, path string, v any) {
	parts := strings.Split(path, ".")
	for _, p := range parts[:len(parts)-1] {
		if strings.HasSuffix(p, "[]") {
			return
		}
		next, ok := obj[p].(map[string]any)
		if !ok {
			return
		}
		obj = next
	}
	last := parts[len(parts)-1]
	if _, set := obj[last]; !set {
		obj[last] = v
	}
}

func jsonEqual(raw []byte, want any) bool {
	wantRaw, err := json.Marshal(want)
	if err != nil {
		return false
	}
	var a, b any
	if json.Unmarshal(raw, &a) != nil || json.Unmarshal(wantRaw, &b) != nil {
		return false
	}
	return reflect.DeepEqual(a, b)
}

func join(path, name string) string {
	if path == "" {
		return name
	}
	return path + "." + name
}

func orRoot(path string) string {
	if path == "" {
		return "(root)"
	}
	return path
}

func fmtFloat(f *float64) string {
	if f == nil {
		return "unset"
	}
	return fmt.Sprint(*f)
}

func sameSet(a, b []string) bool {
	return reflect.DeepEqual(sorted(a), sorted(b)) && len(a) == len(b)
}

func sorted(in []string) []string {
	out := slices.Clone(in)
	sort.Strings(out)
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}

// metadataOf is trigger metadata with keys keys in all (query, threshold
// and fillers), headers headers of valueLen characters each, and a query
// of queryLen characters.
func metadataOf(keys, headers, valueLen, queryLen int) json.RawMessage {
	m := map[string]any{"query": strings.Repeat("q", queryLen), "threshold": "1"}
	if headers > 0 {
		h := map[string]string{}
		for i := range headers {
			h[fmt.Sprintf("X-H%d", i)] = strings.Repeat("v", valueLen)
		}
		m["headers"] = h
	}
	for i := len(m); i < keys; i++ {
		m[fmt.Sprintf("k%d", i)] = i
	}
	raw, err := json.Marshal(m)
	if err != nil {
		panic(err)
	}
	return raw
}

// TestCRDPatternsRefuseWhatATerminalWouldRun: the names an admin sees in
// `kubectl elasti` and kubectl's own columns are DNS names, as the
// operator checks them (pkg/validation), and the trigger strings carry no
// control character but tab, newline and carriage return (issue 38,
// hole 4). Each pattern is checked against Go's own validator on valid
// names, the bound and one past it, case, and escape sequences.
func TestCRDPatternsRefuseWhatATerminalWouldRun(t *testing.T) {
	root := rootSchema(t)
	compile := func(path string) *regexp.Regexp {
		s := lookup(root, path)
		if s == nil || s.Pattern == "" {
			t.Fatalf("%s: no pattern", path)
		}
		return regexp.MustCompile(s.Pattern)
	}
	label := func(s string) bool { return len(validation.IsDNS1035Label(s)) == 0 }
	subdomain := func(s string) bool { return len(validation.IsDNS1123Subdomain(s)) == 0 }
	names := []string{"web", "web-1", "a", "1web", "web.v2", "Web", "web_1", "-web", "web-", "web\x1b[2J", "we\u009bb", "ünïcode",
		strings.Repeat("a", 63), strings.Repeat("a", 64), strings.Repeat("a.", 126) + "a", "a..b"}
	for path, valid := range map[string]func(string) bool{
		"spec.service":             label,
		"spec.scaleTargetRef.name": subdomain,
		"spec.wakeWith[].name":     subdomain,
		"spec.autoscaler.name":     subdomain,
	} {
		re := compile(path)
		for _, n := range names {
			// maxLength bounds the length; the pattern says the rest.
			if max := ptr.Deref(lookup(root, path).MaxLength, 0); int64(len(n)) > max {
				continue
			}
			if got, want := re.MatchString(n), valid(n); got != want {
				t.Errorf("%s: pattern matches %q = %v; Go's validator says %v", path, n, got, want)
			}
		}
	}
	for _, path := range []string{"spec.triggers[].metadata.query", "spec.triggers[].metadata.serverAddress",
		"spec.triggers[].metadata.uptimeFilter", "spec.triggers[].metadata.headers{}"} {
		re := compile(path)
		for s, want := range map[string]bool{
			"sum(rate(http_requests_total[1m]))": true, "sum(\n  rate(x[1m])\n)\t> 0\r\n": true, "ünïcode": true,
			"up\x1b]0;owned\x07": false, "up\x1b[2J": false, "nul\x00": false, "back\x08": false, "del\x7f": false,
		} {
			if got := re.MatchString(s); got != want {
				t.Errorf("%s: pattern matches %q = %v, want %v", path, s, got, want)
			}
		}
	}
}
