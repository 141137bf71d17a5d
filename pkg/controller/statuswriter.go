package controller

import (
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/clock"

	versioned "github.com/elasti-dev/elasti/pkg/generated/clientset/versioned"
)

// statusWriter writes an ElastiService's status, the one place a sync's
// outcome is recorded (status.go), with the events and measurements that
// go with a change.
type statusWriter struct {
	elastiClient versioned.Interface
	observer     Observer
	clock        clock.PassiveClock
	recorder     record.EventRecorder
	// queue's backlog decides whether a status write can wait
	// (statusCanWait).
	queue Queue
	// superseded is the Controller's: a write records the version it
	// replaced.
	superseded *supersededVersions
}
