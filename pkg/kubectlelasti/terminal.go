package kubectlelasti

import (
	"fmt"
	"io"
	"unicode/utf8"
)

// terminalWriter is every byte the plugin prints, on its way to the
// terminal. What it prints comes from objects any namespace's users write
// (names, trigger queries, condition messages), and an escape sequence
// among them could rewrite the admin's screen, set the window title or,
// in some terminals, answer back as if typed. Like kubectl's
// printers.EscapeTerminal, but more: it leaves tab and newline, which the
// plugin's own layout uses, and shows every other control character
// instead of sending it: ESC as ^[, CR as \r, the other C0 controls and
// DEL in caret notation (^G), the C1 controls U+0080-U+009F as \u009b,
// and each byte that is not UTF-8 as \x9b (a raw 0x9b is CSI to a
// terminal in 8-bit mode). JSON and YAML never carry raw controls; a C1
// control in a JSON string reads back the same as \u00XX.
type terminalWriter struct {
	w io.Writer
	// pending holds the start of a UTF-8 sequence a write cut in two.
	pending []byte
}

func newTerminalWriter(w io.Writer) *terminalWriter { return &terminalWriter{w: w} }

// Write escapes p, and reports len(p) written once the escaped bytes are.
func (t *terminalWriter) Write(p []byte) (int, error) {
	buf := append(t.pending, p...)
	t.pending = nil
	out := make([]byte, 0, len(buf))
	for len(buf) > 0 {
		if !utf8.FullRune(buf) {
			t.pending = append([]byte(nil), buf...) // the rest comes in the next write
			break
		}
		r, size := utf8.DecodeRune(buf)
		out = appendEscaped(out, r, buf[:size])
		buf = buf[size:]
	}
	if _, err := t.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

// Flush writes a UTF-8 sequence that never ended, escaped.
func (t *terminalWriter) Flush() error {
	if len(t.pending) == 0 {
		return nil
	}
	var out []byte
	for _, b := range t.pending {
		out = fmt.Appendf(out, `\x%02x`, b)
	}
	t.pending = nil
	_, err := t.w.Write(out)
	return err
}

// appendEscaped appends the rune r, read from raw, as it may reach a
// terminal.
func appendEscaped(out []byte, r rune, raw []byte) []byte {
	switch {
	case r == utf8.RuneError && len(raw) == 1:
		return fmt.Appendf(out, `\x%02x`, raw[0])
	case r == '\t' || r == '\n':
		return append(out, raw...)
	case r == 0x1b:
		return append(out, "^["...)
	case r == '\r':
		return append(out, `\r`...)
	case r < 0x20:
		return append(out, '^', byte(r)+0x40)
	case r == 0x7f:
		return append(out, "^?"...)
	case r >= 0x80 && r <= 0x9f:
		return fmt.Appendf(out, `\u%04x`, r)
	}
	return append(out, raw...)
}
