package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"strings"

	"github.com/sluicehq/sluice/internal/readlimit"
)

// Secrets come from the environment, never from flags, which other users
// see in ps: from the variable itself, or from a file it names (a Docker or
// Kubernetes secret mounted as a file).
const (
	envSMTPPassword      = "SLUICE_SMTP_PASSWORD"
	envSMSWebhookToken   = "SLUICE_SMS_WEBHOOK_TOKEN"
	fileSuffix           = "_FILE"
	secretsHelpParagraph = `
Secrets are read from the environment only, never from flags (flags show
in ps): SLUICE_SMTP_PASSWORD, the SMTP password for --smtp-user, and
SLUICE_SMS_WEBHOOK_TOKEN, sent to --sms-webhook as "Authorization: Bearer
TOKEN". Either may instead be read from a file named by the same variable
with _FILE (SLUICE_SMTP_PASSWORD_FILE, SLUICE_SMS_WEBHOOK_TOKEN_FILE), once
at start, without its trailing newline; a secret still holding a control
character is refused. Secrets never appear in logs or errors, nor does user
information in the --sms-webhook URL.`
)

// maxSecretSize is the largest secret file read, in bytes: a token or a
// password is far shorter, and /dev/zero named by mistake is refused
// after 64 KiB rather than read until memory runs out.
const maxSecretSize = 64 << 10

// secret returns the secret of the environment variable name, or of the
// file that name+"_FILE" names, read once and without its trailing newline;
// "" when neither is set (an empty variable counts as unset). Both set is
// an error naming both, and so is an empty or unreadable file or a secret
// holding a control character. Errors never show the secret.
func secret(name string) (string, error) {
	fileVar := name + fileSuffix
	value, path := os.Getenv(name), os.Getenv(fileVar)
	switch {
	case value != "" && path != "":
		return "", fmt.Errorf("%s and %s are both set; give one", name, fileVar)
	case path == "" && hasControl(value):
		return "", fmt.Errorf("%s holds a control character", name)
	case path == "":
		return value, nil
	}
	data, err := readlimit.File(path, maxSecretSize)
	if tl, ok := errors.AsType[*readlimit.TooLargeError](err); ok {
		return "", fmt.Errorf("%s: the file it names %v", fileVar, tl)
	}
	if err != nil {
		// Without the path: a secret given by mistake as the variable's
		// value would be shown.
		if pe, ok := errors.AsType[*fs.PathError](err); ok {
			err = pe.Err
		}
		return "", fmt.Errorf("%s: cannot read the file it names: %v", fileVar, err)
	}
	s := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if s == "" {
		return "", fmt.Errorf("%s: the file it names is empty", fileVar)
	}
	if hasControl(s) {
		// Refused at start: in a header it would fail every send.
		return "", fmt.Errorf("%s: the file it names holds a control character (a second newline?) after its one trailing newline is removed", fileVar)
	}
	return s, nil
}

// hasControl reports whether s holds an ASCII control character.
func hasControl(s string) bool {
	return strings.ContainsFunc(s, func(r rune) bool { return r < 0x20 || r == 0x7f })
}
