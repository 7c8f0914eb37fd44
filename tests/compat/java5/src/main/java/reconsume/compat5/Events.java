package reconsume.compat5;

import java.io.PrintStream;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.SendReceipt;
import org.apache.rocketmq.client.java.impl.ClientImpl;
import org.apache.rocketmq.client.java.impl.producer.SendReceiptImpl;
import org.apache.rocketmq.client.java.message.MessageViewImpl;
import org.apache.rocketmq.client.java.route.MessageQueueImpl;

/**
 * One JSON object per line on stdout, each with an "event" name; the only thing printed there.
 * The Python driver ({@code tests/compat/python5_driver.py}) prints the same events with the
 * same keys.
 */
final class Events {
    private final PrintStream out;

    Events(PrintStream out) {
        this.out = out;
    }

    /** Prints {"event": name, key: value, ...}; pairs alternate keys and values. */
    void emit(String name, Object... pairs) {
        Map<String, Object> event = new LinkedHashMap<>();
        event.put("event", name);
        for (int i = 0; i + 1 < pairs.length; i += 2) {
            event.put((String) pairs[i], pairs[i + 1]);
        }
        String line = json(event);
        synchronized (out) {
            out.println(line);
            out.flush();
        }
    }

    /**
     * What a consumer was handed: the message, its delivery attempt and when it arrived. The
     * offset is the message's own (a redelivered message's is in the group's retry topic); the
     * queue a receive asked is left out, since RocketMQ's proxy pops from all of a broker's
     * queues whichever one is asked.
     */
    static Object[] received(String consumer, MessageView view, long receivedAt) {
        Long queueOffset = view instanceof MessageViewImpl impl ? impl.getOffset() : null;
        return new Object[] {
            "consumer", consumer,
            "messageId", view.getMessageId().toString(),
            "topic", view.getTopic(),
            "tag", view.getTag().orElse(null),
            "keys", new ArrayList<>(new TreeSet<>(view.getKeys())),
            "properties", new TreeMap<>(view.getProperties()),
            "body", text(view.getBody()),
            "messageGroup", view.getMessageGroup().orElse(null),
            "deliveryTimestamp", view.getDeliveryTimestamp().orElse(null),
            "bornTimestamp", view.getBornTimestamp(),
            "bornHost", view.getBornHost(),
            "deliveryAttempt", view.getDeliveryAttempt(),
            "queueOffset", queueOffset,
            "receivedAt", receivedAt,
        };
    }

    /** A send's receipt: the message id, and the queue and offset where the client has them. */
    static Object[] sent(SendReceipt receipt, long sentAt) {
        String brokerName = null;
        Integer queueId = null;
        Long queueOffset = null;
        if (receipt instanceof SendReceiptImpl impl) {
            MessageQueueImpl mq = impl.getMessageQueue();
            brokerName = mq.getBroker().getName();
            queueId = mq.getQueueId();
            queueOffset = impl.getOffset();
        }
        return new Object[] {
            "messageId", receipt.getMessageId().toString(),
            "brokerName", brokerName,
            "queueId", queueId,
            "queueOffset", queueOffset,
            "sentAt", sentAt,
            "ackedAt", System.currentTimeMillis(),
        };
    }

    /** The client's id (its x-mq-client-id header), or null. */
    static String clientId(Object client) {
        return client instanceof ClientImpl impl ? impl.getClientId().toString() : null;
    }

    static Object[] concat(Object[] first, Object... more) {
        Object[] all = new Object[first.length + more.length];
        System.arraycopy(first, 0, all, 0, first.length);
        System.arraycopy(more, 0, all, first.length, more.length);
        return all;
    }

    static String text(ByteBuffer body) {
        ByteBuffer copy = body.duplicate();
        byte[] bytes = new byte[copy.remaining()];
        copy.get(bytes);
        return new String(bytes, StandardCharsets.UTF_8);
    }

    static String json(Object value) {
        StringBuilder text = new StringBuilder();
        write(text, value);
        return text.toString();
    }

    private static void write(StringBuilder text, Object value) {
        if (value == null) {
            text.append("null");
        } else if (value instanceof String) {
            string(text, (String) value);
        } else if (value instanceof Number || value instanceof Boolean) {
            text.append(value);
        } else if (value instanceof Map) {
            text.append('{');
            boolean first = true;
            for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                text.append(first ? "" : ",");
                first = false;
                string(text, String.valueOf(entry.getKey()));
                text.append(':');
                write(text, entry.getValue());
            }
            text.append('}');
        } else if (value instanceof Collection) {
            text.append('[');
            boolean first = true;
            for (Object item : (Collection<?>) value) {
                text.append(first ? "" : ",");
                first = false;
                write(text, item);
            }
            text.append(']');
        } else {
            string(text, value.toString());
        }
    }

    private static void string(StringBuilder text, String value) {
        text.append('"');
        for (int i = 0; i < value.length(); i++) {
            char c = value.charAt(i);
            switch (c) {
                case '"' -> text.append("\\\"");
                case '\\' -> text.append("\\\\");
                case '\n' -> text.append("\\n");
                case '\r' -> text.append("\\r");
                case '\t' -> text.append("\\t");
                default -> {
                    if (c < 0x20) {
                        text.append(String.format("\\u%04x", (int) c));
                    } else {
                        text.append(c);
                    }
                }
            }
        }
        text.append('"');
    }
}
