package policies

import (
	"fmt"
	"slices"

	"go.yaml.in/yaml/v3"
)

// mapping is a YAML mapping of string keys, decoded in time linear in its
// size. yaml.v3 looks for a repeated key by comparing every pair of keys
// of a mapping: 40,000 tenants took 6.4 s. A repeated key is refused here
// with yaml's own message, through a Go map; merges (<<) follow yaml's
// rules: the mapping's own keys win, then the first merged mapping's.
type mapping[V any] map[string]V

// UnmarshalYAML decodes n, a mapping; yaml reports a node of another
// kind as for a map.
func (m *mapping[V]) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind != yaml.MappingNode {
		var plain map[string]V
		return n.Decode(&plain)
	}
	*m = mapping[V]{}
	return m.add(n, map[string]bool{})
}

// add decodes the keys of mapping n that are not in set yet, then those
// of the mappings it merges, and adds them to m and to set.
func (m mapping[V]) add(n *yaml.Node, set map[string]bool) error {
	lines := make(map[string]int, len(n.Content)/2) // n's keys, to their line
	var merge *yaml.Node
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if isMergeKey(k) {
			merge = v
			continue
		}
		var key string
		if err := k.Decode(&key); err != nil {
			return err
		}
		if line, ok := lines[key]; ok {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: mapping key %#v already defined at line %d", k.Line, k.Value, line)}}
		}
		lines[key] = k.Line
		if set[key] {
			continue
		}
		set[key] = true
		var val V
		if err := v.Decode(&val); err != nil {
			return err
		}
		m[key] = val
	}
	if merge == nil {
		return nil
	}
	merged := []*yaml.Node{merge}
	if merge = resolve(merge); merge.Kind == yaml.SequenceNode {
		merged = merge.Content
	}
	for _, mm := range merged {
		if mm = resolve(mm); mm.Kind != yaml.MappingNode {
			return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: map merge requires map or sequence of maps as the value", mm.Line)}}
		}
		if err := m.add(mm, set); err != nil {
			return err
		}
	}
	return nil
}

// knownFields returns yaml's error for the keys of mapping n, and of the
// mappings it merges, that are not among fields: a struct decoded inside
// a mapping is decoded by Node.Decode, which does not check them.
func knownFields(n *yaml.Node, fields []string) error {
	var errs []string
	var walk func(n *yaml.Node, merged bool)
	walk = func(n *yaml.Node, merged bool) {
		if n = resolve(n); n == nil {
			return
		}
		if n.Kind == yaml.SequenceNode && merged {
			for _, c := range n.Content {
				walk(c, false)
			}
			return
		}
		for i := 0; n.Kind == yaml.MappingNode && i+1 < len(n.Content); i += 2 {
			k := n.Content[i]
			switch {
			case isMergeKey(k):
				walk(n.Content[i+1], true)
			case !slices.Contains(fields, k.Value):
				errs = append(errs, fmt.Sprintf("line %d: field %s not found", k.Line, k.Value))
			}
		}
	}
	walk(n, false)
	if len(errs) > 0 {
		return &yaml.TypeError{Errors: errs}
	}
	return nil
}

// UnmarshalYAML decodes a rule, refusing a field it does not have.
func (r *ruleFile) UnmarshalYAML(n *yaml.Node) error {
	if err := knownFields(n, ruleFields); err != nil {
		return err
	}
	type plain ruleFile
	return n.Decode((*plain)(r))
}

// UnmarshalYAML decodes an override, refusing a field it does not have.
func (o *overrideFile) UnmarshalYAML(n *yaml.Node) error {
	if err := knownFields(n, overrideFields); err != nil {
		return err
	}
	type plain overrideFile
	return n.Decode((*plain)(o))
}

// maxKeys is the most keys of a mapping other than tasks:, weights: and a
// rule's tenants: (and the mappings they merge in): a level has 8 fields
// at most. yaml.v3 decodes a mapping in time quadratic in its keys, so a
// large one where none belongs is refused before it is decoded.
const maxKeys = 16

// bigMappings are the fields whose value may be a mapping of more than
// maxKeys keys, decoded by mapping.
var bigMappings = map[string]bool{"tasks": true, "weights": true, "tenants": true}

// checkMappingSizes returns an error for the first mapping of doc with
// more than maxKeys keys that is not the value of a field of bigMappings,
// or merged into one. Each node is visited at most twice, aliases
// included.
func checkMappingSizes(doc *yaml.Node) error {
	type visit struct {
		n   *yaml.Node
		big bool
	}
	seen := map[visit]bool{}
	var walk func(n *yaml.Node, big bool) error
	walk = func(n *yaml.Node, big bool) error {
		for n != nil && n.Kind == yaml.AliasNode {
			n = n.Alias
		}
		if n == nil || seen[visit{n, big}] {
			return nil
		}
		seen[visit{n, big}] = true
		if n.Kind == yaml.MappingNode && len(n.Content)/2 > maxKeys && !big {
			return fmt.Errorf("line %d: a mapping of %d keys: only tasks:, weights: and tenants: hold more than %d", n.Line, len(n.Content)/2, maxKeys)
		}
		for i, c := range n.Content {
			childBig := false
			if n.Kind == yaml.MappingNode && i%2 == 1 {
				k := n.Content[i-1]
				// A field of bigMappings, not an entry of one so named.
				childBig = bigMappings[k.Value] && !big || isMergeKey(k) && big
				if isMergeKey(k) && big {
					if m := resolve(c); m != nil && m.Kind == yaml.SequenceNode {
						for _, mm := range m.Content {
							if err := walk(mm, true); err != nil {
								return err
							}
						}
						continue
					}
				}
			}
			if err := walk(c, childBig); err != nil {
				return err
			}
		}
		return nil
	}
	return walk(doc, false)
}
