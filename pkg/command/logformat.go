package command

import (
	"fmt"
	"io"
	"log/slog"
	"os"

	"k8s.io/klog/v2"
)

// The log formats --log-format takes.
const (
	LogFormatFlag = "log-format"
	LogFormatText = "text"
	LogFormatJSON = "json"
)

// logOutput is where JSON logs go; tests replace it.
var logOutput io.Writer = os.Stderr

// useLogFormat makes klog write in format. json hands every klog call to a
// slog JSON handler. klog passes V(n) calls on to it at slog level -n
// without applying -v itself, so the handler's level is -v (--vmodule has
// no effect in json).
func useLogFormat(format string, verbosity int) error {
	switch format {
	case LogFormatText:
		return nil
	case LogFormatJSON:
		klog.SetSlogLogger(slog.New(slog.NewJSONHandler(logOutput, &slog.HandlerOptions{Level: slog.Level(-verbosity)})))
		return nil
	}
	return fmt.Errorf("--%s=%q: want %s or %s", LogFormatFlag, format, LogFormatText, LogFormatJSON)
}
