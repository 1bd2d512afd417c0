package producer

// MaxTenantLen is the longest tenant id, in bytes.
const MaxTenantLen = 64

// ValidateTenant reports whether tenant is a valid tenant id: 1 to
// MaxTenantLen bytes of ASCII letters, digits, '.', '_' and '-', starting
// with a letter or a digit. Tenant ids end up in Redis keys and log lines, so
// they hold no braces, colons, spaces or control characters. The error is a
// *FieldError for the field "tenant".
func ValidateTenant(tenant string) error {
	switch {
	case tenant == "":
		return fieldError("tenant", tenant, "is empty")
	case len(tenant) > MaxTenantLen:
		return fieldError("tenant", tenant, "is %d bytes, more than %d", len(tenant), MaxTenantLen)
	case !isAlnum(tenant[0]):
		return fieldError("tenant", tenant, "does not start with a letter or digit")
	}
	for i := 0; i < len(tenant); i++ {
		if c := tenant[i]; !isAlnum(c) && c != '.' && c != '_' && c != '-' {
			return fieldError("tenant", tenant, "has %q at byte %d; only letters, digits, '.', '_' and '-' are allowed", c, i)
		}
	}
	return nil
}

// isAlnum reports whether c is an ASCII letter or digit.
func isAlnum(c byte) bool {
	return 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}
