package testenv

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"

	"github.com/backflowhq/backflow/sinks/redis"
)

// RedisNode is one line of a Redis Cluster node's CLUSTER NODES, as every node should agree on
// it: the fields that describe the cluster's shape, not a node's own timers.
type RedisNode struct {
	ID     string
	Addr   string // host:port, without the cluster bus port
	Master bool
	Of     string   // the master's ID, for a replica
	Slots  []string // slot ranges ("0-5460"), for a master
	Flags  string   // as printed, without "myself"
	Linked bool     // link-state connected
}

// RedisConverged asks every node of the cluster stack's Redis Cluster, one by one, whether the
// cluster has settled, and says what is not: each node answers cluster_state:ok with all 16384
// slots ok and every node known; no node sees another failing (fail, fail?), in handshake or
// with its link down; all nodes print the same masters, replicas and slot ranges; there are 3
// masters whose ranges cover the 16384 slots once, and 3 replicas, one on each; and each
// replica's link to its master is up. It is the state deploy/local/stack --cluster up waits
// for, checked here apart from the script. It returns the view all nodes agree on.
func (c ClusterStack) RedisConverged(ctx context.Context) ([]RedisNode, error) {
	addrs := c.List(ClusterRedisAddrs)
	if len(addrs) == 0 {
		return nil, errors.New("testenv: no Redis Cluster addresses in the cluster stack's env file")
	}
	var first []RedisNode
	var firstAddr string
	for _, addr := range addrs {
		view, err := redisNodeView(ctx, addr, len(addrs))
		if err != nil {
			return nil, err
		}
		if first == nil {
			first, firstAddr = view, addr
			continue
		}
		if a, b := fmt.Sprint(first), fmt.Sprint(view); a != b {
			return nil, fmt.Errorf("redis %s and %s disagree:\n%s\n%s", firstAddr, addr, a, b)
		}
	}
	masters := map[string]bool{}
	covered := 0
	for _, n := range first {
		if n.Master && len(n.Slots) > 0 {
			masters[n.ID] = true
			for _, r := range n.Slots {
				lo, hi, ok := strings.Cut(r, "-")
				if !ok {
					hi = lo
				}
				a, err1 := strconv.Atoi(lo)
				b, err2 := strconv.Atoi(hi)
				if err1 != nil || err2 != nil || b < a {
					return nil, fmt.Errorf("redis: slot range %q of %s", r, n.Addr)
				}
				covered += b - a + 1
			}
		}
	}
	followed := map[string]int{}
	replicas := 0
	for _, n := range first {
		if !n.Master {
			replicas++
			if !masters[n.Of] {
				return nil, fmt.Errorf("redis: replica %s follows %s, which holds no slots", n.Addr, n.Of)
			}
			followed[n.Of]++
		}
	}
	want := len(addrs) / 2
	if len(masters) != want || replicas != want || len(followed) != want || covered != 16384 {
		return nil, fmt.Errorf("redis: %d masters with slots covering %d slots and %d replicas on %d of them, want %d, 16384, %d and %d: %v",
			len(masters), covered, replicas, len(followed), want, want, want, first)
	}
	return first, nil
}

// redisNodeView is what the node at addr says of the cluster, sorted by node ID, or why it is
// not settled.
func redisNodeView(ctx context.Context, addr string, nodes int) ([]RedisNode, error) {
	rdb, err := redis.Open(ctx, redis.Conn{Addr: addr})
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	defer rdb.Close()
	info, err := rdb.ClusterInfo(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redis %s: cluster info: %w", addr, err)
	}
	for _, want := range []string{"cluster_state:ok", "cluster_slots_ok:16384", fmt.Sprintf("cluster_known_nodes:%d", nodes)} {
		if !strings.Contains(info, want) {
			return nil, fmt.Errorf("redis %s: cluster info lacks %s:\n%s", addr, want, info)
		}
	}
	text, err := rdb.ClusterNodes(ctx).Result()
	if err != nil {
		return nil, fmt.Errorf("redis %s: cluster nodes: %w", addr, err)
	}
	view, err := parseClusterNodes(text)
	if err != nil {
		return nil, fmt.Errorf("redis %s: %w", addr, err)
	}
	for _, n := range view {
		if !n.Linked || strings.Contains(n.Flags, "fail") || strings.Contains(n.Flags, "handshake") || strings.Contains(n.Flags, "noaddr") {
			return nil, fmt.Errorf("redis %s sees %s as %s, link connected=%v", addr, n.Addr, n.Flags, n.Linked)
		}
	}
	repl, err := rdb.Info(ctx, "replication").Result()
	if err != nil {
		return nil, fmt.Errorf("redis %s: info replication: %w", addr, err)
	}
	if strings.Contains(repl, "role:slave") && !strings.Contains(repl, "master_link_status:up") {
		return nil, fmt.Errorf("redis %s: a replica whose link to its master is not up:\n%s", addr, repl)
	}
	return view, nil
}

// parseClusterNodes reads CLUSTER NODES: "ID HOST:PORT@BUS FLAGS MASTER PING PONG EPOCH LINK
// SLOT...". A slot being migrated ("[...]") is an error: the cluster is still changing.
func parseClusterNodes(text string) ([]RedisNode, error) {
	var out []RedisNode
	for _, line := range strings.Split(strings.TrimSpace(text), "\n") {
		f := strings.Fields(line)
		if len(f) < 8 {
			return nil, fmt.Errorf("cluster nodes: short line %q", line)
		}
		var flags []string
		for _, fl := range strings.Split(f[2], ",") {
			if fl != "myself" {
				flags = append(flags, fl)
			}
		}
		n := RedisNode{ID: f[0], Flags: strings.Join(flags, ","), Linked: f[7] == "connected"}
		n.Addr, _, _ = strings.Cut(f[1], "@")
		n.Master = strings.Contains(n.Flags, "master")
		if !n.Master {
			n.Of = f[3]
		}
		for _, s := range f[8:] {
			if strings.HasPrefix(s, "[") {
				return nil, fmt.Errorf("cluster nodes: slot %s of %s is migrating", s, n.Addr)
			}
			n.Slots = append(n.Slots, s)
		}
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].ID < out[j].ID })
	return out, nil
}

// RedisSlotMaster names the cluster stack's Redis node (redis-1 ... redis-6, as Kill takes it)
// that serves slot as its master now.
func (c ClusterStack) RedisSlotMaster(ctx context.Context, slot int) (string, error) {
	seeds := c.List(ClusterRedisAddrs)
	rdb, err := redis.Open(ctx, redis.Conn{Mode: redis.ModeCluster, Addrs: seeds})
	if err != nil {
		return "", err
	}
	defer rdb.Close()
	slots, err := rdb.ClusterSlots(ctx).Result()
	if err != nil {
		return "", fmt.Errorf("redis: cluster slots: %w", err)
	}
	for _, sl := range slots {
		if sl.Start <= slot && slot <= sl.End && len(sl.Nodes) > 0 {
			for i, a := range seeds {
				if a == sl.Nodes[0].Addr {
					return fmt.Sprintf("redis-%d", i+1), nil
				}
			}
			return "", fmt.Errorf("redis: slot %d is served by %s, which is not a seed of %v", slot, sl.Nodes[0].Addr, seeds)
		}
	}
	return "", fmt.Errorf("redis: no node serves slot %d: %v", slot, slots)
}
