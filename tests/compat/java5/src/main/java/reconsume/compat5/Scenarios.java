package reconsume.compat5;

import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Set;
import java.util.TreeMap;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.MessageBuilder;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;
import org.apache.rocketmq.client.apis.producer.SendReceipt;

/**
 * The scenarios, one per subcommand. Each starts its client, prints what it sends and receives,
 * returns a summary once everything it expects has happened and its client is closed, and throws
 * {@link Clients.Deadline} naming what is still missing at the deadline.
 *
 * <p>Message {@code i} of a run has the body "PREFIX i", the tag {@code --tag} (default
 * "compat"), the keys "PREFIX-i" and "PREFIX", and the user properties "index" (i) and
 * "driver" ("java5"); FIFO messages also "seq", their place in their message group. Consumers
 * count only messages whose body starts with the prefix (others are acked and printed with
 * "expected": false).
 */
final class Scenarios {
    private static final String DRIVER = "java5";

    private final Clients clients;
    private final Events events;
    private final String topic;
    private final String tag;
    private final String prefix;
    private final int count;

    Scenarios(Clients clients, Events events) {
        this.clients = clients;
        this.events = events;
        this.topic = clients.option("topic");
        this.tag = clients.option("tag", "compat");
        this.prefix = clients.option("prefix", "message");
        this.count = clients.number("count", 10);
    }

    Map<String, Object> run(String scenario) throws Exception {
        return switch (scenario) {
            case "send" -> send("normal");
            case "send-fifo" -> send("fifo");
            case "send-delay" -> send("delay");
            case "simple-consume" -> simpleConsume();
            case "push-consume" -> pushConsume(false);
            case "fifo-consume" -> pushConsume(true);
            default -> throw new IllegalArgumentException("unknown scenario " + scenario
                + " (send, send-fifo, send-delay, simple-consume, push-consume, fifo-consume)");
        };
    }

    // ------------------------------------------------------------------ producers

    /**
     * {@code --count} messages, one at a time. "fifo": message i in the message group
     * "PREFIX-g(i mod K)" ({@code --message-groups} K, default 2), so the groups interleave.
     * "delay": each with a delivery timestamp {@code --delay-ms} (default 3000) after it is sent.
     * {@code --pause-ms} (default 0) between sends; with {@code --keep-going}, a send that fails
     * (the client's own attempts spent) prints "sendFailed" and is tried again after the pause,
     * until it is acknowledged or the deadline passes, as through a broker's failover.
     */
    private Map<String, Object> send(String kind) throws Exception {
        int groups = clients.number("message-groups", 2);
        long delayMs = clients.millis("delay-ms", 3000);
        long pauseMs = clients.millis("pause-ms", 0);
        boolean keepGoing = clients.flag("keep-going");
        Producer producer = clients.producer(topic);
        events.emit("started", "client", "producer", "kind", kind, "topic", topic,
            "clientId", Events.clientId(producer));
        long first = System.currentTimeMillis();
        for (int i = 0; i < count; i++) {
            String body = prefix + " " + i;
            List<String> keys = List.of(prefix, prefix + "-" + i);
            Map<String, String> properties = new TreeMap<>();
            properties.put("index", String.valueOf(i));
            properties.put("driver", DRIVER);
            MessageBuilder builder = clients.provider.newMessageBuilder()
                .setTopic(topic)
                .setTag(tag)
                .setKeys(keys.toArray(new String[0]))
                .setBody(body.getBytes(StandardCharsets.UTF_8));
            String messageGroup = null;
            Long deliverAt = null;
            if (kind.equals("fifo")) {
                messageGroup = prefix + "-g" + (i % groups);
                properties.put("seq", String.valueOf(i / groups));
                builder.setMessageGroup(messageGroup);
            }
            long sentAt = System.currentTimeMillis();
            if (kind.equals("delay")) {
                deliverAt = sentAt + delayMs;
                builder.setDeliveryTimestamp(deliverAt);
            }
            for (Map.Entry<String, String> property : properties.entrySet()) {
                builder.addProperty(property.getKey(), property.getValue());
            }
            SendReceipt receipt;
            while (true) {
                try {
                    receipt = producer.send(builder.build());
                    break;
                } catch (Exception failure) {
                    if (!keepGoing) {
                        throw failure;
                    }
                    events.emit("sendFailed", "body", body, "sentAt", sentAt,
                        "failedAt", System.currentTimeMillis(), "error", failure.toString());
                    clients.checkDeadline("a send of " + body);
                    Thread.sleep(Math.max(pauseMs, 10));
                    sentAt = System.currentTimeMillis();
                }
            }
            events.emit("sent", Events.concat(Events.sent(receipt, sentAt),
                "kind", kind, "topic", topic, "tag", tag, "keys", keys, "properties", properties,
                "body", body, "messageGroup", messageGroup, "deliveryTimestamp", deliverAt));
            if (pauseMs > 0) {
                Thread.sleep(pauseMs);
            }
        }
        long elapsed = System.currentTimeMillis() - first;
        producer.close();
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("sent", count);
        summary.put("elapsedMs", elapsed);
        return summary;
    }

