package service_test

import "github.com/compactord/compactord/engine"

func engineLimits(maxMessages int) engine.Limits {
	l := engine.DefaultLimits()
	l.MaxMessages = maxMessages
	return l
}
