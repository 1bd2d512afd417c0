package tracing

import "strings"

// Enabled reports whether getenv (os.Getenv in the commands) turns traces
// on. They are off unless asked for: on when OTEL_TRACES_EXPORTER names
// "otlp", or when it is unset and OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set. OTEL_SDK_DISABLED=true, and
// an OTEL_TRACES_EXPORTER without "otlp" ("none", "console"), keep them
// off whatever else is set.
func Enabled(getenv func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(getenv("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	exporters := strings.TrimSpace(getenv("OTEL_TRACES_EXPORTER"))
	if exporters == "" {
		return getenv("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || getenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
	}
	for e := range strings.SplitSeq(exporters, ",") {
		if strings.TrimSpace(e) == "otlp" {
			return true
		}
	}
	return false
}
