package reconsume.compat;

import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashSet;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.ConsumeOrderlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.listener.MessageListenerOrderly;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.exception.MQClientException;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.MessageQueueSelector;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.heartbeat.MessageModel;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;

/**
 * The scenarios, one per subcommand. Each starts its clients, prints what it sends and receives,
 * returns once everything it expects has arrived and its clients are shut down, and throws
 * {@link Clients.Deadline} naming what is still missing at the deadline.
 */
final class Scenarios {
    private final Clients clients;
    private final Events events;
    private final String topic;
    private final String group;
    private final String tag;
    private final String prefix;
    private final int queues;

    Scenarios(Clients clients, Events events) {
        this.clients = clients;
        this.events = events;
        this.topic = clients.option("topic");
        this.group = clients.option("group");
        this.tag = clients.option("tag", "compat");
        this.prefix = clients.option("prefix", "message");
        this.queues = clients.number("queues", 8);
    }

    void run(String scenario) throws Exception {
        switch (scenario) {
            case "route" -> route();
            case "send" -> send();
            case "clustering" -> clustering();
            case "broadcasting" -> broadcasting();
            case "retry" -> retry();
            case "orderly" -> orderly();
            case "failover" -> failover();
            case "sendOnce" -> sendOnce();
            default -> throw new IllegalArgumentException("unknown scenario " + scenario);
        }
    }

    // ------------------------------------------------------------------ scenarios

