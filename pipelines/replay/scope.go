package replay

// The scope of a plan: which topics and partitions a request names (its --topic flags, or with
// --all-topics the group's committed ones), resolved against the cluster, and how a plan file
// and a scope given with it differ.

import (
	"cmp"
	"context"
	"fmt"
	"slices"

	"github.com/twmb/franz-go/pkg/kadm"
)

// wanted is a set of topics, each with all its partitions (nil) or some, in the order added.
type wanted struct {
	parts map[string][]int32
	order []string
}

func (w *wanted) add(t string, ps []int32) {
	if w.parts == nil {
		w.parts = map[string][]int32{}
	}
	if cur, ok := w.parts[t]; !ok {
		w.order = append(w.order, t)
		w.parts[t] = ps
	} else if cur != nil && ps != nil {
		w.parts[t] = append(cur, ps...)
	} else {
		w.parts[t] = nil
	}
}

// resolve lists the partitions w names, checking they exist.
func (w *wanted) resolve(ctx context.Context, adm *kadm.Client) ([]TopicPartition, error) {
	order := slices.Sorted(slices.Values(w.order))
	td, err := adm.ListTopics(ctx, order...)
	if err != nil {
		return nil, fmt.Errorf("replay: topic metadata: %w", err)
	}
	var parts []TopicPartition
	var missing []string
	for _, t := range order {
		d, ok := td[t]
		if !ok || d.Err != nil {
			missing = append(missing, t)
			continue
		}
		if w.parts[t] == nil {
			for _, n := range d.Partitions.Numbers() {
				parts = append(parts, TopicPartition{t, n})
			}
			continue
		}
		seen := map[int32]bool{}
		for _, n := range w.parts[t] {
			if seen[n] {
				continue
			}
			seen[n] = true
			if _, ok := d.Partitions[n]; !ok {
				missing = append(missing, fmt.Sprintf("%s:%d", t, n))
				continue
			}
			parts = append(parts, TopicPartition{t, n})
		}
	}
	if len(missing) > 0 {
		return nil, fmt.Errorf("%w: %v", ErrUnknownPartition, missing)
	}
	return parts, nil
}

// scopeWanted is what the request's scope names: its --topic flags, or with --all-topics every
// partition the group has committed but its loopback (loopSkipped: it has committed there) and
// the topics the stage moves to their end.
func scopeWanted(req Request, committed kadm.OffsetResponses) (w wanted, loopSkipped bool) {
	if !req.Scope.AllTopics {
		for _, t := range req.Scope.Topics {
			w.add(t.Topic, t.Partitions)
		}
		return w, false
	}
	loop := LoopTopic(req.Group)
	committed.Each(func(o kadm.OffsetResponse) {
		if o.Topic != loop && !slices.Contains(req.ToEnd, o.Topic) {
			w.add(o.Topic, []int32{o.Partition})
		}
	})
	_, ok := committed[loop]
	return w, ok && !slices.Contains(req.ToEnd, loop)
}

// scopePartitions resolves the request's scope to partitions, checking they exist. With
// --from-file they are the file's; a scope given with it is checked as Kafka's tool checks it
// (its partitions must exist) and otherwise only compared with the file, in warnings.
func scopePartitions(ctx context.Context, adm *kadm.Client, req Request, committed kadm.OffsetResponses, p *Plan) ([]TopicPartition, error) {
	w, loopSkipped := scopeWanted(req, committed)
	if req.Spec.Kind != FromFile {
		if loopSkipped {
			p.Warnings = append(p.Warnings, fmt.Sprintf("%s (the group's loopback topic) is left as it is: re-reading it would process forwarded records twice; name it with --topic to move it", LoopTopic(req.Group)))
		}
		if req.Scope.AllTopics && len(w.order) == 0 {
			return nil, badRequest("group %s has no committed offsets: --all-topics has nothing to move; name the topics with --topic", req.Group)
		}
		return w.resolve(ctx, adm)
	}
	var scoped []TopicPartition
	if req.Scope.Given() && len(w.order) > 0 {
		var err error
		if scoped, err = w.resolve(ctx, adm); err != nil {
			return nil, fmt.Errorf("scope of --from-file: %w", err)
		}
	}
	var fw wanted
	for tp := range req.Spec.File {
		fw.add(tp.Topic, []int32{tp.Partition})
	}
	parts, err := fw.resolve(ctx, adm)
	if err != nil {
		return nil, fmt.Errorf("--from-file: %w", err)
	}
	if req.Scope.Given() {
		p.Warnings = append(p.Warnings, fileScopeWarnings(scoped, req.Spec.File)...)
	}
	return parts, nil
}

// fileScopeWarnings names the partitions in the scope but not in the plan file, which stay
// where they are, and those in the file but not in the scope, which move all the same.
func fileScopeWarnings(scoped []TopicPartition, file map[TopicPartition]int64) []string {
	inScope := map[TopicPartition]bool{}
	var notInFile, notInScope []TopicPartition
	for _, tp := range scoped {
		inScope[tp] = true
		if _, ok := file[tp]; !ok {
			notInFile = append(notInFile, tp)
		}
	}
	for tp := range file {
		if !inScope[tp] {
			notInScope = append(notInScope, tp)
		}
	}
	byName := func(a, b TopicPartition) int {
		return cmp.Or(cmp.Compare(a.Topic, b.Topic), cmp.Compare(a.Partition, b.Partition))
	}
	slices.SortFunc(notInFile, byName)
	slices.SortFunc(notInScope, byName)
	var out []string
	if len(notInFile) > 0 {
		out = append(out, fmt.Sprintf("--from-file moves the file's partitions, as Kafka's tool does: %v, in the scope but not in the file, stay where they are", notInFile))
	}
	if len(notInScope) > 0 {
		out = append(out, fmt.Sprintf("--from-file moves the file's partitions, as Kafka's tool does: %v, in the file but not in the scope, move all the same", notInScope))
	}
	return out
}
