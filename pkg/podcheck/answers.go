package podcheck

import (
	"context"
	"errors"
	"net"
	"strconv"
	"syscall"
)

// Answer is what a pod answered one check, in words a waiting page may
// show: its HTTP status, its gRPC serving status, or what became of the
// connection. The set is bounded (a status code is three digits), and
// nothing of the answer's body or headers is in it.
type Answer string

// The answers besides an HTTP status ("HTTP 503") and a gRPC one.
const (
	// AnswerRefused: nothing listens on the port yet.
	AnswerRefused Answer = "refused"
	// AnswerTimeout: no answer within the probe's timeoutSeconds.
	AnswerTimeout Answer = "timeout"
	// AnswerError: the connection failed otherwise, or the answer was
	// not one the check could read.
	AnswerError Answer = "error"
	// AnswerOpen: a tcpSocket check's connection was accepted.
	AnswerOpen Answer = "open"
)

func errorAnswer(err error) Answer {
	var ne net.Error
	switch {
	case errors.Is(err, syscall.ECONNREFUSED):
		return AnswerRefused
	case errors.Is(err, context.DeadlineExceeded), errors.As(err, &ne) && ne.Timeout():
		return AnswerTimeout
	}
	return AnswerError
}

func httpAnswer(code int) Answer {
	if code < 100 || code > 999 {
		return AnswerError
	}
	return Answer("HTTP " + strconv.Itoa(code))
}

// grpcStatusAnswer names a grpc.health.v1 serving status.
func grpcStatusAnswer(status uint64) Answer {
	switch status {
	case 0:
		return "UNKNOWN"
	case grpcServing:
		return "SERVING"
	case 2:
		return "NOT_SERVING"
	case 3:
		return "SERVICE_UNKNOWN"
	}
	return AnswerError
}

// grpcCodeAnswer names a gRPC status code other than OK, as the pod sent
// it: a number from 1 to 16, or none of them.
func grpcCodeAnswer(code string) Answer {
	if n, err := strconv.Atoi(code); err == nil && n >= 1 && n <= 16 && strconv.Itoa(n) == code {
		return Answer("gRPC status " + code)
	}
	return AnswerError
}

// MaxAnswerKinds bounds the kinds of answer a pod's tally keeps: a start
// goes from refused to an app's 503 to its 200, and a page shows a line
// of them.
const MaxAnswerKinds = 4

// AnswerCount is how many times in a row, or in all, a pod gave one
// answer.
type AnswerCount struct {
	Answer Answer `json:"answer"`
	Count  int    `json:"count"`
}

// Answers tallies a pod's answers, the latest MaxAnswerKinds kinds in
// the order they were first given; a kind past them drops the oldest.
// It is a value: a copy is a snapshot.
type Answers struct {
	kinds [MaxAnswerKinds]AnswerCount
	n     int
	last  Answer
}

func (t *Answers) add(a Answer) {
	t.last = a
	for i := range t.n {
		if t.kinds[i].Answer == a {
			t.kinds[i].Count++
			return
		}
	}
	if t.n == MaxAnswerKinds {
		copy(t.kinds[:], t.kinds[1:])
		t.n--
	}
	t.kinds[t.n] = AnswerCount{Answer: a, Count: 1}
	t.n++
}

// List returns the tally, the first answer first.
func (t Answers) List() []AnswerCount { return append([]AnswerCount(nil), t.kinds[:t.n]...) }

// Latest returns the last answer, "" when none was given.
func (t Answers) Latest() Answer { return t.last }
