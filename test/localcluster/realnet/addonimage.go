package realnet

import (
	"bytes"
	"errors"
	"fmt"
	"io"

	appsv1 "k8s.io/api/apps/v1"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
)

// AddonImage is the image of the add-on Deployment namespace/name's first
// container, as the bed's manifests (addons/*.yaml) name it, so a node that
// runs images can build and import one under the same name.
func AddonImage(namespace, name string) (string, error) {
	entries, err := addons.ReadDir("addons")
	if err != nil {
		return "", err
	}
	for _, e := range entries {
		data, err := addons.ReadFile("addons/" + e.Name())
		if err != nil {
			return "", err
		}
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			var d appsv1.Deployment
			if err := dec.Decode(&d); errors.Is(err, io.EOF) {
				break
			} else if err != nil {
				return "", fmt.Errorf("realnet: addons/%s: %w", e.Name(), err)
			}
			if d.Kind == "Deployment" && d.Namespace == namespace && d.Name == name && len(d.Spec.Template.Spec.Containers) > 0 {
				return d.Spec.Template.Spec.Containers[0].Image, nil
			}
		}
	}
	return "", fmt.Errorf("realnet: no add-on Deployment %s/%s", namespace, name)
}
