package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/regent-mq/regent/test/brokertest"
	"github.com/regent-mq/regent/test/pgtest"
)

// One Chromium serves the whole package: each test opens a tab of its own.
var browser context.Context

// The browser stops when runPackage returns, before the check for
// goroutines left running.
func TestMain(m *testing.M) { os.Exit(pgtest.NoLeaks(runPackage(m))) }

func runPackage(m *testing.M) int {
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		// The tests run as root here, where Chromium's sandbox cannot start.
		chromedp.NoSandbox,
		chromedp.WindowSize(1280, 900),
		// The ripeness filter takes the reader's local time: make it UTC.
		chromedp.Env("TZ=UTC"),
	)
	alloc, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	defer cancelAlloc()
	ctx, cancel := chromedp.NewContext(alloc)
	defer cancel()
	// The first run starts Chromium, which lives as long as its context:
	// no timeout here, or it would stop the browser.
	if err := chromedp.Do(ctx); err != nil {
		fmt.Fprintf(os.Stderr, "start Chromium (make deps installs it): %v\n", err)
		return 1
	}
	browser = ctx
	// The shared broker runs with tenancy on in either mode, so that each
	// test is a tenant of its own: a console page shows everything of its
	// tenant (every queue, dead letter and query), and a tenant is the
	// namespace it cannot see past.
	return brokertest.Run(m, brokertest.WithJWT(true))
}

// tab is a new tab of the package's browser, closed when the test ends,
// in which every action of the test must finish within three minutes (on
// a quiet machine a test takes seconds; on a shared one, far more).
type tab struct {
	t   *testing.T
	ctx context.Context
}

func newTab(t *testing.T) tab {
	t.Helper()
	ctx, cancel := chromedp.NewContext(browser)
	t.Cleanup(cancel)
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	bounded, cancelTimeout := context.WithTimeout(ctx, 3*time.Minute)
	t.Cleanup(cancelTimeout)
	return tab{t: t, ctx: bounded}
}

func (b tab) do(steps ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, steps...); err != nil {
		b.t.Fatalf("browser: %v", err)
	}
}

// press clicks the element sel names from inside the page, in one step: a
// button whose action renders the page again is gone by the time a mouse
// click through the protocol looks at it once more.
func (b tab) press(sel string) {
	b.t.Helper()
	js, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	if !run(b, chromedp.Evaluate[bool](`(() => { const e = document.querySelector(`+string(js)+`); if (!e) return false; e.click(); return true; })()`)) {
		b.t.Fatalf("browser: no %s to press", sel)
	}
}

func run[T any](b tab, a chromedp.Action[T]) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, a)
	if err != nil {
		b.t.Fatalf("browser: %v", err)
	}
	return v
}

func (b tab) text(sel string) string {
	b.t.Helper()
	// One step in the page, not a node looked up and then read: after an
	// action the page draws itself again, and a node found before that is
	// gone when it is read.
	js, err := json.Marshal(sel)
	if err != nil {
		b.t.Fatal(err)
	}
	expr := `(() => { const e = document.querySelector(` + string(js) + `); return e && e.getClientRects().length ? e.innerText : null; })()`
	var text string
	brokertest.Eventually(b.t, 20*time.Second, func() error {
		shown := run(b, chromedp.Evaluate[*string](expr))
		if shown == nil {
			return fmt.Errorf("browser: %s never showed", sel)
		}
		text = *shown
		return nil
	})
	return text
}

// open loads a page of the console and waits until its script has drawn it.
func (b tab) open(url string) {
	b.t.Helper()
	b.do(chromedp.Navigate(url), chromedp.WaitVisible(chromedp.CSS("main > section, main > h1")))
}

// panel waits until the panel titled title has loaded (or failed) and
// returns its text.
func (b tab) panel(title string) string {
	b.t.Helper()
	return b.text(fmt.Sprintf(`section[data-panel=%q][data-state]`, title))
}

// waitText waits, for at most 20 s, until the element's text contains want,
// and returns the text.
func (b tab) waitText(sel, want string) string {
	b.t.Helper()
	var text string
	brokertest.Eventually(b.t, 20*time.Second, func() error {
		if text = b.text(sel); !strings.Contains(text, want) {
			return fmt.Errorf("%s shows %q, never %q", sel, text, want)
		}
		return nil
	})
	return text
}

// set sets the value of a form field as a script would: chromedp's
// SetValue and Clear do not reach a datetime-local input or an emptied one.
func (b tab) set(sel, value string) {
	b.t.Helper()
	js, err := json.Marshal(map[string]string{"sel": sel, "value": value})
	if err != nil {
		b.t.Fatal(err)
	}
	run(b, chromedp.Evaluate[bool](fmt.Sprintf(`((a) => { document.querySelector(a.sel).value = a.value; return true; })(%s)`, js)))
}

// shot saves a screenshot of the whole page under the test's temporary
// directory, and under REGENT_CONSOLE_SHOTS when set (make console-shots).
func (b tab) shot(name string) {
	b.t.Helper()
	png := run(b, chromedp.FullScreenshot(100))
	dirs := []string{b.t.TempDir()}
	if d := os.Getenv("REGENT_CONSOLE_SHOTS"); d != "" {
		dirs = append(dirs, d)
	}
	for _, d := range dirs {
		if err := os.MkdirAll(d, 0o755); err != nil {
			b.t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, name+".png"), png, 0o644); err != nil {
			b.t.Fatal(err)
		}
	}
}

// phone makes the tab a phone's screen.
func (b tab) phone() {
	b.t.Helper()
	b.do(chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile))
}

func mustContain(t *testing.T, where, text string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(text, w) {
			t.Errorf("%s shows %q; want it to show %q", where, text, w)
		}
	}
}

func mustNotContain(t *testing.T, where, text string, unwanted ...string) {
	t.Helper()
	for _, w := range unwanted {
		if strings.Contains(text, w) {
			t.Errorf("%s shows %q, which is not this tenant's", where, w)
		}
	}
}
