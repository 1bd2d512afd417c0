package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// drainProc is one worker process of the drain section: the harness's own
// executable, run with drainWorkerEnv set (see RunWorkerIfChild).
//
// It cannot outlive the harness: its standard input is a pipe from the
// harness, and it shuts down when the pipe closes, as it does when the
// harness exits for any reason, a kill included.
type drainProc struct {
	spec   drainWorkerSpec
	cmd    *exec.Cmd
	stdin  io.WriteCloser
	output *tailBuffer   // its standard output and error, the end of them
	done   chan struct{} // closed when it has exited
	err    error         // how it exited, once done
}

// startDrainProc starts exe as the worker process of spec.
func startDrainProc(exe string, spec drainWorkerSpec) (*drainProc, error) {
	js, err := json.Marshal(spec)
	if err != nil {
		return nil, err
	}
	p := &drainProc{spec: spec, output: &tailBuffer{max: 16 << 10}, done: make(chan struct{})}
	p.cmd = exec.Command(exe)
	p.cmd.Env = append(os.Environ(), drainWorkerEnv+"="+string(js))
	p.cmd.Stdout, p.cmd.Stderr = p.output, p.output
	if p.stdin, err = p.cmd.StdinPipe(); err != nil {
		return nil, err
	}
	if err := p.cmd.Start(); err != nil {
		return nil, fmt.Errorf("start worker process %d: %w", spec.Process, err)
	}
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// exited reports whether the process has exited.
func (p *drainProc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// terminate asks the process to shut down gracefully: SIGTERM.
func (p *drainProc) terminate() {
	if p != nil && !p.exited() {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
	}
}

// await waits for the process to exit after terminate, and kills it after
// drainStopTimeout.
func (p *drainProc) await() {
	if p == nil {
		return
	}
	select {
	case <-p.done:
	case <-time.After(drainStopTimeout):
	}
	p.kill()
}

// kill kills the process if it still runs and waits for it. A nil p is
// none.
func (p *drainProc) kill() {
	if p == nil {
		return
	}
	if !p.exited() {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
	_ = p.stdin.Close()
}

// counters returns what the process counted; it has exited.
func (p *drainProc) counters() (DrainCounts, error) {
	c, err := decodeCounters(p.spec.Counters)
	if err != nil {
		return c, fmt.Errorf("%w (exit: %v); its output ends:\n%s", err, p.err, p.output.String())
	}
	return c, nil
}

// tailBuffer keeps the last max bytes written to it. It is safe for
// concurrent use.
type tailBuffer struct {
	mu  sync.Mutex
	max int
	buf []byte
}

func (b *tailBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p...)
	if over := len(b.buf) - b.max; over > 0 {
		b.buf = append(b.buf[:0], b.buf[over:]...)
	}
	return len(p), nil
}

func (b *tailBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}