    /** The route as the client decodes it, the queues it publishes to and subscribes to, and
     * one message sent explicitly to each queue and received from it. */
    private void route() throws Exception {
        DefaultMQProducer producer = clients.producer(group + "-producer");
        TopicRouteData route = producer.getDefaultMQProducerImpl().getmQClientFactory()
            .getMQClientAPIImpl().getTopicRouteInfoFromNameServer(topic, 3000);
        List<Map<String, Object>> queueDatas = new ArrayList<>();
        for (QueueData data : route.getQueueDatas()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("brokerName", data.getBrokerName());
            item.put("readQueueNums", data.getReadQueueNums());
            item.put("writeQueueNums", data.getWriteQueueNums());
            item.put("perm", data.getPerm());
            queueDatas.add(item);
        }
        List<Map<String, Object>> brokerDatas = new ArrayList<>();
        for (BrokerData data : route.getBrokerDatas()) {
            Map<String, Object> item = new LinkedHashMap<>();
            item.put("brokerName", data.getBrokerName());
            item.put("cluster", data.getCluster());
            item.put("brokerAddrs", new TreeMap<>(data.getBrokerAddrs()));
            brokerDatas.add(item);
        }
        events.emit("route", "queueDatas", queueDatas, "brokerDatas", brokerDatas);
        List<MessageQueue> publish = producer.fetchPublishMessageQueues(topic);
        events.emit("publishQueues", "queues", Events.queues(publish));

        Map<String, Integer> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = clients.consumer(group, "route", topic);
        consumer.registerMessageListener(recorder("route", seen));
        consumer.start();
        events.emit("subscribeQueues", "queues", Events.queues(consumer.fetchSubscribeMessageQueues(topic)));
        awaitAssigned("route", consumer, queues);

        List<String> bodies = new ArrayList<>();
        for (MessageQueue mq : publish) {
            String body = prefix + " to " + mq.getBrokerName() + "/" + mq.getQueueId();
            long sentAt = System.currentTimeMillis();
            SendResult result = producer.send(new Message(topic, tag, body.getBytes(StandardCharsets.UTF_8)), mq);
            events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "explicit", "body", body,
                "target", Events.queue(mq)));
            bodies.add(body);
        }
        clients.await("the message sent to each queue", () -> seen.keySet().containsAll(bodies));

        // A topic no broker has: the producer sends by the default topic's (TBW102) route and
        // the broker that takes the message creates the topic.
        String autoTopic = clients.option("auto-topic", "");
        if (!autoTopic.isEmpty()) {
            String body = prefix + " creating " + autoTopic;
            long sentAt = System.currentTimeMillis();
            SendResult result = producer.send(new Message(autoTopic, tag, body.getBytes(StandardCharsets.UTF_8)));
            events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "auto", "body", body,
                "topic", autoTopic));
        }
        close(consumer::shutdown, producer::shutdown);
    }

    /** Delay-level sends, sync sends and batch sends, all consumed by one push consumer. */
    private void send() throws Exception {
        int count = clients.number("count", 100);
        int batches = clients.number("batches", 0);
        int batchSize = clients.number("batch-size", 10);
        int perLevel = clients.number("per-level", 2);
        List<Integer> levels = new ArrayList<>();
        for (String level : clients.option("delay-levels", "").split(",")) {
            if (!level.isBlank()) {
                levels.add(Integer.parseInt(level.trim()));
            }
        }
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = clients.consumer(group, "consumer", topic);
        consumer.registerMessageListener(recorder("consumer", seen));
        consumer.start();
        awaitAssigned("consumer", consumer, queues);
        DefaultMQProducer producer = clients.producer(group + "-producer");

        Set<String> expected = new HashSet<>();
        for (int level : levels) {
            for (int j = 0; j < perLevel; j++) {
                String body = prefix + " delayed " + level + "-" + j;
                Message msg = new Message(topic, tag, body.getBytes(StandardCharsets.UTF_8));
                msg.setDelayTimeLevel(level);
                long sentAt = System.currentTimeMillis();
                SendResult result = producer.send(msg);
                events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "delay", "body", body,
                    "delayLevel", level));
                expected.add(body);
            }
        }
        expected.addAll(sendAll(producer, prefix, count));
        for (int b = 0; b < batches; b++) {
            List<Message> batch = new ArrayList<>();
            List<String> bodies = new ArrayList<>();
            for (int j = 0; j < batchSize; j++) {
                String body = prefix + " batch " + b + "-" + j;
                Message msg = new Message(topic, tag, "batch-key-" + b + "-" + j, body.getBytes(StandardCharsets.UTF_8));
                msg.putUserProperty("index", String.valueOf(j));
                batch.add(msg);
                bodies.add(body);
            }
            long sentAt = System.currentTimeMillis();
            SendResult result = producer.send(batch);
            events.emit("sentBatch", Events.concat(Events.sent(result, sentAt), "kind", "batch", "bodies", bodies));
            expected.addAll(bodies);
        }
        clients.await("all " + expected.size() + " messages received", () -> seen.keySet().containsAll(expected));
        close(consumer::shutdown, producer::shutdown);
    }

    /** One consumer takes all queues and consumes a first round; once its offsets are
     * committed a second joins the group, the queues are shared, and both consume a second
     * round. */
    private void clustering() throws Exception {
        int count = clients.number("count", 100);
        Map<String, Integer> seen1 = new ConcurrentHashMap<>();
        Map<String, Integer> seen2 = new ConcurrentHashMap<>();
        DefaultMQPushConsumer c1 = clients.consumer(group, "c1", topic);
        c1.registerMessageListener(recorder("c1", seen1));
        c1.start();
        awaitAssigned("c1", c1, queues);

        DefaultMQProducer producer = clients.producer(group + "-producer");
        List<String> first = sendAll(producer, prefix + " first", count);
        clients.await("the first round received by c1", () -> seen1.keySet().containsAll(first));
        List<MessageQueue> all = producer.fetchPublishMessageQueues(topic);
        // The client commits offsets every second from 10 s after it started; c2 must not
        // query them before they are there, or it would consume the first round again.
        clients.await("c1's offsets committed at the queue ends", 200, () -> {
            for (MessageQueue mq : all) {
                if (Clients.committedOffset(c1, mq) != producer.maxOffset(mq)) {
                    return false;
                }
            }
            return true;
        });
        events.emit("committed", "consumer", "c1");

        DefaultMQPushConsumer c2 = clients.consumer(group, "c2", topic);
        c2.registerMessageListener(recorder("c2", seen2));
        c2.start();
        clients.await("the queues shared by c1 and c2", () -> {
            Set<MessageQueue> a = Clients.assigned(c1, topic);
            Set<MessageQueue> b = Clients.assigned(c2, topic);
            Set<MessageQueue> union = new HashSet<>(a);
            union.addAll(b);
            return !a.isEmpty() && !b.isEmpty() && a.size() + b.size() == queues && union.size() == queues;
        });
        events.emit("assigned", "consumer", "c1", "queues", Events.queues(Clients.assigned(c1, topic)));
        events.emit("assigned", "consumer", "c2", "queues", Events.queues(Clients.assigned(c2, topic)));

        List<String> second = sendAll(producer, prefix + " second", count);
        clients.await("the second round received by c1 and c2", () -> {
            Set<String> union = new HashSet<>(seen1.keySet());
            union.addAll(seen2.keySet());
            return union.containsAll(second);
        });
        close(c2::shutdown, c1::shutdown, producer::shutdown);
    }

    /** Two broadcasting consumers of one group each receive every message. */
    private void broadcasting() throws Exception {
        int count = clients.number("count", 100);
        Map<String, Integer> seen1 = new ConcurrentHashMap<>();
        Map<String, Integer> seen2 = new ConcurrentHashMap<>();
        DefaultMQPushConsumer b1 = clients.consumer(group, "b1", topic);
        DefaultMQPushConsumer b2 = clients.consumer(group, "b2", topic);
        b1.setMessageModel(MessageModel.BROADCASTING);
        b2.setMessageModel(MessageModel.BROADCASTING);
        b1.registerMessageListener(recorder("b1", seen1));
        b2.registerMessageListener(recorder("b2", seen2));
        b1.start();
        b2.start();
        awaitAssigned("b1", b1, queues);
        awaitAssigned("b2", b2, queues);

        DefaultMQProducer producer = clients.producer(group + "-producer");
        List<String> bodies = sendAll(producer, prefix, count);
        clients.await("every message received by b1 and by b2",
            () -> seen1.keySet().containsAll(bodies) && seen2.keySet().containsAll(bodies));
        close(b1::shutdown, b2::shutdown, producer::shutdown);
    }

    /** A listener that fails: messages with an even index always (so they end as dead letters
     * after max-reconsume retries), odd ones only on their first delivery. */
    private void retry() throws Exception {
        int count = clients.number("count", 10);
        int maxReconsume = clients.number("max-reconsume", 2);
        Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        DefaultMQPushConsumer consumer = clients.consumer(group, "retry", topic);
        consumer.setMaxReconsumeTimes(maxReconsume);
        consumer.registerMessageListener((MessageListenerConcurrently) (msgs, context) -> {
            ConsumeConcurrentlyStatus status = ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
            for (MessageExt msg : msgs) {
                boolean fails = Integer.parseInt(msg.getUserProperty("index")) % 2 == 0 || msg.getReconsumeTimes() == 0;
                if (fails) {
                    status = ConsumeConcurrentlyStatus.RECONSUME_LATER;
                }
                events.emit("received", Events.concat(Events.received("retry", msg, context.getMessageQueue()),
                    "result", fails ? "RECONSUME_LATER" : "CONSUME_SUCCESS"));
            }
            for (MessageExt msg : msgs) {
                String body = body(msg);
                deliveries.merge(body, 1, Integer::sum);
                if (status == ConsumeConcurrentlyStatus.CONSUME_SUCCESS) {
                    consumed.add(body);
                }
            }
            return status;
        });
        consumer.start();
        awaitAssigned("retry", consumer, queues);
        String retryTopic = MixAll.getRetryTopic(group);
        int retryQueues = clients.number("retry-queues", 2);
        clients.await("the consumer to pull all " + retryQueues + " queues of " + retryTopic,
            () -> Clients.assigned(consumer, retryTopic).size() == retryQueues);
        events.emit("assigned", "consumer", "retry", "queues", Events.queues(Clients.assigned(consumer, retryTopic)));

        DefaultMQProducer producer = clients.producer(group + "-producer");
        List<String> bodies = sendAll(producer, prefix, count);
        clients.await("every message delivered until consumed or " + (maxReconsume + 1) + " times", () -> {
            for (int i = 0; i < bodies.size(); i++) {
                String body = bodies.get(i);
                boolean finished = i % 2 == 0
                    ? deliveries.getOrDefault(body, 0) == maxReconsume + 1
                    : consumed.contains(body);
                if (!finished) {
                    return false;
                }
            }
            return true;
        });
        close(consumer::shutdown, producer::shutdown);
    }

    /**
     * Messages of several keys, each key's sent in sequence to the queue its key selects; an
     * orderly listener suspends its queue on some messages the first time it sees them, and
     * on every delivery of the messages with sequence number {@code --poison-seq}, which the
     * client gives up on after {@code --max-reconsume} retries (sending them to the group's
     * retry topic, whence the broker dead-letters them).
     */
    private void orderly() throws Exception {
        int count = clients.number("count", 120);
        int keys = clients.number("keys", 12);
        int suspendEvery = clients.number("suspend-every", 5);
        long suspendMs = clients.number("suspend-ms", 100);
        int poisonSeq = clients.number("poison-seq", -1);
        int maxReconsume = clients.number("max-reconsume", 2);
        Set<String> consumed = ConcurrentHashMap.newKeySet();
        Map<String, Integer> poisonDeliveries = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = clients.consumer(group, "orderly", topic);
        consumer.setMaxReconsumeTimes(maxReconsume);
        consumer.registerMessageListener((MessageListenerOrderly) (msgs, context) -> {
            ConsumeOrderlyStatus status = ConsumeOrderlyStatus.SUCCESS;
            for (MessageExt msg : msgs) {
                int seq = Integer.parseInt(msg.getUserProperty("seq"));
                if (seq == poisonSeq) {
                    poisonDeliveries.merge(body(msg), 1, Integer::sum);
                }
                if (seq == poisonSeq || seq % suspendEvery == suspendEvery - 1 && msg.getReconsumeTimes() == 0) {
                    status = ConsumeOrderlyStatus.SUSPEND_CURRENT_QUEUE_A_MOMENT;
                }
            }
            for (MessageExt msg : msgs) {
                events.emit("received", Events.concat(Events.received("orderly", msg, context.getMessageQueue()),
                    "result", status.name()));
                if (status == ConsumeOrderlyStatus.SUCCESS) {
                    consumed.add(body(msg));
                }
            }
            if (status != ConsumeOrderlyStatus.SUCCESS) {
                context.setSuspendCurrentQueueTimeMillis(suspendMs);
            }
            return status;
        });
        consumer.start();
        awaitAssigned("orderly", consumer, queues);

        DefaultMQProducer producer = clients.producer(group + "-producer");
        MessageQueueSelector byKey = (mqs, msg, key) -> mqs.get((Integer) key % mqs.size());
        List<String> bodies = new ArrayList<>();
        List<String> poison = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            int key = i % keys;
            int seq = i / keys;
            String body = prefix + " " + key + "-" + seq;
            Message msg = new Message(topic, tag, "order-" + key, body.getBytes(StandardCharsets.UTF_8));
            msg.putUserProperty("key", String.valueOf(key));
            msg.putUserProperty("seq", String.valueOf(seq));
            long sentAt = System.currentTimeMillis();
            SendResult result = producer.send(msg, byKey, key);
            events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "ordered", "body", body,
                "key", key, "seq", seq));
            (seq == poisonSeq ? poison : bodies).add(body);
        }
        clients.await("every message consumed in order, or given up on", () -> {
            for (String body : poison) {
                if (poisonDeliveries.getOrDefault(body, 0) != maxReconsume + 1) {
                    return false;
                }
            }
            return consumed.containsAll(bodies);
        });
        close(consumer::shutdown, producer::shutdown);
    }

    /**
     * Sends {@code count} messages one at a time, each again until it is acknowledged with
     * SEND_OK (a send fails or is answered SLAVE_NOT_AVAILABLE while a broker's master is being
     * replaced), with a push consumer receiving them; returns once every acknowledged message
     * has been received. The test kills the master meanwhile. The producer asks the name server
     * for routes every {@code --poll-ms} (default 1000; the client's own default is 30 s).
     */
    private void failover() throws Exception {
        int count = clients.number("count", 300);
        int pauseMs = clients.number("pause-ms", 20);
        Map<String, Integer> seen = new ConcurrentHashMap<>();
        DefaultMQPushConsumer consumer = clients.consumer(group, "consumer", topic);
        consumer.registerMessageListener(recorder("consumer", seen));
        consumer.start();
        DefaultMQProducer producer = clients.producer(group + "-producer");
        producer.setPollNameServerInterval(clients.number("poll-ms", 1000));
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String body = prefix + " " + i;
            while (true) {
                long sentAt = System.currentTimeMillis();
                try {
                    SendResult result = producer.send(new Message(topic, tag, body.getBytes(StandardCharsets.UTF_8)));
                    if (result.getSendStatus() == SendStatus.SEND_OK) {
                        events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "sync", "body", body,
                            "index", i));
                        break;
                    }
                    events.emit("sendNotOk", "body", body, "status", result.getSendStatus().name());
                } catch (Exception e) {
                    events.emit("sendFailed", "body", body, "error", e.getClass().getSimpleName());
                }
                clients.await("a send of " + body, () -> true);  // fails past the deadline
                Thread.sleep(pauseMs);
            }
            bodies.add(body);
            Thread.sleep(pauseMs);
        }
        clients.await("every acknowledged message consumed", () -> seen.keySet().containsAll(bodies));
        close(consumer::shutdown, producer::shutdown);
    }

    /** One sync send: "sent" when it is acknowledged, "sendFailed" with the answer's code
     * (MQClientException and MQBrokerException carry it) and the exception when it is not, as
     * when the broker refuses the producer's account. */
    private void sendOnce() throws Exception {
        DefaultMQProducer producer = clients.producer(group + "-producer");
        String body = prefix + " once";
        long sentAt = System.currentTimeMillis();
        try {
            SendResult result = producer.send(new Message(topic, tag, body.getBytes(StandardCharsets.UTF_8)));
            events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "sync", "body", body));
        } catch (MQClientException | MQBrokerException failure) {
            int code = failure instanceof MQClientException client
                ? client.getResponseCode()
                : ((MQBrokerException) failure).getResponseCode();
            Throwable cause = failure.getCause();
            events.emit("sendFailed", "body", body, "responseCode", code, "error", failure.toString(),
                "cause", cause == null ? null : cause.toString());
        }
        close(producer::shutdown);
    }

    // ------------------------------------------------------------------ helpers

    /** A concurrent listener that prints and acknowledges every message. */
    private MessageListenerConcurrently recorder(String consumer, Map<String, Integer> seen) {
        return (msgs, context) -> {
            for (MessageExt msg : msgs) {
                events.emit("received", Events.received(consumer, msg, context.getMessageQueue()));
                seen.merge(body(msg), 1, Integer::sum);
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        };
    }

    /**
     * Sends {@code count} messages one by one (tag, key and an "index" property each); with
     * {@code --large-every=N} every Nth body is padded past 4 KiB, so the producer compresses it.
     */
    private List<String> sendAll(DefaultMQProducer producer, String bodyPrefix, int count) throws Exception {
        int largeEvery = clients.number("large-every", 0);
        List<String> bodies = new ArrayList<>();
        for (int i = 0; i < count; i++) {
            String body = bodyPrefix + " " + i;
            if (largeEvery > 0 && i % largeEvery == largeEvery - 1) {
                body += " " + "large ".repeat(1000);
            }
            Message msg = new Message(topic, tag, "key-" + i, body.getBytes(StandardCharsets.UTF_8));
            msg.putUserProperty("index", String.valueOf(i));
            long sentAt = System.currentTimeMillis();
            SendResult result = producer.send(msg);
            events.emit("sent", Events.concat(Events.sent(result, sentAt), "kind", "sync", "body", body, "index", i));
            bodies.add(body);
        }
        return bodies;
    }

    private void awaitAssigned(String name, DefaultMQPushConsumer consumer, int expected) throws Exception {
        clients.await(name + " to pull all " + expected + " queues of " + topic,
            () -> Clients.assigned(consumer, topic).size() == expected);
        events.emit("assigned", "consumer", name, "queues", Events.queues(Clients.assigned(consumer, topic)));
    }

    /** Prints "closing", then shuts the clients down (consumers commit their offsets and
     * unregister; a rebalance racing that may find a broker that no longer lists them). */
    private void close(Runnable... shutdowns) {
        events.emit("closing");
        for (Runnable shutdown : shutdowns) {
            shutdown.run();
        }
    }

    private static String body(MessageExt msg) {
        return new String(msg.getBody(), StandardCharsets.UTF_8);
    }
}
