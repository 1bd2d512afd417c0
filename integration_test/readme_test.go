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
	if t.Failed() {
		return
	}

	t.Run("Go tour", func(t *testing.T) {
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
	})

	t.Run("ci", func(t *testing.T) {
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
	})

	t.Run("worker and enqueue", func(t *testing.T) {
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
		// 20 from `enqueue sms --count 20`, and the three SMS of
		// examples/bulk.jsonl (its emails have no provider here).
		const want = 23
		deadline := time.Now().Add(60 * time.Second)
		for n := 0; n < want; n = len(sink.receipts()) {
			if time.Now().After(deadline) {
				t.Fatalf("the webhook received %d of %d SMS in 60 s; worker output:\n%s", n, want, w.output())
			}
			select {
			case <-sink.notified:
			case <-time.After(time.Second):
			}
		}
		// Nothing more, and nothing twice: stop the worker first, so that a
		// send still on its way is counted.
		if err := w.stop(); err != nil && !strings.Contains(err.Error(), "exit status") {
			t.Errorf("worker stopped with Ctrl-C: %v\n%s", err, w.output())
		}
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
		if got := len(sink.receipts()); got != want {
			t.Errorf("the webhook received %d SMS, want %d", got, want)
		}
		// Ctrl-C stopped the worker gracefully. (`go run` itself exits 1
		// after an interrupt, whatever the program's status.)
		if !strings.Contains(w.output(), `"msg":"worker stopped"`) {
			t.Errorf("no \"worker stopped\" after Ctrl-C:\n%s", w.output())
		}
	})

	t.Run("demo", func(t *testing.T) {
		for _, c := range byName["demo"].commands {
			out, err := runCommand(t, root, c)
			if err != nil {
				t.Fatalf("%s: %v\n%s", c, err, out)
			}
		}
	})
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
