package webui

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
)

// Keys the tests press.
const (
	kbTab        = kb.Tab
	kbEnter      = kb.Enter
	kbArrowRight = kb.ArrowRight
	kbArrowLeft  = kb.ArrowLeft
	kbArrowDown  = kb.ArrowDown
	kbArrowUp    = kb.ArrowUp
)

// markControlsJS marks every visible, enabled control of the page with
// data-kb=INDEX and returns their descriptions: links, buttons, selects,
// inputs, textareas and elements with tabindex 0 (in the mesh, its one
// tab stop; its other cells have tabindex -1 and are reached with the
// arrows, see meshArrows).
const markControlsJS = `(() => {
  const sel = 'a[href], button, select, input, textarea, [tabindex="0"]';
  const out = [];
  for (const el of document.querySelectorAll(sel)) {
    if (el.disabled || el.tabIndex < 0 || el.type === "hidden") continue;
    const st = getComputedStyle(el);
    if (el.getClientRects().length === 0 || st.visibility === "hidden") continue;
    el.dataset.kb = String(out.length);
    out.push(el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") +
      (el.getAttribute("href") ? "[href=" + el.getAttribute("href") + "]" : "") +
      (el.dataset.src ? "[" + el.dataset.src + "->" + el.dataset.dst + "]" : "") +
      (el.closest("table#mesh") ? " (in table#mesh)" : ""));
  }
  return out;
})()`

// focusJS describes the focused element: its data-kb mark (-1 if none)
// and whether its focus is visible (an outline or a box shadow).
const focusJS = `(() => {
  const a = document.activeElement;
  if (!a || a === document.body) return {kb: -1, visible: false, what: "body"};
  const st = getComputedStyle(a);
  const visible = (st.outlineStyle !== "none" && parseFloat(st.outlineWidth) > 0) || st.boxShadow !== "none";
  return {kb: a.dataset.kb === undefined ? -1 : Number(a.dataset.kb), visible, what: a.tagName.toLowerCase() + (a.id ? "#" + a.id : "")};
})()`

// tabWalk presses Tab from the top of the page until the focus came back
// round (at most twice the controls plus 5 presses) and returns the
// controls never focused and those focused without a visible focus.
func tabWalk(t *testing.T, tt *tab) (controls, missed, invisible []string) {
	t.Helper()
	raw, err := evalJS[[]byte](tt, markControlsJS)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(raw, &controls); err != nil {
		t.Fatal(err)
	}
	if _, err := evalJS[bool](tt, `(() => { if (document.activeElement) document.activeElement.blur(); window.scrollTo(0, 0); return true; })()`); err != nil {
		t.Fatal(err)
	}
	reached := make([]bool, len(controls))
	seenInvisible := map[int]bool{}
	first := -2
	for range 2*len(controls) + 5 {
		if err := chromedp.Do(tt.ctx, chromedp.KeyEvent(kbTab)); err != nil {
			t.Fatal(err)
		}
		raw, err := evalJS[[]byte](tt, focusJS)
		if err != nil {
			t.Fatal(err)
		}
		var f struct {
			KB      int    `json:"kb"`
			Visible bool   `json:"visible"`
			What    string `json:"what"`
		}
		if err := json.Unmarshal(raw, &f); err != nil {
			t.Fatal(err)
		}
		if f.KB < 0 || f.KB >= len(controls) {
			continue // the body or the browser between two rounds
		}
		if f.KB == first {
			break // round
		}
		if first == -2 {
			first = f.KB
		}
		reached[f.KB] = true
		if !f.Visible && !seenInvisible[f.KB] {
			seenInvisible[f.KB] = true
			invisible = append(invisible, controls[f.KB])
		}
	}
	for i, ok := range reached {
		if !ok {
			missed = append(missed, controls[i])
		}
	}
	return controls, missed, invisible
}

// checkKeyboard fails unless Tab reaches every control of the page with
// a visible focus; wantMesh also asks that the mesh be one of them.
func checkKeyboard(t *testing.T, tt *tab, wantMesh bool) {
	t.Helper()
	controls, missed, invisible := tabWalk(t, tt)
	if len(controls) == 0 {
		t.Fatal("the page has no control to reach")
	}
	for _, c := range missed {
		t.Errorf("Tab never reached %s (controls: %v)", c, controls)
	}
	for _, c := range invisible {
		t.Errorf("%s has focus but no visible focus (outline or box-shadow)", c)
	}
	if wantMesh {
		in := 0
		for _, c := range controls {
			if strings.HasSuffix(c, " (in table#mesh)") {
				in++
			}
		}
		if in != 1 {
			t.Errorf("%d tab stops in table#mesh, want 1 (%v)", in, controls)
		}
	}
	t.Logf("Tab reached %d of %d controls", len(controls)-len(missed), len(controls))
}
