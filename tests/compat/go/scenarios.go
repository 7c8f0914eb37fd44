package main

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
)

// driver builds the clients of a scenario, all with the same settings, and waits for
// conditions until the deadline. The scenarios, one per subcommand, each start their clients,
// print what they send and receive, and return once everything they expect has arrived and
// their clients are shut down, or a deadlineError naming what is still missing.
type driver struct {
	options  map[string]string
	deadline time.Time
	events   *events
	suffix   string
}

// deadlineError: a condition was not reached by the deadline; its message says which.
type deadlineError struct{ what string }

func (e *deadlineError) Error() string { return "timed out waiting for " + e.what }

func (d *driver) option(name string) string {
	value, ok := d.options[name]
	if !ok {
		panic(fmt.Sprintf("missing option --%s=...", name))
	}
	return value
}

func (d *driver) number(name string, fallback int) int {
	value, err := strconv.Atoi(optionOr(d.options, name, strconv.Itoa(fallback)))
	if err != nil {
		panic(fmt.Sprintf("--%s: %v", name, err))
	}
	return value
}

func (d *driver) namesrv() primitive.NamesrvAddr {
	return strings.Split(d.option("namesrv"), ";")
}

// await polls condition every 20 ms until it holds; past the deadline it gives up.
func (d *driver) await(what string, condition func() bool) error {
	for !condition() {
		if time.Now().After(d.deadline) {
			return &deadlineError{what}
		}
		time.Sleep(20 * time.Millisecond)
	}
	return nil
}

// ------------------------------------------------------------------ clients

// credentials are --access-key and --secret-key, which sign every request of the clients
// (primitive.Credentials); ok is false without them (unsigned requests).
func (d *driver) credentials() (c primitive.Credentials, ok bool) {
	c.AccessKey, c.SecretKey = d.options["access-key"], d.options["secret-key"]
	return c, c.AccessKey != "" && c.SecretKey != ""
}

// tls is --tls true: every connection over TLS (the client's WithTls; it does not verify the
// servers' certificates).
func (d *driver) tls() bool {
	return d.options["tls"] == "true"
}

// producer is a started producer of its own client instance (group "<group>-producer").
func (d *driver) producer() (interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
	Shutdown() error
}, error) {
	options := []producer.Option{
		producer.WithGroupName(d.option("group") + "-producer"),
		producer.WithNameServer(d.namesrv()),
		producer.WithInstanceName("producer" + d.suffix),
	}
	if c, ok := d.credentials(); ok {
		options = append(options, producer.WithCredentials(c))
	}
	if d.tls() {
		options = append(options, producer.WithTls(true))
	}
	p, err := producer.NewDefaultProducer(options...)
	if err != nil {
		return nil, err
	}
	return p, p.Start()
}

type listener = func(context.Context, ...*primitive.MessageExt) (consumer.ConsumeResult, error)

// pushConsumer is a started clustering push consumer of the group, subscribed to all of the
// topic, reading a new group's queues from their first message. assigned lists the queues of a
// topic its rebalance gave it, from what it reports as its running info; Shutdown first waits
// until no queue of it holds a message any more and the offset it keeps for each queue is past
// every message the listener was given: the client sends a failed message back after the
// listener returned, and a consumer shut down before that drops the listener's result; it
// also takes a message out of its queue's cache before it moves the queue's offset. Then it
// commits those offsets and waits until the brokers of --brokers hold them (offsets.go), and
// only then shuts the client down.
type pushConsumer struct {
	Shutdown func() error
	assigned func(topic string) []primitive.MessageQueue
}

