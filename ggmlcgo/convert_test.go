package ggmlcgo

import (
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// Encode then Decode gives the values back: exactly in f32, rounded to the
// type's precision in f16 and bf16, within a quantization step in the
// quantized types; a wrong byte count is an error.
func TestEncodeDecode(t *testing.T) {
	v := make([]float32, 512)
	for i := range v {
		v[i] = float32(i%37)/8 - 2
	}
	for _, c := range []struct {
		typ Type
		tol float64
	}{{F32, 0}, {F16, 1e-3}, {BF16, 1e-2}, {Q8_0, 0.02}, {Q4_0, 0.3}, {Q4_K, 0.3}, {Q6_K, 0.1}} {
		raw, err := Encode(c.typ, v, 256)
		require.NoError(t, err, "%v", c.typ)
		got, err := Decode(c.typ, raw, int64(len(v)))
		require.NoError(t, err, "%v", c.typ)
		for i := range v {
			require.InDelta(t, v[i], got[i], c.tol, "%v element %d", c.typ, i)
		}
		_, err = Decode(c.typ, raw[1:], int64(len(v)))
		assert.ErrorContains(t, err, "decode:", "%v", c.typ)
	}
	_, err := Decode(I32, make([]byte, 4), 1)
	assert.ErrorContains(t, err, "not a type of floating-point values")
}
