// Package kubernetes_test checks the manifests of deploy/kubernetes: each
// document decodes strictly (an unknown or misspelled field fails) into
// the Kubernetes API type its kind names, and the worker's Deployment is
// wired as docs/DAYONE.md says. A module of its own, so that the API
// types stay out of Sluice's.
package kubernetes_test

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"sigs.k8s.io/yaml"

	"github.com/sluicehq/sluice/policies"
)

// manifests are the decoded documents of every manifest, by kind and name.
type manifests map[string]any

// typeOf returns a new value of the API type of apiVersion and kind.
func typeOf(apiVersion, kind string) (any, bool) {
	switch apiVersion + " " + kind {
	case "apps/v1 Deployment":
		return &appsv1.Deployment{}, true
	case "v1 Service":
		return &corev1.Service{}, true
	case "v1 ConfigMap":
		return &corev1.ConfigMap{}, true
	case "v1 Secret":
		return &corev1.Secret{}, true
	case "policy/v1 PodDisruptionBudget":
		return &policyv1.PodDisruptionBudget{}, true
	}
	return nil, false
}

var separator = regexp.MustCompile(`(?m)^---\s*$`)

// decode decodes every document of data strictly into its API type.
func decode(name string, data []byte, into manifests) error {
	for i, doc := range separator.Split(string(data), -1) {
		if strings.TrimSpace(doc) == "" {
			continue
		}
		var tm metav1.TypeMeta
		if err := yaml.Unmarshal([]byte(doc), &tm); err != nil {
			return fmt.Errorf("%s, document %d: %w", name, i+1, err)
		}
		obj, ok := typeOf(tm.APIVersion, tm.Kind)
		if !ok {
			return fmt.Errorf("%s, document %d: no API type for %s %s", name, i+1, tm.APIVersion, tm.Kind)
		}
		if err := yaml.UnmarshalStrict([]byte(doc), obj); err != nil {
			return fmt.Errorf("%s, document %d (%s): %w", name, i+1, tm.Kind, err)
		}
		meta := obj.(metav1.Object)
		into[tm.Kind+"/"+meta.GetName()] = obj
	}
	return nil
}

// load decodes every manifest of the directory.
func load(t *testing.T) manifests {
	t.Helper()
	files, err := filepath.Glob("*.yaml")
	if err != nil || len(files) == 0 {
		t.Fatalf("no manifests: %v", err)
	}
	m := manifests{}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		if err := decode(f, data, m); err != nil {
			t.Fatal(err)
		}
	}
	return m
}

// TestStrictDecoding: a misspelled field in a manifest fails to decode,
// naming it; the manifests themselves decode.
func TestStrictDecoding(t *testing.T) {
	data, err := os.ReadFile("worker.yaml")
	if err != nil {
		t.Fatal(err)
	}
	bad := strings.Replace(string(data), "readinessProbe:", "readinesProbe:", 1)
	if err := decode("worker.yaml", []byte(bad), manifests{}); err == nil || !strings.Contains(err.Error(), "readinesProbe") {
		t.Errorf("a misspelled readinessProbe: %v, want an error naming it", err)
	}
	if m := load(t); len(m) < 7 {
		t.Errorf("%d documents decoded, want the 7 of the manifests", len(m))
	}
}

