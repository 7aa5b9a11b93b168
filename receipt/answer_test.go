package receipt

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

// answerOf is the answer of POST /erasures for p, as the server writes it.
func answerOf(t *testing.T, p Payload, jws string) string {
	t.Helper()
	b, err := json.Marshal(map[string]any{"erasure": p.Erasure, "state": "done", "erased": p.Erased, "held": p.Held,
		"unsearchable": p.Unsearchable, "receipt": jws})
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestVerifyAnswer: a saved answer is checked member by member against
// its signed receipt; an edit of any kind of member is refused, naming
// the member.
func TestVerifyAnswer(t *testing.T) {
	key, set := testKey(t)
	p := Payload{Erasure: "0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e4f", Tenant: "0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e40",
		RequestedAt: "2025-03-01T10:00:00.1Z", DoneAt: "2025-03-01T10:00:01.2Z", Filter: "tel",
		Erased: []Item{{UUID: "0190a3f0-0000-7000-8000-000000000001", Versions: 2, Whole: true},
			{UUID: "0190a3f0-0000-7000-8000-000000000002", Versions: 1, Whole: false}},
		Held: []string{"0190a3f0-0000-7000-8000-000000000003"}, Unsearchable: 1}
	jws, err := Sign(key, p)
	if err != nil {
		t.Fatal(err)
	}
	answer := answerOf(t, p, jws)
	got, kid, err := VerifyAnswer([]byte(answer), set)
	if err != nil || kid != set.Keys[0].Kid || got.Erasure != p.Erasure {
		t.Fatalf("the answer as written: %+v %s %v", got, kid, err)
	}
	// Members of the payload that the answer leaves out are compared when
	// an answer holds them: nothing here names them.
	withTimes := strings.Replace(answer, `"erasure":`, `"requested_at":"2025-03-01T10:00:00.1Z","done_at":"2025-03-01T10:00:01.2Z","tenant":"`+p.Tenant+`","erasure":`, 1)
	if _, _, err := VerifyAnswer([]byte(withTimes), set); err != nil {
		t.Fatalf("the answer with the payload's times: %v", err)
	}
	edit := func(from, to string) string {
		if !strings.Contains(withTimes, from) {
			t.Fatalf("no %s in %s", from, withTimes)
		}
		return strings.Replace(withTimes, from, to, 1)
	}
	for name, c := range map[string]struct{ answer, field string }{
		"a count":            {edit(`"unsearchable":1`, `"unsearchable":0`), "unsearchable"},
		"a count in a list":  {edit(`"versions":2`, `"versions":3`), "erased[0].versions"},
		"a count as a float": {edit(`"versions":2`, `"versions":2.0`), "erased[0].versions"},
		"a flag":             {edit(`"whole":false`, `"whole":true`), "erased[1].whole"},
		"a list emptied":     {edit(`"held":["0190a3f0-0000-7000-8000-000000000003"]`, `"held":[]`), "held"},
		"a list grown":       {edit(`"held":["`, `"held":["0190a3f0-0000-7000-8000-000000000009","`), "held"},
		"a list reordered": {edit(`"erased":[{"uuid":"0190a3f0-0000-7000-8000-000000000001","versions":2,"whole":true},{"uuid":"0190a3f0-0000-7000-8000-000000000002","versions":1,"whole":false}]`,
			`"erased":[{"uuid":"0190a3f0-0000-7000-8000-000000000002","versions":1,"whole":false},{"uuid":"0190a3f0-0000-7000-8000-000000000001","versions":2,"whole":true}]`), "erased[0].uuid"},
		"an id in a list":           {edit(`000000000001"`, `000000000007"`), "erased[0].uuid"},
		"the erasure's id":          {edit(`"erasure":"0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e4f"`, `"erasure":"0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e41"`), "erasure"},
		"the tenant":                {edit(`"tenant":"0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e40"`, `"tenant":"0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e41"`), "tenant"},
		"a time":                    {edit(`"done_at":"2025-03-01T10:00:01.2Z"`, `"done_at":"2025-03-01T10:00:01.3Z"`), "done_at"},
		"the state":                 {edit(`"state":"done"`, `"state":"pending"`), "state"},
		"a member added":            {edit(`"state":"done"`, `"state":"done","not_erased":[]`), "not_erased"},
		"a member of an item added": {edit(`"whole":true`, `"whole":true,"kept":0`), "erased[0].kept"},
		"a member of an item gone":  {edit(`,"whole":true`, ``), "erased[0].whole"},
		"a member given twice":      {edit(`"held":[`, `"held":[],"held":[`), `"held"`},
		"a list made an object":     {edit(`"held":["0190a3f0-0000-7000-8000-000000000003"]`, `"held":{}`), "held"},
		"a count made a string":     {edit(`"unsearchable":1`, `"unsearchable":"1"`), "unsearchable"},
		"data after the answer":     {withTimes + "{}", "after"},
	} {
		_, _, err := VerifyAnswer([]byte(c.answer), set)
		if !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.field) {
			t.Errorf("%s: %v, want ErrInvalid naming %s", name, err, c.field)
		}
	}
	for name, bad := range map[string]string{
		"no receipt":      strings.Replace(answer, `"receipt":"`+jws+`"`, `"receipt":null`, 1),
		"another receipt": strings.Replace(answer, jws, jws[:strings.LastIndexByte(jws, '.')+1]+sameBytes(t, jws[strings.LastIndexByte(jws, '.')+1:]), 1),
		"not an object":   `["` + jws + `"]`,
	} {
		if _, _, err := VerifyAnswer([]byte(bad), set); !errors.Is(err, ErrInvalid) {
			t.Errorf("%s: %v, want ErrInvalid", name, err)
		}
	}
}
