package reconsume.compat;

import java.util.HashMap;
import java.util.HashSet;
import java.util.Map;
import java.util.Set;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.exception.MQBrokerException;
import org.apache.rocketmq.client.impl.FindBrokerResult;
import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.client.impl.consumer.ProcessQueue;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.common.protocol.header.QueryConsumerOffsetRequestHeader;
import org.apache.rocketmq.remoting.RPCHook;
import org.apache.rocketmq.remoting.protocol.RemotingCommand;

/**
 * Builds the RocketMQ clients of a scenario, all with the same test timings, and waits for
 * conditions until the driver's deadline. Every client has an RPC hook that prints each request
 * it makes or receives ("request": client, code, address) and, where the client waits for one
 * (not for one-way and asynchronous requests, pulls among them), the answer ("response": client,
 * code, answer's code and remark). With {@code --access-key} and {@code --secret-key} the hook
 * first signs each request as RocketMQ's ACL clients do ({@link AclClientRPCHook}).
 */
final class Clients {
    /** Thrown when a condition is not reached by the deadline; its message says which. */
    static final class Deadline extends Exception {
        private static final long serialVersionUID = 1L;

        Deadline(String what) {
            super(what);
        }
    }

    private final Map<String, String> options;
    private final long deadline;
    private final Events events;
    private final String namesrv;
    private final String suffix = "-" + ProcessHandle.current().pid();
    private final RPCHook signer;

    Clients(Map<String, String> options, long deadline, Events events) {
        this.options = options;
        this.deadline = deadline;
        this.namesrv = option("namesrv");
        this.events = events;
        String accessKey = options.get("access-key");
        String secretKey = options.get("secret-key");
        this.signer = accessKey == null || secretKey == null
            ? null
            : new AclClientRPCHook(new SessionCredentials(accessKey, secretKey));
    }

    /** Prints each request the client named {@code client} makes or receives, and each answer
     * it waits for. */
    private RPCHook hook(String client) {
        return new RPCHook() {
            @Override
            public void doBeforeRequest(String remoteAddr, RemotingCommand request) {
                if (signer != null) {
                    signer.doBeforeRequest(remoteAddr, request);
                }
                events.emit("request", "client", client, "code", request.getCode(), "remote", remoteAddr);
            }

            @Override
            public void doAfterResponse(String remoteAddr, RemotingCommand request, RemotingCommand response) {
                events.emit("response", "client", client, "code", request.getCode(), "remote", remoteAddr,
                    "responseCode", response == null ? null : response.getCode(),
                    "remark", response == null ? null : response.getRemark());
            }
        };
    }

    String option(String name) {
        String value = options.get(name);
        if (value == null) {
            throw new IllegalArgumentException("missing option --" + name + "=...");
        }
        return value;
    }

    String option(String name, String fallback) {
        return options.getOrDefault(name, fallback);
    }

    int number(String name, int fallback) {
        return Integer.parseInt(option(name, String.valueOf(fallback)));
    }

    /** A started producer of its own client instance. */
    DefaultMQProducer producer(String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group, hook("producer"));
        producer.setNamesrvAddr(namesrv);
        producer.setInstanceName("producer" + suffix);
        producer.start();
        return producer;
    }

    /**
     * A push consumer (not started) subscribed to all of {@code topic}, reading a new group's
     * queues from their first message. Test timings, each 1 s: the name server is asked for
     * routes (so the group's retry topic is found soon after the brokers create it), offsets are
     * committed, and heartbeats are sent. The last matters: a rebalance gives the topic's
     * subscription a new version, which reaches the brokers only in a heartbeat, and the client
     * skips the heartbeat it sends then if another one is in flight; until the next one, a
     * broker that has the older version refuses the pulls of that topic with
     * SUBSCRIPTION_NOT_LATEST (as RocketMQ's broker does). Shutting down waits up to 5 s for
     * listeners (and the send-backs after them) to finish.
     */
    DefaultMQPushConsumer consumer(String group, String instance, String topic) throws Exception {
        DefaultMQPushConsumer consumer =
            new DefaultMQPushConsumer(group, hook(instance), new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(namesrv);
        consumer.setInstanceName(instance + suffix);
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.setPollNameServerInterval(1000);
        consumer.setPersistConsumerOffsetInterval(1000);
        consumer.setHeartbeatBrokerInterval(1000);
        consumer.setAwaitTerminationMillisWhenShutdown(5000);
        consumer.subscribe(topic, "*");
        return consumer;
    }

    /** A condition to wait for. */
    interface Check {
        boolean holds() throws Exception;
    }

    /** Polls {@code condition} every 20 ms until it holds; past the deadline, throws. */
    void await(String what, Check condition) throws Exception {
        await(what, 20, condition);
    }

    void await(String what, long intervalMs, Check condition) throws Exception {
        while (!condition.holds()) {
            if (System.currentTimeMillis() > deadline) {
                throw new Deadline("timed out waiting for " + what);
            }
            Thread.sleep(intervalMs);
        }
    }

    /** The queues of {@code topic} the consumer pulls now (its rebalance's current share). */
    static Set<MessageQueue> assigned(DefaultMQPushConsumer consumer, String topic) {
        Set<MessageQueue> queues = new HashSet<>();
        Map<MessageQueue, ProcessQueue> table =
            consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable();
        for (Map.Entry<MessageQueue, ProcessQueue> entry : new HashMap<>(table).entrySet()) {
            if (entry.getKey().getTopic().equals(topic) && !entry.getValue().isDropped()) {
                queues.add(entry.getKey());
            }
        }
        return queues;
    }

    /**
     * The group's offset of {@code mq} as the broker has it (QUERY_CONSUMER_OFFSET through the
     * consumer's own connection; the consumer's local offsets are left alone), or -1 if none.
     */
    static long committedOffset(DefaultMQPushConsumer consumer, MessageQueue mq) throws Exception {
        MQClientInstance client = consumer.getDefaultMQPushConsumerImpl().getmQClientFactory();
        FindBrokerResult broker = client.findBrokerAddressInSubscribe(mq.getBrokerName(), MixAll.MASTER_ID, true);
        QueryConsumerOffsetRequestHeader header = new QueryConsumerOffsetRequestHeader();
        header.setConsumerGroup(consumer.getConsumerGroup());
        header.setTopic(mq.getTopic());
        header.setQueueId(mq.getQueueId());
        try {
            return client.getMQClientAPIImpl().queryConsumerOffset(broker.getBrokerAddr(), header, 3000);
        } catch (MQBrokerException notFound) {
            return -1;
        }
    }
}