// TestWorkerDeployment: the worker's probes, grace, resources, policies
// and secrets are wired as docs/DAYONE.md says.
func TestWorkerDeployment(t *testing.T) {
	m := load(t)
	d, ok := m["Deployment/sluice-worker"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no Deployment sluice-worker")
	}
	pod := d.Spec.Template.Spec
	c := pod.Containers[0]
	args := map[string]string{}
	for _, a := range c.Args {
		k, v, _ := strings.Cut(strings.TrimPrefix(a, "--"), "=")
		args[k] = v
	}
	ports := map[string]int32{}
	for _, p := range c.Ports {
		ports[p.Name] = p.ContainerPort
	}
	if _, port, _ := strings.Cut(args["metrics-addr"], ":"); port != fmt.Sprint(ports["ops"]) {
		t.Errorf("--metrics-addr %q and the ops port %d differ", args["metrics-addr"], ports["ops"])
	}
	for _, p := range []struct {
		what  string
		probe *corev1.Probe
		path  string
	}{{"readiness", c.ReadinessProbe, "/readyz"}, {"liveness", c.LivenessProbe, "/healthz"}} {
		if p.probe == nil || p.probe.HTTPGet == nil || p.probe.HTTPGet.Path != p.path || p.probe.HTTPGet.Port.String() != "ops" {
			t.Errorf("the %s probe: %+v, want GET %s on the ops port", p.what, p.probe, p.path)
		}
	}
	shutdown, err := time.ParseDuration(args["shutdown-timeout"])
	if err != nil || pod.TerminationGracePeriodSeconds == nil ||
		time.Duration(*pod.TerminationGracePeriodSeconds)*time.Second <= shutdown {
		t.Errorf("termination grace %v s against --shutdown-timeout %q: want it longer", pod.TerminationGracePeriodSeconds, args["shutdown-timeout"])
	}
	if c.Resources.Requests.Cpu().IsZero() || c.Resources.Requests.Memory().IsZero() || c.Resources.Limits.Memory().IsZero() {
		t.Errorf("resources %+v: want CPU and memory requests and a memory limit", c.Resources)
	}
	checkPolicies(t, m, pod, c, args["policies"])
	checkSecrets(t, m, c)
	pdb, ok := m["PodDisruptionBudget/sluice-worker"].(*policyv1.PodDisruptionBudget)
	if !ok {
		t.Fatal("no PodDisruptionBudget sluice-worker")
	}
	sel, err := metav1.LabelSelectorAsSelector(pdb.Spec.Selector)
	if err != nil || !sel.Matches(labels.Set(d.Spec.Template.Labels)) {
		t.Errorf("the PodDisruptionBudget's selector %v does not select the worker's pods (%v)", pdb.Spec.Selector, err)
	}
}

// checkPolicies: the policies file is the ConfigMap's, mounted whole (a
// subPath mount never sees an update), and Sluice takes it.
func checkPolicies(t *testing.T, m manifests, pod corev1.PodSpec, c corev1.Container, path string) {
	t.Helper()
	var mounted bool
	for _, vm := range c.VolumeMounts {
		if vm.MountPath != filepath.Dir(path) {
			continue
		}
		for _, v := range pod.Volumes {
			if v.Name == vm.Name && v.ConfigMap != nil && vm.SubPath == "" {
				mounted = true
				cm, ok := m["ConfigMap/"+v.ConfigMap.Name].(*corev1.ConfigMap)
				if !ok {
					t.Fatalf("no ConfigMap %s", v.ConfigMap.Name)
				}
				if _, err := policies.Parse("ConfigMap "+cm.Name, []byte(cm.Data[filepath.Base(path)])); err != nil {
					t.Errorf("the ConfigMap's policies: %v", err)
				}
			}
		}
	}
	if !mounted {
		t.Errorf("--policies %s is not in a ConfigMap mounted whole at %s", path, filepath.Dir(path))
	}
}

// checkSecrets: every secret the worker reads names a key of the Secret.
func checkSecrets(t *testing.T, m manifests, c corev1.Container) {
	t.Helper()
	for _, e := range c.Env {
		ref := e.ValueFrom
		if ref == nil || ref.SecretKeyRef == nil {
			t.Errorf("env %s is not from a Secret", e.Name)
			continue
		}
		s, ok := m["Secret/"+ref.SecretKeyRef.Name].(*corev1.Secret)
		if !ok {
			t.Errorf("env %s names Secret %s, which the manifests do not hold", e.Name, ref.SecretKeyRef.Name)
			continue
		}
		if _, has := s.StringData[ref.SecretKeyRef.Key]; !has {
			t.Errorf("env %s names key %s of Secret %s, which it does not hold", e.Name, ref.SecretKeyRef.Key, ref.SecretKeyRef.Name)
		}
	}
}

// TestRedisForTrying: the Redis of the manifests says it is for trying
// only, and does not evict.
func TestRedisForTrying(t *testing.T) {
	m := load(t)
	d, ok := m["Deployment/sluice-redis"].(*appsv1.Deployment)
	if !ok {
		t.Fatal("no Deployment sluice-redis")
	}
	if !strings.Contains(d.Annotations["sluice.dev/purpose"], "for trying only") {
		t.Errorf("the Redis's annotations %v do not mark it for trying only", d.Annotations)
	}
	if args := strings.Join(d.Spec.Template.Spec.Containers[0].Args, " "); !strings.Contains(args, "--maxmemory-policy noeviction") {
		t.Errorf("the Redis's args %q: want --maxmemory-policy noeviction", args)
	}
}