func (d *driver) consumer(instance string, f listener, more ...consumer.Option) (*pushConsumer, error) {
	options := append([]consumer.Option{
		consumer.WithGroupName(d.option("group")),
		consumer.WithNameServer(d.namesrv()),
		consumer.WithInstance(instance + d.suffix),
		consumer.WithConsumerModel(consumer.Clustering),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
	}, more...)
	if credentials, ok := d.credentials(); ok {
		options = append(options, consumer.WithCredentials(credentials))
	}
	if d.tls() {
		options = append(options, consumer.WithTls(true))
	}
	c, err := consumer.NewPushConsumer(options...)
	if err != nil {
		return nil, err
	}
	handed := newHanded()
	if err := c.Subscribe(d.option("topic"), consumer.MessageSelector{}, handed.wrap(f)); err != nil {
		return nil, err
	}
	if err := c.Start(); err != nil {
		return nil, err
	}
	assigned := func(topic string) []primitive.MessageQueue {
		var queues []primitive.MessageQueue
		for mq := range c.GetConsumerRunningInfo(false).MQTable {
			if mq.Topic == topic {
				queues = append(queues, mq)
			}
		}
		return queues
	}
	idle := func() bool {
		table := c.GetConsumerRunningInfo(false).MQTable
		for _, pq := range table {
			if pq.CachedMsgCount > 0 {
				return false
			}
		}
		return handed.committedPast(func(mq primitive.MessageQueue) (int64, bool) {
			pq, ok := table[mq]
			return pq.CommitOffset, ok
		})
	}
	// What the brokers hold for every queue the consumer still has is at least what it
	// committed (offsets.go says why the driver asks); a broker it cannot reach yet is asked
	// again.
	held := func() bool {
		brokers := d.brokers()
		for mq, pq := range c.GetConsumerRunningInfo(false).MQTable {
			address, known := brokers[mq.BrokerName]
			if !known {
				continue
			}
			offset, err := d.brokerOffset(address, d.option("group"), mq)
			if err != nil || offset < pq.CommitOffset {
				return false
			}
		}
		return true
	}
	shutdown := func() error {
		if err := d.await(instance+"'s messages done with", idle); err != nil {
			return err
		}
		if err := c.PersistConsumerOffset(); err != nil {
			return err
		}
		if err := d.await(instance+"'s offsets held by the brokers", held); err != nil {
			return err
		}
		return c.Shutdown()
	}
	return &pushConsumer{Shutdown: shutdown, assigned: assigned}, nil
}

// handed is the highest queue offset the listener was given, per queue.
type handed struct {
	mutex sync.Mutex
	last  map[primitive.MessageQueue]int64
}

func newHanded() *handed { return &handed{last: map[primitive.MessageQueue]int64{}} }

func (h *handed) wrap(f listener) listener {
	return func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		if concurrent, ok := primitive.GetConcurrentlyCtx(ctx); ok {
			h.mutex.Lock()
			for _, msg := range msgs {
				if last, seen := h.last[concurrent.MQ]; !seen || msg.QueueOffset > last {
					h.last[concurrent.MQ] = msg.QueueOffset
				}
			}
			h.mutex.Unlock()
		}
		return f(ctx, msgs...)
	}
}

// committedPast: the consumer's offset of every queue it was given messages from is past the
// last of them (a queue it no longer holds is another consumer's to commit).
func (h *handed) committedPast(offset func(primitive.MessageQueue) (int64, bool)) bool {
	h.mutex.Lock()
	defer h.mutex.Unlock()
	for mq, last := range h.last {
		if committed, held := offset(mq); held && committed <= last {
			return false
		}
	}
	return true
}

// awaitAssigned waits until the consumer pulls `expected` queues of the topic and prints them.
func (d *driver) awaitAssigned(name string, c *pushConsumer, topic string, expected int) error {
	err := d.await(fmt.Sprintf("%s to pull all %d queues of %s", name, expected, topic),
		func() bool { return len(c.assigned(topic)) == expected })
	if err == nil {
		d.events.emit("assigned", "consumer", name, "queues", queueList(c.assigned(topic)))
	}
	return err
}

// close prints "closing", then shuts the clients down in order (a consumer commits its
// offsets and unregisters).
func (d *driver) close(shutdowns ...func() error) error {
	d.events.emit("closing")
	for _, shutdown := range shutdowns {
		if err := shutdown(); err != nil {
			return err
		}
	}
	return nil
}

// seen counts the deliveries of each body, and the bodies consumed.
type seen struct {
	mu         sync.Mutex
	deliveries map[string]int
	consumed   map[string]bool
}

