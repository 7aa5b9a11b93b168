package receipt

import (
	"encoding/json"
	"errors"
	"fmt"
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
		"data after the answer":     {withTimes + "{}", "(page 2 of 2) has no receipt"},
		"a next page elsewhere":     {edit(`"state":"done"`, `"state":"done","next":"/erasures/0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e41?after=x"`), "next"},
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

// TestVerifyAnswerPages: past MaxListed entries the receipt carries the
// digest of the lists; the pages of the answer, given together, are
// checked against it, and a page alone, a page edited or left out, or
// pages out of order are refused.
func TestVerifyAnswerPages(t *testing.T) {
	key, set := testKey(t)
	const id = "0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e4f"
	var erased []Item
	var held []string
	for i := range 150 {
		u := fmt.Sprintf("0190a3f0-0000-7000-8000-%012d", i)
		if i%3 == 0 {
			held = append(held, u)
		} else {
			erased = append(erased, Item{UUID: u, Versions: 1 + i%2, Whole: i%2 == 0})
		}
	}
	d := ListsDigest(erased, held)
	p := Payload{Erasure: id, Tenant: id, Filter: "uuids", Digest: &d, NotFound: 4}
	jws, err := Sign(key, p)
	if err != nil {
		t.Fatal(err)
	}
	p.Tenant = "0190a3f0-7c8e-7b1e-9d2a-3f6b8c1d2e40"
	other, err := Sign(key, p)
	if err != nil {
		t.Fatal(err)
	}
	// Two pages, split as the server splits them: by uuid, erased and
	// held together.
	page := func(from, to int, next any) string {
		var e []Item
		h := []string{}
		for _, it := range erased {
			if n := it.UUID[len(it.UUID)-3:]; n >= fmt.Sprintf("%03d", from) && n < fmt.Sprintf("%03d", to) {
				e = append(e, it)
			}
		}
		for _, u := range held {
			if n := u[len(u)-3:]; n >= fmt.Sprintf("%03d", from) && n < fmt.Sprintf("%03d", to) {
				h = append(h, u)
			}
		}
		b, _ := json.Marshal(map[string]any{"erasure": id, "state": "done", "erased": e, "held": h, "not_found": 4, "unsearchable": 0,
			"digest": d, "next": next, "receipt": jws})
		return string(b) + "\n"
	}
	one, two := page(0, 90, "/erasures/"+id+"?after=0190a3f0-0000-7000-8000-000000000089"), page(90, 150, nil)
	if got, _, err := VerifyAnswer([]byte(one+two), set); err != nil || got.Digest == nil || got.Digest.Erased != 100 {
		t.Fatalf("both pages: %+v %v", got, err)
	}
	if _, _, err := VerifyAnswer([]byte(page(0, 150, nil)), set); err != nil {
		t.Fatalf("one page of everything: %v", err)
	}
	for name, c := range map[string]struct{ answer, want string }{
		"a page alone":        {one, "not those its receipt's digest stands for"},
		"the pages swapped":   {two + one, "not those its receipt's digest stands for"},
		"an entry edited":     {one + strings.Replace(two, `"versions":2`, `"versions":1`, 1), "not those its receipt's digest stands for"},
		"an entry spelled so": {one + strings.Replace(two, `"versions":2`, `"versions":2.0`, 1), "erased[0] is not an object"},
		"a count edited":      {one + strings.Replace(two, `"not_found":4`, `"not_found":3`, 1), "not_found is 3, the receipt's 4 (page 2 of 2)"},
		"the digest edited":   {strings.Replace(one, `"held":50`, `"held":49`, 1) + two, "digest.held is 49"},
		"another erasure's":   {one + strings.Replace(two, jws, other, 1), "another receipt"},
	} {
		if _, _, err := VerifyAnswer([]byte(c.answer), set); !errors.Is(err, ErrInvalid) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want ErrInvalid saying %q", name, err, c.want)
		}
	}
}
