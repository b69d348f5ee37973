package db

import "testing"

func TestSuccessorIsTheSmallestStringAfterEveryExtensionOfThePrefix(t *testing.T) {
	for prefix, want := range map[string]string{
		"a":                     "b",
		"tumb:60\x1f":           "tumb:60\x20",
		"a\u007f":               "a\u0080",
		"a\ud7ff":               "a\ue000", // past the surrogates, which UTF-8 cannot hold
		"a\U0010FFFF":           "b",
		"é\U0010FFFF\U0010FFFF": "ê",
	} {
		got, ok := successor(prefix)
		if !ok || got != want {
			t.Errorf("successor(%q) = %q, %v; want %q", prefix, got, ok, want)
		}
	}
	if got, ok := successor("\U0010FFFF"); ok {
		t.Errorf("successor of U+10FFFF = %q, want none", got)
	}
}