func newSeen() *seen {
	return &seen{deliveries: map[string]int{}, consumed: map[string]bool{}}
}

func (s *seen) add(body string, consumed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.deliveries[body]++
	if consumed {
		s.consumed[body] = true
	}
}

func (s *seen) all(bodies []string, done func(body string, deliveries int, consumed bool) bool) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, body := range bodies {
		if !done(body, s.deliveries[body], s.consumed[body]) {
			return false
		}
	}
	return true
}

func (s *seen) consumedAll(bodies []string) bool {
	return s.all(bodies, func(_ string, _ int, consumed bool) bool { return consumed })
}

// recorder is a listener that prints and acknowledges every message.
func (d *driver) recorder(name string, s *seen) listener {
	return func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, msg := range msgs {
			d.events.emit("received", received(name, msg)...)
			s.add(string(msg.Body), true)
		}
		return consumer.ConsumeSuccess, nil
	}
}

// message is a message of the topic with the tag, key "key-<index>" and property "index".
func (d *driver) message(body string, index int) *primitive.Message {
	msg := primitive.NewMessage(d.option("topic"), []byte(body))
	msg.WithTag(optionOr(d.options, "tag", "compat"))
	msg.WithKeys([]string{fmt.Sprintf("key-%d", index)})
	msg.WithProperty("index", strconv.Itoa(index))
	return msg
}

// sendAll sends `count` messages one by one (SendSync); with --large-every=N every Nth body is
// padded past 4 KiB, so the producer compresses it.
func (d *driver) sendAll(p interface {
	SendSync(context.Context, ...*primitive.Message) (*primitive.SendResult, error)
}, prefix string, count int) ([]string, error) {
	largeEvery := d.number("large-every", 0)
	bodies := make([]string, 0, count)
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("%s %d", prefix, i)
		if largeEvery > 0 && i%largeEvery == largeEvery-1 {
			body += " " + strings.Repeat("large ", 1000)
		}
		sentAt := nowMs()
		result, err := p.SendSync(context.Background(), d.message(body, i))
		if err != nil {
			return nil, fmt.Errorf("sending %q: %w", body, err)
		}
		d.events.emit("sent", append(sent(result, sentAt), "kind", "sync", "body", body, "index", i)...)
		bodies = append(bodies, body)
	}
	return bodies, nil
}

// ------------------------------------------------------------------ scenarios

// send: a push consumer takes all --queues queues of the topic, then --count sync sends (tag,
// keys, a property) are all received.
func (d *driver) send() error {
	topic := d.option("topic")
	s := newSeen()
	c, err := d.consumer("consumer", d.recorder("consumer", s))
	if err != nil {
		return err
	}
	if err := d.awaitAssigned("consumer", c, topic, d.number("queues", 8)); err != nil {
		return err
	}
	p, err := d.producer()
	if err != nil {
		return err
	}
	bodies, err := d.sendAll(p, optionOr(d.options, "prefix", "message"), d.number("count", 100))
	if err != nil {
		return err
	}
	if err := d.await(fmt.Sprintf("all %d messages received", len(bodies)),
		func() bool { return s.consumedAll(bodies) }); err != nil {
		return err
	}
	return d.close(c.Shutdown, p.Shutdown)
}