    // ------------------------------------------------------------------ consumers

    private boolean expected(MessageView view) {
        return Events.text(view.getBody()).startsWith(prefix + " ");
    }

    /**
     * A simple consumer receiving batches of up to {@code --max-messages} (default 16) with the
     * invisible duration {@code --invisible-ms} (default 15000; RocketMQ's proxy refuses less
     * than 10 s) until {@code --count} distinct messages are acked. A message's deliveries go
     * through these steps, then it is acked: with {@code --fail-first}, the first is left
     * unacked (it comes back once invisible time is over); with {@code --change-invisible-ms
     * D}, the next calls changeInvisibleDuration(D) and leaves it unacked (it comes back D
     * later).
     */
    private Map<String, Object> simpleConsume() throws Exception {
        String group = clients.option("group");
        int maxMessages = clients.number("max-messages", 16);
        long invisibleMs = clients.millis("invisible-ms", 15000);
        long changeMs = clients.millis("change-invisible-ms", 0);
        List<String> steps = new ArrayList<>();
        if (clients.flag("fail-first")) {
            steps.add("skip");
        }
        if (changeMs > 0) {
            steps.add("change");
        }
        Map<String, Integer> deliveries = new LinkedHashMap<>();
        Map<String, Long> lastDelivery = new LinkedHashMap<>();
        Map<String, Long> lastAsked = new LinkedHashMap<>();
        Set<String> acked = ConcurrentHashMap.newKeySet();
        int receives = 0;
        int total = 0;
        SimpleConsumer consumer = clients.simpleConsumer(group, topic);
        events.emit("started", "client", "simple-consumer", "group", group, "topic", topic,
            "invisibleMs", invisibleMs, "maxMessages", maxMessages, "clientId", Events.clientId(consumer));
        while (acked.size() < count) {
            clients.checkDeadline(count + " messages acked, " + acked.size() + " so far");
            long asked = System.currentTimeMillis();
            List<MessageView> views = consumer.receive(maxMessages, Duration.ofMillis(invisibleMs));
            long now = System.currentTimeMillis();
            receives++;
            events.emit("receive", "messages", views.size(), "askedAt", asked, "answeredAt", now);
            for (MessageView view : views) {
                String id = view.getMessageId().toString();
                int delivery = deliveries.merge(id, 1, Integer::sum);
                Long previous = lastDelivery.put(id, now);
                Long previousAsked = lastAsked.put(id, asked);
                total++;
                boolean wanted = expected(view);
                String step = !wanted || delivery > steps.size() ? "ack" : steps.get(delivery - 1);
                events.emit("received", Events.concat(Events.received("simple", view, now),
                    "delivery", delivery, "sinceLastDeliveryMs", previous == null ? null : now - previous,
                    "sinceLastAskedMs", previousAsked == null ? null : now - previousAsked,
                    "expected", wanted, "action", step));
                switch (step) {
                    case "skip" -> events.emit("notAcked", "messageId", id, "body", Events.text(view.getBody()),
                        "visibleAgainAt", now + invisibleMs);
                    case "change" -> {
                        consumer.changeInvisibleDuration(view, Duration.ofMillis(changeMs));
                        long changedAt = System.currentTimeMillis();
                        events.emit("invisibleChanged", "messageId", id, "body", Events.text(view.getBody()),
                            "invisibleMs", changeMs, "changedAt", changedAt, "visibleAgainAt", changedAt + changeMs);
                    }
                    default -> {
                        consumer.ack(view);
                        events.emit("acked", "messageId", id, "body", Events.text(view.getBody()),
                            "ackedAt", System.currentTimeMillis(), "expected", wanted);
                        if (wanted) {
                            acked.add(id);
                        }
                    }
                }
            }
        }
        consumer.close();
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("acked", acked.size());
        summary.put("deliveries", total);
        summary.put("receives", receives);
        return summary;
    }

