package integration_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/sluicehq/sluice/internal/redistest"
	"github.com/sluicehq/sluice/internal/syncbuf"
)

// The README's commands are run by TestREADME, or by CI: every ```sh block
// of the README follows a marker <!-- readme: NAME --> that says which.

// readmeBlock is one ```sh block of the README.
type readmeBlock struct {
	name     string   // the marker's NAME
	line     int      // where the block starts, 1-based
	commands []string // its commands, continuation lines joined
}

var readmeMarker = regexp.MustCompile(`^<!-- readme: ([a-z-]+) -->$`)

// readmeBlocks reads the ```sh blocks of the README at path.
func readmeBlocks(t *testing.T, path string) []readmeBlock {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var blocks []readmeBlock
	lines := strings.Split(string(data), "\n")
	for i := 0; i < len(lines); i++ {
		if strings.TrimSpace(lines[i]) != "```sh" {
			continue
		}
		b := readmeBlock{line: i + 1}
		if i > 0 {
			if m := readmeMarker.FindStringSubmatch(strings.TrimSpace(lines[i-1])); m != nil {
				b.name = m[1]
			}
		}
		var cmd strings.Builder
		for i++; i < len(lines) && strings.TrimSpace(lines[i]) != "```"; i++ {
			l := strings.TrimSpace(lines[i])
			if l == "" || strings.HasPrefix(l, "#") {
				continue
			}
			if c, ok := strings.CutSuffix(l, `\`); ok {
				cmd.WriteString(c)
				continue
			}
			cmd.WriteString(l)
			b.commands = append(b.commands, cmd.String())
			cmd.Reset()
		}
		blocks = append(blocks, b)
	}
	return blocks
}

// TestREADME runs the README's commands as a user would, from the root of
// the repository: the worker against a Redis of the test's own and a
// recording SMS webhook, the enqueue commands into it, and the demo. Blocks
// marked "ci" must be commands that .ci/run runs.
func TestREADME(t *testing.T) {
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	byName := readmeBlocksByName(t, root)
	if t.Failed() {
		return
	}

	t.Run("Go tour", func(t *testing.T) { checkGoTour(t, root) })
	t.Run("ci", func(t *testing.T) { checkCIBlocks(t, root, byName) })
	t.Run("worker and enqueue", func(t *testing.T) { checkWorkerAndEnqueue(t, root, byName) })
	// The demo passes, and what it prints matches the sample output of the
	// README's "Try it", whose ranges its varying figures must fall in.
	t.Run("demo", func(t *testing.T) { checkDemo(t, root, byName) })
}

// readmeBlocksByName returns the README's ```sh blocks by marker name, and
// fails t for a block without a marker, a marker missing or one unknown.
func readmeBlocksByName(t *testing.T, root string) map[string]readmeBlock {
	t.Helper()
	blocks := readmeBlocks(t, filepath.Join(root, "README.md"))
	byName := map[string]readmeBlock{}
	for _, b := range blocks {
		if b.name == "" {
			t.Errorf("README.md:%d: a sh block without a <!-- readme: NAME --> marker: nothing checks that it works", b.line)
			continue
		}
		byName[b.name] = b
	}
	for _, name := range []string{"demo", "ci", "worker", "enqueue", "compose"} {
		if _, ok := byName[name]; !ok {
			t.Errorf("README.md has no sh block marked %q", name)
		}
	}
	for name, b := range byName {
		switch name {
		case "demo", "ci", "worker", "enqueue", "compose":
		default:
			t.Errorf("README.md:%d: marker %q: TestREADME knows no such block", b.line, name)
		}
	}
	return byName
}

// checkGoTour checks that the README's Go tour is Example in
// worker/example_test.go, and about 30 lines.
func checkGoTour(t *testing.T, root string) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	example, err := os.ReadFile(filepath.Join(root, "worker", "example_test.go"))
	if err != nil {
		t.Fatal(err)
	}
	_, tour, ok := strings.Cut(string(readme), "## The Go API in 30 lines\n\n```go\n")
	tour, _, ok2 := strings.Cut(tour, "```")
	_, code, ok3 := strings.Cut(string(example), "// README tour begins\n")
	code, _, ok4 := strings.Cut(code, "\t// README tour ends")
	if !ok || !ok2 || !ok3 || !ok4 {
		t.Fatal("README.md has no Go tour, or worker/example_test.go has no README tour markers")
	}
	// The example is indented one tab deeper, inside its function.
	code = strings.ReplaceAll("\n"+code, "\n\t", "\n")[1:]
	if diff := cmp.Diff(strings.Split(code, "\n"), strings.Split(tour, "\n")); diff != "" {
		t.Errorf("the README's Go tour differs from Example in worker/example_test.go, which compiles (-example +README):\n%s", diff)
	}
	if n := strings.Count(tour, "\n"); n > 32 {
		t.Errorf("the Go tour has %d lines; the README promises about 30", n)
	}
}

// checkCIBlocks checks that .ci/run runs the README's "ci" commands, and
// .ci/compose-check.sh its "compose" ones.
func checkCIBlocks(t *testing.T, root string, byName map[string]readmeBlock) {
	t.Helper()
	ci, err := os.ReadFile(filepath.Join(root, ".ci", "run"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range byName["ci"].commands {
		if !containsLine(string(ci), c) {
			t.Errorf("README command %q: .ci/run has no such line", c)
		}
	}
	// CI cannot pull the images docker-compose.yml names, so it runs
	// the README's `docker compose` commands through
	// .ci/compose-check.sh, on the same file with an override for
	// images built here.
	if !containsLine(string(ci), ".ci/compose-check.sh") {
		t.Errorf(".ci/run does not run .ci/compose-check.sh")
	}
	check, err := os.ReadFile(filepath.Join(root, ".ci", "compose-check.sh"))
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range byName["compose"].commands {
		sub, ok := strings.CutPrefix(c, "docker compose ")
		if !ok || len(strings.Fields(sub)) == 0 || !strings.Contains(string(check), "compose "+strings.Fields(sub)[0]) ||
			!strings.Contains(string(check), "-f docker-compose.yml") {
			t.Errorf("README command %q: .ci/compose-check.sh runs no such compose command on docker-compose.yml", c)
		}
	}
}

// The README's enqueue commands: 20 from `enqueue sms --count 20`, and the
// three SMS of examples/bulk.jsonl; of its three emails, the one due now is
// logged (--email-log), and the others are scheduled for later.
const readmeSMS, readmeEmails = 23, 1

// checkWorkerAndEnqueue runs the README's worker, then its enqueue
// commands, and checks what reached the webhook and what the worker logged.
func checkWorkerAndEnqueue(t *testing.T, root string, byName map[string]readmeBlock) {
	t.Helper()
	url := redistest.Own(t)
	sink := newSMSSink(t)
	// The README's commands name a Redis and a webhook; the test's own
	// take their place, and every command must name the Redis.
	localize := func(c string) string {
		if !strings.Contains(c, "redis://localhost:6379/0") {
			t.Fatalf("README command %q does not name redis://localhost:6379/0", c)
		}
		c = strings.ReplaceAll(c, "redis://localhost:6379/0", url)
		return strings.ReplaceAll(c, "http://127.0.0.1:8080/sms", sink.srv.URL)
	}
	worker := byName["worker"].commands
	if len(worker) != 1 {
		t.Fatalf("the worker block has %d commands, want 1", len(worker))
	}
	w := startCommand(t, root, localize(worker[0]))
	w.waitFor(t, `"msg":"worker started"`)

	for _, c := range byName["enqueue"].commands {
		out, err := runCommand(t, root, localize(c))
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
	}
	waitReadmeDeliveries(t, sink, w)
	// Nothing more, and nothing twice: stop the worker first, so that a
	// send still on its way is counted.
	if err := w.stop(); err != nil && !strings.Contains(err.Error(), "exit status") {
		t.Errorf("worker stopped with Ctrl-C: %v\n%s", err, w.output())
	}
	checkReadmeReceipts(t, sink)
	checkReadmeWorkerLog(t, w)
}

// waitReadmeDeliveries waits up to 60 s for the webhook to receive the
// README's SMS and the worker to log its emails.
func waitReadmeDeliveries(t *testing.T, sink *smsSink, w *background) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for n := 0; n < readmeSMS; n = len(sink.receipts()) {
		if time.Now().After(deadline) {
			t.Fatalf("the webhook received %d of %d SMS in 60 s; worker output:\n%s", n, readmeSMS, w.output())
		}
		select {
		case <-sink.notified:
		case <-time.After(time.Second):
		}
	}
	for w.count(`"msg":"email"`) < readmeEmails {
		if time.Now().After(deadline) {
			t.Fatalf("the worker logged %d of %d emails in 60 s:\n%s", w.count(`"msg":"email"`), readmeEmails, w.output())
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// checkReadmeReceipts checks that the webhook answered 200 to each of the
// README's SMS, once each.
func checkReadmeReceipts(t *testing.T, sink *smsSink) {
	t.Helper()
	seen := map[string]bool{}
	for _, r := range sink.receipts() {
		if r.Status != http.StatusOK {
			t.Errorf("the webhook answered %d to %s", r.Status, r.ID)
		}
		if seen[r.ID] {
			t.Errorf("task %s reached the webhook twice", r.ID)
		}
		seen[r.ID] = true
	}
	if got := len(sink.receipts()); got != readmeSMS {
		t.Errorf("the webhook received %d SMS, want %d", got, readmeSMS)
	}
}

// checkReadmeWorkerLog checks the stopped worker's log: no task archived,
// what it enforces on its first line, and a graceful stop.
func checkReadmeWorkerLog(t *testing.T, w *background) {
	t.Helper()
	if n := w.count(`"msg":"task archived"`); n > 0 {
		t.Errorf("the worker archived %d tasks:\n%s", n, w.output())
	}
	// The first line the worker logs says what it enforces (go run may
	// print lines of its own before, which are not JSON).
	var first string
	for line := range strings.Lines(w.output()) {
		if strings.HasPrefix(line, "{") {
			first = line
			break
		}
	}
	if !strings.Contains(first, `"msg":"worker started"`) ||
		!strings.Contains(first, `"enforces":"email:send: tenant-daily 1000/24h0m0s per tenant; sms:send:`) {
		t.Errorf("the worker's first line %q does not say what it enforces", first)
	}
	// Ctrl-C stopped the worker gracefully. (`go run` itself exits 1
	// after an interrupt, whatever the program's status.)
	if !strings.Contains(w.output(), `"msg":"worker stopped"`) {
		t.Errorf("no \"worker stopped\" after Ctrl-C:\n%s", w.output())
	}
}

// checkDemo runs the README's demo commands and checks their output
// against the sample in "The demo in detail".
func checkDemo(t *testing.T, root string, byName map[string]readmeBlock) {
	t.Helper()
	readme, err := os.ReadFile(filepath.Join(root, "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	sample := sampleOutput(t, string(readme), "## The demo in detail")
	for _, c := range byName["demo"].commands {
		out, err := runCommand(t, root, c)
		if err != nil {
			t.Fatalf("%s: %v\n%s", c, err, out)
		}
		for _, p := range sampleProblems(sample, string(out)) {
			t.Error(p)
		}
		if t.Failed() {
			t.Logf("the demo's output:\n%s", out)
		}
	}
}

// sampleLine is a line of sample output in the README, where a figure that
// varies from run to run is a range: "sent in 12.5 to 16 s" stands for
// "sent in 13.2s".
type sampleLine struct {
	text   string         // as the README writes it
	re     *regexp.Regexp // matches the line of the real output, a group per range
	ranges [][2]float64   // the ranges, in order
}

// rangeRE matches a range of the README's sample output, its unit apart:
// "12.5 to 16 s", "40 to 70".
var rangeRE = regexp.MustCompile(`(\d+(?:\.\d+)?) to (\d+(?:\.\d+)?)( s)?`)

// sampleOutput returns the lines of the ```text blocks of the README
// section that starts with heading, up to the next "## ".
func sampleOutput(t *testing.T, readme, heading string) []sampleLine {
	t.Helper()
	_, section, ok := strings.Cut(readme, "\n"+heading+"\n")
	if !ok {
		t.Fatalf("README.md has no %q section", heading)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	var lines []sampleLine
	in := false
	for _, l := range strings.Split(section, "\n") {
		switch {
		case l == "```text":
			in = true
		case l == "```":
			in = false
		case in:
			sl, err := parseSampleLine(l)
			if err != nil {
				t.Fatalf("README.md: %v", err)
			}
			lines = append(lines, sl)
		}
	}
	if len(lines) == 0 {
		t.Fatalf("README.md: %q shows no sample output (```text)", heading)
	}
	return lines
}

// parseSampleLine reads a line of sample output: its ranges become groups
// matching a number (followed by "s" for a range in s), its runs of spaces
// match any run of spaces (a table's columns widen to fit a range), and the
// rest must match as written.
func parseSampleLine(line string) (sampleLine, error) {
	literal := func(s string) string {
		parts := regexp.MustCompile(` +`).Split(s, -1)
		for i, p := range parts {
			parts[i] = regexp.QuoteMeta(p)
		}
		return strings.Join(parts, " +")
	}
	sl := sampleLine{text: line}
	var b strings.Builder
	last := 0
	for _, m := range rangeRE.FindAllStringSubmatchIndex(line, -1) {
		lo, err1 := strconv.ParseFloat(line[m[2]:m[3]], 64)
		hi, err2 := strconv.ParseFloat(line[m[4]:m[5]], 64)
		if err1 != nil || err2 != nil || lo > hi {
			return sl, fmt.Errorf("sample line %q: range %q is not low to high", line, line[m[0]:m[1]])
		}
		b.WriteString(literal(line[last:m[0]]) + `(\d+(?:\.\d+)?)`)
		if m[6] >= 0 {
			b.WriteString("s")
		}
		sl.ranges = append(sl.ranges, [2]float64{lo, hi})
		last = m[1]
	}
	b.WriteString(literal(line[last:]))
	sl.re = regexp.MustCompile("^" + b.String() + "$")
	return sl, nil
}

// sampleProblems says where out differs from sample: a line of sample that
// matches no line of out (in order), or a figure outside its range.
func sampleProblems(sample []sampleLine, out string) []string {
	var problems []string
	lines := strings.Split(out, "\n")
	i := 0
	for _, sl := range sample {
		var m []string
		for ; i < len(lines); i++ {
			if m = sl.re.FindStringSubmatch(lines[i]); m != nil {
				break
			}
		}
		if m == nil {
			return append(problems, fmt.Sprintf("README.md's sample line %q matches no line of the output after the lines before it", sl.text))
		}
		for j, r := range sl.ranges {
			if v, _ := strconv.ParseFloat(m[j+1], 64); v < r[0] || v > r[1] {
				problems = append(problems, fmt.Sprintf("%q: %s is outside README.md's %v to %v (%q)", lines[i], m[j+1], r[0], r[1], sl.text))
			}
		}
		i++
	}
	return problems
}

// containsLine reports whether script has a line with the words of command,
// in order.
func containsLine(script, command string) bool {
	want := strings.Fields(command)
	for _, line := range strings.Split(script, "\n") {
		if slices.Equal(strings.Fields(line), want) {
			return true
		}
	}
	return false
}

// readmeEnv is the environment of README commands: this one, without the
// variables that would change what the commands do.
func readmeEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "REDIS_URL=") && !strings.HasPrefix(kv, "SLUICE_") {
			env = append(env, kv)
		}
	}
	return env
}

// runCommand runs command with bash in dir, for at most 2 minutes.
func runCommand(t *testing.T, dir, command string) ([]byte, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", "-c", command)
	cmd.Dir, cmd.Env = dir, readmeEnv()
	return cmd.CombinedOutput()
}

// background is a command running in the background, its output kept.
type background struct {
	cmd  *exec.Cmd
	out  *syncbuf.Buffer
	done chan struct{}
	err  error
}

// startCommand starts command with bash in dir, in a process group of its
// own (`exec` replaces the shell). It is killed when the test ends.
func startCommand(t *testing.T, dir, command string) *background {
	t.Helper()
	b := &background{out: &syncbuf.Buffer{}, done: make(chan struct{})}
	b.cmd = exec.Command("bash", "-c", "exec "+command)
	b.cmd.Dir, b.cmd.Env = dir, readmeEnv()
	b.cmd.Stdout, b.cmd.Stderr = b.out, b.out
	b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { b.err = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGKILL)
		<-b.done
	})
	return b
}

func (b *background) output() string { return b.out.String() }

// count returns how many lines of the output contain s.
func (b *background) count(s string) int {
	n := 0
	for line := range strings.Lines(b.output()) {
		if strings.Contains(line, s) {
			n++
		}
	}
	return n
}

// waitFor waits until the output has a line containing s.
func (b *background) waitFor(t *testing.T, s string) {
	t.Helper()
	deadline := time.After(2 * time.Minute)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		sc := bufio.NewScanner(strings.NewReader(b.output()))
		for sc.Scan() {
			if strings.Contains(sc.Text(), s) {
				return
			}
		}
		select {
		case <-b.done:
			t.Fatalf("exited (%v) before printing %q:\n%s", b.err, s, b.output())
		case <-deadline:
			t.Fatalf("no %q after 2 minutes:\n%s", s, b.output())
		case <-tick.C:
		}
	}
}

// stop sends SIGINT to the command's process group, as Ctrl-C in a
// terminal does, and waits for it. (SIGTERM would end `go run` itself at
// once: it relays only SIGINT and SIGQUIT to the program it runs.)
func (b *background) stop() error {
	_ = syscall.Kill(-b.cmd.Process.Pid, syscall.SIGINT)
	select {
	case <-b.done:
		return b.err
	case <-time.After(60 * time.Second):
		return fmt.Errorf("still running 60 s after SIGINT")
	}
}

// TestSampleProblems: a sample line with ranges matches output whose
// figures are within them and none outside; the rest of a line must match
// as written, but for the width of its runs of spaces, and in order.
func TestSampleProblems(t *testing.T) {
	t.Parallel()
	sample := []string{
		"summary: 60 of 60 tasks sent in 12.5 to 16 s, 40 to 70 throttled returns",
		"acme     30/30  20 to 35           4 of 4 in 1s",
		"verdict: PASS",
	}
	cases := []struct {
		name     string
		out      string
		problems int
	}{
		{"within", "summary: 60 of 60 tasks sent in 13.2s, 50 throttled returns\nacme     30/30  26                 4 of 4 in 1s\nverdict: PASS\n", 0},
		{"at the bounds, other widths", "x\nsummary: 60 of 60 tasks sent in 16s, 40 throttled returns\nacme  30/30  35  4 of 4 in 1s\nverdict: PASS", 0},
		{"too slow", "summary: 60 of 60 tasks sent in 16.1s, 50 throttled returns\nacme     30/30  26  4 of 4 in 1s\nverdict: PASS", 1},
		{"too many returns", "summary: 60 of 60 tasks sent in 13.2s, 71 throttled returns\nacme     30/30  36  4 of 4 in 1s\nverdict: PASS", 2},
		{"another unit", "summary: 60 of 60 tasks sent in 13.2ms, 50 throttled returns\nacme     30/30  26  4 of 4 in 1s\nverdict: PASS", 1},
		{"a fixed cell differs", "summary: 60 of 60 tasks sent in 13.2s, 50 throttled returns\nacme     30/30  26  3 of 4 in 1s\nverdict: PASS", 1},
		{"out of order", "verdict: PASS\nsummary: 60 of 60 tasks sent in 13.2s, 50 throttled returns\nacme     30/30  26  4 of 4 in 1s", 1},
		{"verdict fails", "summary: 60 of 60 tasks sent in 13.2s, 50 throttled returns\nacme     30/30  26  4 of 4 in 1s\nverdict: FAIL", 1},
	}
	var lines []sampleLine
	for _, l := range sample {
		sl, err := parseSampleLine(l)
		if err != nil {
			t.Fatal(err)
		}
		lines = append(lines, sl)
	}
	for _, tc := range cases {
		if got := sampleProblems(lines, tc.out); len(got) != tc.problems {
			t.Errorf("%s: %d problems, want %d: %q", tc.name, len(got), tc.problems, got)
		}
	}
	if _, err := parseSampleLine("sent in 16 to 12.5 s"); err == nil {
		t.Errorf("a range from high to low was accepted")
	}
}