// retry: a listener that returns ConsumeRetryLater for messages with an even index on every
// delivery (so they end as dead letters after --max-reconsume retries), for odd ones on their
// first delivery only. Waits for the consumer to pull --retry-queues queues of the group's
// retry topic before sending.
func (d *driver) retry() error {
	topic := d.option("topic")
	retryTopic := "%RETRY%" + d.option("group")
	maxReconsume := d.number("max-reconsume", 2)
	s := newSeen()
	f := func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		result := consumer.ConsumeSuccess
		for _, msg := range msgs {
			index, _ := strconv.Atoi(msg.GetProperty("index"))
			if index%2 == 0 || msg.ReconsumeTimes == 0 {
				result = consumer.ConsumeRetryLater
			}
		}
		names := map[consumer.ConsumeResult]string{
			consumer.ConsumeSuccess: "CONSUME_SUCCESS", consumer.ConsumeRetryLater: "RECONSUME_LATER",
		}
		for _, msg := range msgs {
			d.events.emit("received", append(received("retry", msg), "result", names[result])...)
			s.add(string(msg.Body), result == consumer.ConsumeSuccess)
		}
		return result, nil
	}
	c, err := d.consumer("retry", f, consumer.WithMaxReconsumeTimes(int32(maxReconsume)))
	if err != nil {
		return err
	}
	if err := d.awaitAssigned("retry", c, topic, d.number("queues", 8)); err != nil {
		return err
	}
	if err := d.awaitAssigned("retry", c, retryTopic, d.number("retry-queues", 2)); err != nil {
		return err
	}
	p, err := d.producer()
	if err != nil {
		return err
	}
	bodies, err := d.sendAll(p, optionOr(d.options, "prefix", "message"), d.number("count", 10))
	if err != nil {
		return err
	}
	finished := func(body string, deliveries int, consumed bool) bool {
		index, _ := strconv.Atoi(body[strings.LastIndexByte(body, ' ')+1:])
		if index%2 == 0 {
			return deliveries == maxReconsume+1
		}
		return consumed
	}
	what := fmt.Sprintf("every message delivered until consumed or %d times", maxReconsume+1)
	if err := d.await(what, func() bool { return s.all(bodies, finished) }); err != nil {
		return err
	}
	return d.close(c.Shutdown, p.Shutdown)
}

// sendOnce: one sync send, printed as "sent" when it is acknowledged and as "sendFailed" (the
// error) when it is not, as when the broker refuses the producer's account.
func (d *driver) sendOnce() error {
	p, err := d.producer()
	if err != nil {
		return err
	}
	body := optionOr(d.options, "prefix", "message") + " once"
	sentAt := nowMs()
	result, err := p.SendSync(context.Background(), d.message(body, 0))
	if err != nil {
		d.events.emit("sendFailed", "body", body, "error", err.Error())
	} else {
		d.events.emit("sent", append(sent(result, sentAt), "kind", "sync", "body", body)...)
	}
	return d.close(p.Shutdown)
}

// failover sends --count messages one at a time, each again (a new message) until it is
// acknowledged with SEND_OK, with a push consumer receiving them; returns once every
// acknowledged message has been received. The test kills the master meanwhile. Between
// messages it pauses --pause-ms (default 20), between tries of one --retry-pause-ms (100).
func (d *driver) failover() error {
	count := d.number("count", 300)
	pause := time.Duration(d.number("pause-ms", 20)) * time.Millisecond
	retryPause := time.Duration(d.number("retry-pause-ms", 100)) * time.Millisecond
	prefix := optionOr(d.options, "prefix", "message")
	s := newSeen()
	c, err := d.consumer("consumer", d.recorder("consumer", s))
	if err != nil {
		return err
	}
	p, err := d.producer()
	if err != nil {
		return err
	}
	bodies := make([]string, 0, count)
	for i := 0; i < count; i++ {
		body := fmt.Sprintf("%s %d", prefix, i)
		for {
			sentAt := nowMs()
			result, err := p.SendSync(context.Background(), d.message(body, i))
			if err == nil && result.Status == primitive.SendOK {
				d.events.emit("sent", append(sent(result, sentAt), "kind", "sync", "body", body, "index", i)...)
				break
			}
			if err != nil {
				d.events.emit("sendFailed", "body", body, "error", err.Error(), "at", nowMs())
			} else {
				d.events.emit("sendNotOk", "body", body, "status", statusNames[result.Status], "at", nowMs())
			}
			if time.Now().After(d.deadline) {
				return &deadlineError{"a send of " + body}
			}
			time.Sleep(retryPause)
		}
		bodies = append(bodies, body)
		time.Sleep(pause)
	}
	if err := d.await("every acknowledged message consumed",
		func() bool { return s.consumedAll(bodies) }); err != nil {
		return err
	}
	return d.close(c.Shutdown, p.Shutdown)
}
