package main

import (
	"bytes"
	"encoding/json"
	"io"
	"sort"
	"sync"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// events prints one JSON object per line, each with an "event" name; the only thing printed
// on stdout.
type events struct {
	mu  sync.Mutex
	out io.Writer
}

func newEvents(out io.Writer) *events {
	return &events{out: out}
}

// emit prints {"event": name, key: value, ...}; pairs alternate keys and values.
func (e *events) emit(name string, pairs ...any) {
	event := map[string]any{"event": name}
	for i := 0; i+1 < len(pairs); i += 2 {
		event[pairs[i].(string)] = pairs[i+1]
	}
	var line bytes.Buffer
	encoder := json.NewEncoder(&line)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(event); err != nil {
		panic(err)
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	_, _ = e.out.Write(line.Bytes())
}

func nowMs() int64 {
	return time.Now().UnixMilli()
}

func queue(mq primitive.MessageQueue) map[string]any {
	return map[string]any{"topic": mq.Topic, "brokerName": mq.BrokerName, "queueId": mq.QueueId}
}

// queueList is the queues sorted by topic, broker name and queue id.
func queueList(mqs []primitive.MessageQueue) []map[string]any {
	sorted := append([]primitive.MessageQueue(nil), mqs...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		if a.Topic != b.Topic {
			return a.Topic < b.Topic
		}
		if a.BrokerName != b.BrokerName {
			return a.BrokerName < b.BrokerName
		}
		return a.QueueId < b.QueueId
	})
	list := make([]map[string]any, 0, len(sorted))
	for _, mq := range sorted {
		list = append(list, queue(mq))
	}
	return list
}

// received is what a listener was handed: the message and the queue it was pulled from (the
// client sets the message's topic back to the original one for a retry; its queue stays the
// retry topic's).
func received(consumer string, msg *primitive.MessageExt) []any {
	from := primitive.MessageQueue{}
	if msg.Queue != nil {
		from = *msg.Queue
	}
	return []any{
		"consumer", consumer,
		"body", string(msg.Body),
		"msgId", msg.MsgId,
		"offsetMsgId", msg.OffsetMsgId,
		"topic", msg.Topic,
		"tags", msg.GetTags(),
		"keys", msg.GetKeys(),
		"queueTopic", from.Topic,
		"brokerName", from.BrokerName,
		"queueId", from.QueueId,
		"queueOffset", msg.QueueOffset,
		"reconsumeTimes", msg.ReconsumeTimes,
		"sysFlag", msg.SysFlag,
		"properties", msg.GetProperties(),
		"bornTimestamp", msg.BornTimestamp,
		"storeTimestamp", msg.StoreTimestamp,
		"storeHost", msg.StoreHost,
		"receivedAt", nowMs(),
	}
}

// statusNames are the send statuses by the names RocketMQ's Java client gives them.
var statusNames = map[primitive.SendStatus]string{
	primitive.SendOK:                "SEND_OK",
	primitive.SendFlushDiskTimeout:  "FLUSH_DISK_TIMEOUT",
	primitive.SendFlushSlaveTimeout: "FLUSH_SLAVE_TIMEOUT",
	primitive.SendSlaveNotAvailable: "SLAVE_NOT_AVAILABLE",
	primitive.SendUnknownError:      "UNKNOWN_ERROR",
}

func sent(result *primitive.SendResult, sentAt int64) []any {
	mq := primitive.MessageQueue{}
	if result.MessageQueue != nil {
		mq = *result.MessageQueue
	}
	return []any{
		"status", statusNames[result.Status],
		"msgId", result.MsgID,
		"offsetMsgId", result.OffsetMsgID,
		"brokerName", mq.BrokerName,
		"queueId", mq.QueueId,
		"queueOffset", result.QueueOffset,
		"sentAt", sentAt,
		"ackedAt", nowMs(),
	}
}
