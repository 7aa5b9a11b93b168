package vocab

import "testing"

// TestParseVocabulary pins the refusals word for word: the docs quote
// them (docs/api.md, docs/troubleshooting.md).
func TestParseVocabulary(t *testing.T) {
	for _, l := range Levels {
		if got, err := ParseLevel(string(l)); got != l || err != nil {
			t.Errorf("ParseLevel(%q) = %q, %v", l, got, err)
		}
	}
	if _, err := ParseLevel("everything"); err == nil || err.Error() != `unknown metadata level "everything": use one of none, form, times, counts, full` {
		t.Errorf("ParseLevel(everything): %v", err)
	}
	for _, m := range SearchModes {
		if got, err := ParseSearchMode(string(m)); got != m || err != nil {
			t.Errorf("ParseSearchMode(%q) = %q, %v", m, got, err)
		}
	}
	if _, err := ParseSearchMode("on"); err == nil || err.Error() != `unknown search setting "on": use off, parties or parties+subject` {
		t.Errorf("ParseSearchMode(on): %v", err)
	}
	if m, err := ParseLawfulMode("require"); m != LawfulRequire || err != nil {
		t.Errorf("ParseLawfulMode(require) = %q, %v", m, err)
	}
	if _, err := ParseLawfulMode("on"); err == nil || err.Error() != `unknown lawful-basis setting "on": use off, enforce or require` {
		t.Errorf("ParseLawfulMode(on): %v", err)
	}
}
