package cache

import (
	"context"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// Waking waiters across replicas. A replica waiting in Fill for another replica's summary
// used to find it only by polling (every 200 ms). Now every Set and every lock release
// publishes the key on one Redis channel, and each process keeps one subscription to it that
// wakes its local waiters at once. Plain PUBLISH reaches subscribers on every node of a Redis
// Cluster and follows a Sentinel failover with the client, so one mechanism serves every
// topology. The poll stays as the fallback: a message lost while the subscription reconnects
// costs a waiter at most one poll interval, never a wrong result, because a woken waiter
// reads the entry from Redis like a polling one.

// notifyChannel is the channel (under the key prefix) that carries the keys whose entry was
// stored or whose lock was released.
const notifyChannel = "notify"

// subscribeTimeout bounds how long the first waiter of a process waits for the subscription
// to be confirmed before relying on the poll.
const subscribeTimeout = 500 * time.Millisecond

// notifications fans the messages of the notify channel out to the waiters of each key.
type notifications struct {
	rdb     redis.UniversalClient
	channel string

	mu      sync.Mutex
	started bool
	sub     *redis.PubSub
	waiters map[string]waiter
}

// waiter is the channel of one key's waiters and when it was made.
type waiter struct {
	ch    chan struct{}
	since time.Time
}

// staleWaiters is how many keys may wait before changed drops the channels of keys that
// were never notified for longer than staleAfter (their holder died; their waiters polled).
const (
	staleWaiters = 1024
	staleAfter   = 10 * time.Minute
)

func newNotifications(rdb redis.UniversalClient, prefix string) *notifications {
	return &notifications{rdb: rdb, channel: prefix + notifyChannel, waiters: map[string]waiter{}}
}

// changed implements notifier: the channel is closed at the next notification of key from any
// process. The first call subscribes.
func (n *notifications) changed(key Key) <-chan struct{} {
	n.mu.Lock()
	if !n.started {
		n.started = true
		n.mu.Unlock()
		n.subscribe()
		n.mu.Lock()
	}
	defer n.mu.Unlock()
	w, ok := n.waiters[key.s]
	if !ok {
		now := time.Now()
		if len(n.waiters) >= staleWaiters {
			for k, w := range n.waiters {
				if now.Sub(w.since) > staleAfter {
					delete(n.waiters, k)
				}
			}
		}
		w = waiter{ch: make(chan struct{}), since: now}
		n.waiters[key.s] = w
	}
	return w.ch
}

// subscribe opens the subscription, waits (briefly) for Redis to confirm it, and starts the
// goroutine that wakes waiters. go-redis resubscribes by itself after a reconnection.
func (n *notifications) subscribe() {
	sub := n.rdb.Subscribe(context.Background(), n.channel)
	ctx, cancel := context.WithTimeout(context.Background(), subscribeTimeout)
	_, _ = sub.Receive(ctx) // the confirmation; on failure waiters poll until it connects
	cancel()
	n.mu.Lock()
	n.sub = sub
	n.mu.Unlock()
	go func() {
		for msg := range sub.Channel() {
			n.wake(msg.Payload)
		}
	}()
}

// wake releases the waiters of key.
func (n *notifications) wake(key string) {
	n.mu.Lock()
	defer n.mu.Unlock()
	if w, ok := n.waiters[key]; ok {
		close(w.ch)
		delete(n.waiters, key)
	}
}

// publish tells every process that key changed. It is best effort: a failure leaves waiters
// to their poll. Redis.publish runs it within the command budget and behind the breaker.
func (n *notifications) publish(ctx context.Context, key Key) error {
	return n.rdb.Publish(ctx, n.channel, key.s).Err()
}

// close ends the subscription.
func (n *notifications) close() {
	n.mu.Lock()
	sub := n.sub
	n.mu.Unlock()
	if sub != nil {
		_ = sub.Close()
	}
}
