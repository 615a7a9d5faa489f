package luapattern

import (
	"errors"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"
)

// The matcher's answers are checked against lua5.1 through the string
// functions (runtime's TestStdlibAsLua51); these tests cover what only
// this package shows: compile errors, captures' offsets and stopping.

func TestCompileErrors(t *testing.T) {
	for _, c := range []struct{ pattern, why string }{
		{"%", "ends with '%'"},
		{"[a", "missing ']'"},
		{"[^", "missing ']'"},
		{"[%", "missing ']'"},
		{"(a", "unfinished capture"},
		{"a)", "invalid pattern capture"},
		{"%1", "invalid capture index"},
		{"(a%1)", "invalid capture index"}, // capture 1 is still open
		{"%0", "invalid capture index"},
		{"%b", "unbalanced pattern"},
		{"%bx", "unbalanced pattern"},
		{"%f", "missing '['"},
		{"%fx", "missing '['"},
		{"%f[a", "missing ']'"},
		{strings.Repeat("()", 33), "too many captures"},
	} {
		_, err := Compile(c.pattern)
		require.Error(t, err, c.pattern)
		assert.True(t, errors.Is(err, ErrMalformed), c.pattern)
		assert.Contains(t, err.Error(), c.why, c.pattern)
	}
	for _, ok := range []string{"", "^", "$", "[]]", "[^]]", "%]", "(a)%1", "()", "%b()", "%f[%w]", "[%]]", "a-b*c+d?"} {
		_, err := Compile(ok)
		assert.NoError(t, err, ok)
	}
}

func TestMatchAtGivesOffsets(t *testing.T) {
	p, err := Compile("(%a+)=()(%d*)")
	require.NoError(t, err)
	var m Matcher
	md, err := m.MatchAt(p, "x key=42;", 2)
	require.NoError(t, err)
	require.NotNil(t, md)
	assert.Equal(t, 2, md.Start)
	assert.Equal(t, 8, md.End)
	assert.Equal(t, []Capture{{2, 5, false}, {6, 6, true}, {6, 8, false}}, md.Captures)

	md, err = m.MatchAt(p, "x key=42;", 0) // "x" then " ": no '='
	require.NoError(t, err)
	assert.Nil(t, md)

	anchored, err := Compile("^a")
	require.NoError(t, err)
	assert.True(t, anchored.Anchored())
	literal, err := CompileUnanchored("^a")
	require.NoError(t, err)
	assert.False(t, literal.Anchored())
	md, err = m.MatchAt(literal, "^a", 0)
	require.NoError(t, err)
	assert.NotNil(t, md, "a leading '^' is a character for gmatch")
}

// TestCheckStopsMatching: a backtracking pattern on a long subject asks
// Check and ends with its error; the steps count across MatchAt calls, so
// a search of many quick failures is stopped too.
func TestCheckStopsMatching(t *testing.T) {
	stop := errors.New("stop")
	calls := 0
	m := Matcher{Check: func() error {
		if calls++; calls > 10 {
			return stop
		}
		return nil
	}}
	p, err := Compile(".-.-.-.-.-.-b")
	require.NoError(t, err)
	_, err = m.MatchAt(p, strings.Repeat("a", 10000), 0)
	assert.ErrorIs(t, err, stop)

	calls = 0
	q, err := Compile("b")
	require.NoError(t, err)
	subject := strings.Repeat("a", 1<<16)
	for at := 0; at <= len(subject) && err == nil; at++ {
		_, err = m.MatchAt(q, subject, at)
	}
	assert.ErrorIs(t, err, stop)
}

// TestDeepPatternIsAnError: recursion is bounded; a pattern of many
// optional items is "too complex", not a Go stack of millions of frames.
func TestDeepPatternIsAnError(t *testing.T) {
	p, err := Compile(strings.Repeat("a?", 20000))
	require.NoError(t, err)
	var m Matcher
	_, err = m.MatchAt(p, strings.Repeat("a", 20000), 0)
	assert.ErrorIs(t, err, ErrMalformed)
	assert.Contains(t, err.Error(), "too complex")
}
