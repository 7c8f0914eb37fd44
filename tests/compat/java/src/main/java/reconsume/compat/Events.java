package reconsume.compat;

import java.io.PrintStream;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.Collection;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.TreeMap;
import java.util.TreeSet;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.common.message.MessageClientExt;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.message.MessageQueue;

/** One JSON object per line on stdout, each with an "event" name; the only thing printed there. */
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

    static Map<String, Object> queue(MessageQueue mq) {
        Map<String, Object> queue = new LinkedHashMap<>();
        queue.put("brokerName", mq.getBrokerName());
        queue.put("queueId", mq.getQueueId());
        queue.put("topic", mq.getTopic());
        return queue;
    }

    static List<Map<String, Object>> queues(Collection<MessageQueue> mqs) {
        List<Map<String, Object>> list = new ArrayList<>();
        for (MessageQueue mq : new TreeSet<>(mqs)) {
            list.add(queue(mq));
        }
        return list;
    }

    /** What a listener was handed: the message and the queue it was pulled from. */
    static Object[] received(String consumer, MessageExt msg, MessageQueue from) {
        String offsetMsgId = msg instanceof MessageClientExt ? ((MessageClientExt) msg).getOffsetMsgId() : msg.getMsgId();
        return new Object[] {
            "consumer", consumer,
            "body", new String(msg.getBody(), StandardCharsets.UTF_8),
            "msgId", msg.getMsgId(),
            "offsetMsgId", offsetMsgId,
            "topic", msg.getTopic(),
            "tags", msg.getTags(),
            "keys", msg.getKeys(),
            "queueTopic", from.getTopic(),
            "brokerName", from.getBrokerName(),
            "queueId", msg.getQueueId(),
            "queueOffset", msg.getQueueOffset(),
            "reconsumeTimes", msg.getReconsumeTimes(),
            "sysFlag", msg.getSysFlag(),
            "properties", new TreeMap<>(msg.getProperties()),
            "bornTimestamp", msg.getBornTimestamp(),
            "storeTimestamp", msg.getStoreTimestamp(),
            "receivedAt", System.currentTimeMillis(),
        };
    }

    static Object[] sent(SendResult result, long sentAt) {
        MessageQueue mq = result.getMessageQueue();
        return new Object[] {
            "status", result.getSendStatus().name(),
            "msgId", result.getMsgId(),
            "offsetMsgId", result.getOffsetMsgId(),
            "brokerName", mq.getBrokerName(),
            "queueId", mq.getQueueId(),
            "queueOffset", result.getQueueOffset(),
            "sentAt", sentAt,
            "ackedAt", System.currentTimeMillis(),
        };
    }

    static Object[] concat(Object[] first, Object... more) {
        Object[] all = new Object[first.length + more.length];
        System.arraycopy(first, 0, all, 0, first.length);
        System.arraycopy(more, 0, all, first.length, more.length);
        return all;
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
