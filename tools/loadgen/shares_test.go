package loadgen

import (
	"context"
	"math"
	"testing"
	"time"
)

// shares is a Config's or StreamConfig's six shares and rates, in a fixed order.
type shares struct{ sensitive, dup, cross, poison, v2, embedding float64 }

func sharesOf(c Config) shares {
	return shares{c.SensitiveShare, c.DuplicateRate, c.CrossPartitionShare, c.PoisonRate, c.V2Share, c.EmbeddingShare}
}

// TestConfigSharesHaveOneMeaning: 0 takes the default, None is none, a fraction is itself, and
// applying the defaults again (Run applies them, then NewGenerator) changes nothing.
func TestConfigSharesHaveOneMeaning(t *testing.T) {
	defaults := shares{0.05, 0.02, 0.25, 0.01, 0.5, 0.3}
	for _, c := range []struct {
		name string
		cfg  Config
		want shares
	}{
		{"zero takes the defaults", Config{}, defaults},
		{"none is none", Config{SensitiveShare: None, DuplicateRate: None, CrossPartitionShare: None, PoisonRate: None, V2Share: None, EmbeddingShare: None}, shares{}},
		{"fractions are themselves", Config{SensitiveShare: 0.1, DuplicateRate: 0.2, CrossPartitionShare: 1, PoisonRate: 0.3, V2Share: 0.4, EmbeddingShare: 0.6}, shares{0.1, 0.2, 1, 0.3, 0.4, 0.6}},
		{"mixed", Config{PoisonRate: None, DuplicateRate: 0.07}, shares{0.05, 0.07, 0.25, 0, 0.5, 0.3}},
	} {
		t.Run(c.name, func(t *testing.T) {
			once := c.cfg.withDefaults()
			if got := sharesOf(once); got != c.want {
				t.Fatalf("defaults applied once: %+v, want %+v", got, c.want)
			}
			if got := sharesOf(once.withDefaults().WithDefaults()); got != c.want {
				t.Fatalf("defaults applied three times: %+v, want %+v", got, c.want)
			}
			if err := once.Validate(); err != nil {
				t.Fatalf("resolved config: %v", err)
			}
		})
	}
	s := StreamConfig{DuplicateRate: None, PoisonRate: None, CrossPartitionShare: 0.5}.withDefaults().withDefaults()
	if got := (shares{s.SensitiveShare, s.DuplicateRate, s.CrossPartitionShare, s.PoisonRate, 0, 0}); got != (shares{0.05, 0, 0.5, 0, 0, 0}) {
		t.Fatalf("stream config resolved twice: %+v", got)
	}
}

// TestConfigRefusesNegativeShares: a negative share other than None is an error, not "none".
func TestConfigRefusesNegativeShares(t *testing.T) {
	for _, cfg := range []Config{{PoisonRate: -0.5}, {DuplicateRate: -2}, {EmbeddingShare: -0.01}} {
		if err := cfg.Validate(); err == nil {
			t.Errorf("%+v accepted", sharesOf(cfg))
		}
	}
	if err := (StreamConfig{Topic: "t", Schema: `"string"`, PoisonRate: -0.5}).Validate(); err == nil {
		t.Error("stream poison rate -0.5 accepted")
	}
}

// within reports whether k successes of n trials fit p within five binomial standard
// deviations.
func within(k, n int, p float64) bool {
	return math.Abs(float64(k)-float64(n)*p) <= 5*math.Sqrt(float64(n)*p*(1-p))
}

// TestRunSharesOnTraffic sends the traffic of each Config through Run to an in-process
// cluster and counts what was sent: None sends exactly none, the defaults their documented
// shares (poison exactly, the random shares within a binomial bound).
func TestRunSharesOnTraffic(t *testing.T) {
	reg := fakeRegistry(t)
	cl := fakeCluster(t)
	const requests = 1000
	none := Config{SensitiveShare: None, DuplicateRate: None, CrossPartitionShare: None, PoisonRate: None, V2Share: None, EmbeddingShare: None}
	for i, c := range []struct {
		name string
		cfg  Config
		// want: exact poison count; shares of duplicates (per source record), cross-partition
		// (per duplicate), sensitive texts and v2 (per inference result).
		poison               int
		dup, cross, sens, v2 float64
	}{
		{name: "none", cfg: none},
		{name: "defaults", cfg: Config{}, poison: 30, dup: 0.02, cross: 0.25, sens: 0.05, v2: 0.5},
		{name: "none, poison only", cfg: Config{SensitiveShare: None, DuplicateRate: None, PoisonRate: 0.1, V2Share: None}, poison: 300},
		{name: "all v2, every duplicate elsewhere", cfg: Config{DuplicateRate: 0.1, CrossPartitionShare: 1, PoisonRate: None, V2Share: 1}, dup: 0.1, cross: 1, sens: 0.05, v2: 1},
	} {
		t.Run(c.name, func(t *testing.T) {
			cfg := c.cfg
			cfg.Requests, cfg.Seed = requests, uint64(40+i)
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			st, err := Run(ctx, cfg, cl, reg, Options{RunID: c.name})
			if err != nil || st.Failed != 0 || st.Requests != requests || st.Originals != 3*requests {
				t.Fatalf("run: %v; stats %v", err, st)
			}
			poison := 0
			for _, n := range st.Poison {
				poison += n
			}
			if poison != c.poison {
				t.Errorf("poison: %d, want %d", poison, c.poison)
			}
			exact := func(what string, got int, share float64, n int) {
				t.Helper()
				switch share {
				case 0:
					if got != 0 {
						t.Errorf("%s: %d of %d, want none", what, got, n)
					}
				case 1:
					if got != n {
						t.Errorf("%s: %d of %d, want all", what, got, n)
					}
				default:
					if !within(got, n, share) {
						t.Errorf("%s: %d of %d, want about %v", what, got, n, share)
					}
				}
			}
			exact("duplicates", st.Duplicates, c.dup, 3*requests)
			exact("cross-partition duplicates", st.CrossPartition, c.cross, st.Duplicates)
			exact("v2 inference results", st.InferenceV2, c.v2, requests)
			if c.sens == 0 && st.Sensitive != 0 {
				t.Errorf("sensitive records: %d, want none", st.Sensitive)
			}
			if c.sens > 0 && st.Sensitive == 0 {
				t.Errorf("sensitive records: none, want about %v of texts", c.sens)
			}
		})
	}
}