    /**
     * A push consumer whose listener answers FAILURE to the first {@code --fail-times}
     * (default 0) deliveries of each message and SUCCESS after, until {@code --count} distinct
     * messages succeeded. "fifo" (fifo-consume, on a group with consumeMessageOrderly) also
     * prints each message group's order ("order" events: the "seq" of each success).
     */
    private Map<String, Object> pushConsume(boolean fifo) throws Exception {
        String group = clients.option("group");
        int failTimes = clients.number("fail-times", 0);
        Map<String, Integer> deliveries = new ConcurrentHashMap<>();
        Map<String, Long> lastDelivery = new ConcurrentHashMap<>();
        Set<String> succeeded = ConcurrentHashMap.newKeySet();
        Map<String, List<Integer>> order = new ConcurrentHashMap<>();
        int[] total = new int[1];
        PushConsumer consumer = clients.pushConsumer(group, topic, view -> {
            long now = System.currentTimeMillis();
            String id = view.getMessageId().toString();
            int delivery = deliveries.merge(id, 1, Integer::sum);
            Long previous = lastDelivery.put(id, now);
            boolean wanted = expected(view);
            ConsumeResult result = wanted && delivery <= failTimes ? ConsumeResult.FAILURE : ConsumeResult.SUCCESS;
            synchronized (total) {
                total[0]++;
            }
            events.emit("received", Events.concat(Events.received(fifo ? "fifo" : "push", view, now),
                "delivery", delivery, "sinceLastDeliveryMs", previous == null ? null : now - previous,
                "expected", wanted, "result", result.name()));
            if (result == ConsumeResult.SUCCESS && wanted && succeeded.add(id)) {
                String seq = view.getProperties().get("seq");
                String messageGroup = view.getMessageGroup().orElse("");
                if (seq != null) {
                    List<Integer> seqs = order.computeIfAbsent(messageGroup, g -> new ArrayList<>());
                    synchronized (seqs) {
                        seqs.add(Integer.parseInt(seq));
                    }
                }
            }
            return result;
        });
        events.emit("started", "client", fifo ? "fifo-push-consumer" : "push-consumer", "group", group,
            "topic", topic, "failTimes", failTimes, "clientId", Events.clientId(consumer));
        clients.await(count + " messages consumed", () -> succeeded.size() >= count);
        consumer.close();
        boolean inOrder = true;
        for (Map.Entry<String, List<Integer>> entry : new TreeMap<>(order).entrySet()) {
            List<Integer> seqs = entry.getValue();
            boolean sorted = true;
            for (int i = 1; i < seqs.size(); i++) {
                sorted &= seqs.get(i - 1) < seqs.get(i);
            }
            inOrder &= sorted;
            events.emit("order", "messageGroup", entry.getKey(), "seqs", seqs, "inOrder", sorted);
        }
        Map<String, Object> summary = new LinkedHashMap<>();
        summary.put("consumed", succeeded.size());
        summary.put("deliveries", total[0]);
        if (fifo) {
            summary.put("inOrder", inOrder);
        }
        return summary;
    }
}
