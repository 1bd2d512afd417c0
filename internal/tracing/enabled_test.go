package tracing

import "testing"

func TestEnabled(t *testing.T) {
	t.Parallel()
	cases := []struct {
		name string
		env  map[string]string
		want bool
	}{
		{"no variable: off", nil, false},
		{"endpoint", map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{"traces endpoint", map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{"exporter otlp, default endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{"exporter none wins over an endpoint", map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{"an exporter Sluice does not build", map[string]string{"OTEL_TRACES_EXPORTER": "zipkin"}, false},
		{"a list with otlp", map[string]string{"OTEL_TRACES_EXPORTER": "console, otlp"}, true},
		{"SDK disabled, any case", map[string]string{"OTEL_SDK_DISABLED": "TRUE", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"SDK disabled", map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{"protocol alone: off", map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, false},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if got, want := Enabled(func(k string) string { return c.env[k] }), c.want; got != want {
				t.Errorf("Enabled(%v) = %v, want %v", c.env, got, want)
			}
		})
	}
}

func TestProtocol(t *testing.T) {
	t.Parallel()
	cases := []struct {
		env  map[string]string
		want string
	}{
		{nil, "http/protobuf"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"}, "grpc"},
		{map[string]string{"OTEL_EXPORTER_OTLP_PROTOCOL": "grpc", "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL": "http/protobuf"}, "http/protobuf"},
	}
	for _, c := range cases {
		if got := protocol(func(k string) string { return c.env[k] }); got != c.want {
			t.Errorf("protocol(%v) = %q, want %q", c.env, got, c.want)
		}
	}
}
