package main

import (
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	"golang.org/x/term"
)

// progress draws a bar such as
//
//	enqueue: [############............] 512/1024
//
// on a terminal while tasks are enqueued, and nothing elsewhere: a log file
// or a pipe gets only the messages and the summary.
type progress struct {
	w     io.Writer // nil: draw nothing
	total int
	drawn bool      // the bar is on the screen
	last  time.Time // when it was drawn
}

// redraw is the shortest time between two drawings of the bar.
const redraw = 100 * time.Millisecond

// newProgress returns a progress bar of total tasks on w, which draws only
// when w is a terminal.
func newProgress(w io.Writer, total int) *progress {
	if f, ok := w.(*os.File); !ok || !term.IsTerminal(int(f.Fd())) {
		w = nil
	}
	return &progress{w: w, total: total}
}

// update shows that done of the tasks are done, at most every redraw, and
// always for the last one.
func (p *progress) update(done int) {
	if p.w == nil || p.total <= 0 || (done < p.total && time.Since(p.last) < redraw) {
		return
	}
	const width = 24
	n := width * done / p.total
	fmt.Fprintf(p.w, "\renqueue: [%s%s] %d/%d", strings.Repeat("#", n), strings.Repeat(".", width-n), done, p.total)
	p.drawn, p.last = true, time.Now()
}

// clear erases the bar, so that a message can take its line; the next
// update draws it again.
func (p *progress) clear() {
	if !p.drawn {
		return
	}
	fmt.Fprint(p.w, "\r\x1b[K")
	p.drawn, p.last = false, time.Time{}
}
