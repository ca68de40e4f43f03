package loadgen

import (
	"fmt"
	"os"
	"strings"
)

// DefaultWords are the harmless stand-ins for sensitive words that loadgen plants in texts.
// They are entries of the sample dictionary the sensitive-word service ships, so planted
// texts produce hits.
var DefaultWords = []string{
	"bluefin", "quasar", "zephyrine", "marmalade", "tangerine code", "nightjar",
	"obsidian key", "velvet hammer", "paper tiger", "glasswing",
}

// vocabulary is the filler text is made of.
var vocabulary = []string{
	"please", "summarize", "the", "following", "report", "about", "quarterly", "sales", "and",
	"explain", "how", "to", "configure", "a", "cluster", "with", "three", "nodes", "write",
	"short", "poem", "on", "autumn", "translate", "this", "sentence", "into", "french",
	"what", "is", "difference", "between", "latency", "throughput", "list", "five", "ideas",
	"for", "team", "offsite", "review", "my", "code", "suggest", "tests", "answer", "in",
	"detail", "thanks", "model", "results", "data", "stream", "window", "table", "query",
}

// ReadWords reads a dictionary file: one entry per line, the first tab-separated column;
// blank lines and # comments are skipped. An empty dictionary is an error.
func ReadWords(path string) ([]string, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []string
	for _, line := range strings.Split(string(data), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		word, _, _ := strings.Cut(line, "\t")
		if word = strings.TrimSpace(word); word != "" {
			out = append(out, word)
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%s: no words", path)
	}
	return out, nil
}
