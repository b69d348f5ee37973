package httpx

import (
	"encoding/json"
	"testing"

	"github.com/google/uuid"
	"github.com/stretchr/testify/require"
)

func TestAppendStringEscapesAsEncodingJSON(t *testing.T) {
	for _, s := range []string{"", "plain", `q"uo\te`, "tab\tnl\ncr\r", "\x00\x01\x1f", "<a href='x'>&amp;</a>",
		"héllo wörld ✓", "line\u2028sep\u2029", "bad\xffutf8\xc3", "emoji 🎉"} {
		want, err := json.Marshal(s)
		require.NoError(t, err)
		require.Equal(t, string(want), string(AppendString(nil, s)), "%q", s)
	}
}

func FuzzAppendString(f *testing.F) {
	f.Add("a\"b\\c\x00\u2028\xff")
	f.Fuzz(func(t *testing.T, s string) {
		want, _ := json.Marshal(s)
		if got := AppendString(nil, s); string(got) != string(want) {
			t.Fatalf("%q: got %s, want %s", s, got, want)
		}
	})
}

func TestAppendUUIDWritesTheCanonicalForm(t *testing.T) {
	for _, id := range []uuid.UUID{uuid.Nil, uuid.Max, uuid.MustParse("0193f0c4-1a2b-7c3d-8e4f-5a6b7c8d9e0f")} {
		require.Equal(t, `"`+id.String()+`"`, string(AppendUUID(nil, id)))
	}
}

func TestAppendOptionalStringWritesNullForNil(t *testing.T) {
	s := `a"b`
	require.Equal(t, `null`, string(AppendOptionalString(nil, nil)))
	require.Equal(t, `"a\"b"`, string(AppendOptionalString(nil, &s)))
}

// The measurement behind AppendString's table: the strings of the hot
// answers are mostly ASCII ids and names.
//
//	go test ./broker/api/httpx -run '^$' -bench BenchmarkAppendString -benchmem
func BenchmarkAppendString(b *testing.B) {
	s := "0194f3c2-7b1e-7c3a-9d2e-5f6a7b8c9d0e"
	b.SetBytes(int64(len(s)))
	buf := make([]byte, 0, 64)
	for b.Loop() {
		buf = AppendString(buf[:0], s)
	}
}
