package producer

import (
	"fmt"
	"regexp"
)

// maxQueue is the longest queue name, in bytes.
const maxQueue = 64

// queueName matches a queue name: asynq puts it between the braces of a
// Cluster hash tag, and the worker's --queues flag separates names with ','
// and '='; so no braces, control characters or separators.
var queueName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9._:-]*$`)

// queueRule says what queueName and maxQueue accept, for errors.
const queueRule = "is not 1 to 64 letters, digits, '.', '_', ':' and '-', starting with a letter or digit"

// ValidateQueue returns an error naming name when it is not a queue name
// Sluice takes (see queueRule), nil otherwise.
func ValidateQueue(name string) error {
	if len(name) > maxQueue || !queueName.MatchString(name) {
		return fmt.Errorf("queue %q %s", name, queueRule)
	}
	return nil
}
