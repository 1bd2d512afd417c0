package producer

import (
	"maps"
	"reflect"
	"unsafe"

	"github.com/hibiken/asynq"
)

// headersField is asynq.Task's field of headers, and stringMap its type.
var (
	headersField, headersFieldOK = reflect.TypeFor[asynq.Task]().FieldByName("headers")
	stringMap                    = reflect.TypeFor[map[string]string]()
)

// withHeaders returns a copy of task whose headers are task's with add
// over them, and true; task itself is left as it is, so that the same
// task may be enqueued again or concurrently. asynq keeps a task's own
// options out of reach, so the copy is of the whole struct and only its
// headers field is replaced: the one place that knows asynq.Task's
// layout, which TestWithHeadersKeepsOptions holds to a real asynq. Should
// the field be gone, task is returned unchanged, with false.
func withHeaders(task *asynq.Task, add map[string]string) (*asynq.Task, bool) {
	if !headersFieldOK || headersField.Type != stringMap {
		return task, false
	}
	h := maps.Clone(task.Headers())
	if h == nil {
		h = make(map[string]string, len(add))
	}
	maps.Copy(h, add)
	cp := *task // type, payload, headers, options, result writer
	*(*map[string]string)(unsafe.Add(unsafe.Pointer(&cp), headersField.Offset)) = h
	return &cp, true
}
