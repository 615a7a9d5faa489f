package main

import (
	"bytes"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

func TestParseBytes(t *testing.T) {
	for in, want := range map[string]int64{
		"": 0, "0": 0, "1024": 1024, "2GiB": 2 << 30, "512MB": 512e6, "2.5GiB": 5 << 29, "1e9": 1e9, " 3 KiB ": 3 << 10, "1.5KiB": 1536,
	} {
		got, err := parseBytes(in)
		require.NoError(t, err, in)
		assert.Equal(t, want, got, in)
	}
	for in, msg := range map[string]string{
		"NaN":    "expected e.g. 2GiB",
		"nanGiB": "expected e.g. 2GiB",
		"xyz":    "expected e.g. 2GiB",
		"1e400":  "expected e.g. 2GiB",
		"inf":    "more than 2^62 bytes",
		"+Inf":   "more than 2^62 bytes",
		"1e30":   "more than 2^62 bytes",
		"-5":     "cannot be negative",
		"-inf":   "cannot be negative",
		"-1GiB":  "cannot be negative",
		"0.5B":   "not a whole number of bytes",
		"1.5":    "not a whole number of bytes",
	} {
		got, err := parseBytes(in)
		require.Error(t, err, "%q gave %d", in, got)
		assert.Contains(t, err.Error(), msg, in)
		assert.Contains(t, err.Error(), strings.TrimSpace(in), in)
	}
}

// TestMemLimitNaNIsAnError: the command refuses it (exit 2) and says why,
// instead of running with a negative limit.
func TestMemLimitNaNIsAnError(t *testing.T) {
	for _, v := range []string{"NaN", "inf", "-1", "garbage"} {
		var out, errOut bytes.Buffer
		code := run([]string{"--mem-limit", v, "-e", "print(residency.limit())"}, strings.NewReader(""), &out, &errOut)
		assert.Equal(t, 2, code, v)
		assert.Contains(t, errOut.String(), "--mem-limit: bad size", v)
		assert.Empty(t, out.String(), v)
	}
}
