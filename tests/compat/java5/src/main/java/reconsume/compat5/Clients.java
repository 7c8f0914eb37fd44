package reconsume.compat5;

import java.time.Duration;
import java.util.Map;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientConfigurationBuilder;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.StaticSessionCredentialsProvider;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.MessageListener;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * Builds the RocketMQ 5 clients of a scenario, all on one gRPC endpoint with the same settings,
 * and waits for conditions until the driver's deadline. Options: {@code --endpoints} (host:port,
 * several separated by ';'), {@code --tls} (default false: plaintext, which RocketMQ's proxy
 * also accepts), {@code --request-timeout-ms} (default 3000), {@code --namespace}, and
 * {@code --access-key} with {@code --secret-key} (the client then signs its requests).
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
    final ClientServiceProvider provider = ClientServiceProvider.loadService();

    Clients(Map<String, String> options, long deadline) {
        this.options = options;
        this.deadline = deadline;
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

    long millis(String name, long fallback) {
        return Long.parseLong(option(name, String.valueOf(fallback)));
    }

    boolean flag(String name) {
        return Boolean.parseBoolean(option(name, "false"));
    }

    long deadline() {
        return deadline;
    }

    ClientConfiguration configuration() {
        ClientConfigurationBuilder builder = ClientConfiguration.newBuilder()
            .setEndpoints(option("endpoints"))
            .enableSsl(flag("tls"))
            .setRequestTimeout(Duration.ofMillis(millis("request-timeout-ms", 3000)));
        String namespace = options.get("namespace");
        if (namespace != null) {
            builder.setNamespace(namespace);
        }
        String accessKey = options.get("access-key");
        String secretKey = options.get("secret-key");
        if (accessKey != null && secretKey != null) {
            builder.setCredentialProvider(new StaticSessionCredentialsProvider(accessKey, secretKey));
        }
        return builder.build();
    }

    Producer producer(String topic) throws ClientException {
        return provider.newProducerBuilder()
            .setClientConfiguration(configuration())
            .setTopics(topic)
            .build();
    }

    /** A simple consumer of {@code group} subscribed to {@code topic} (tag expression
     * {@code --filter}, default "*"), long polling {@code --await-ms} (default 5000, the
     * proxy's least). */
    SimpleConsumer simpleConsumer(String group, String topic) throws ClientException {
        return provider.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration())
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofMillis(millis("await-ms", 5000)))
            .setSubscriptionExpressions(Map.of(topic, filter()))
            .build();
    }

    /** A started push consumer of {@code group} subscribed to {@code topic}, with
     * {@code --threads} consumption threads (default 4). */
    PushConsumer pushConsumer(String group, String topic, MessageListener listener) throws ClientException {
        return provider.newPushConsumerBuilder()
            .setClientConfiguration(configuration())
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Map.of(topic, filter()))
            .setConsumptionThreadCount(number("threads", 4))
            .setMessageListener(listener)
            .build();
    }

    private FilterExpression filter() {
        return new FilterExpression(option("filter", "*"), FilterExpressionType.TAG);
    }

    /** A condition to wait for. */
    interface Check {
        boolean holds() throws Exception;
    }

    /** Polls {@code condition} every 20 ms until it holds; past the deadline, throws. */
    void await(String what, Check condition) throws Exception {
        while (!condition.holds()) {
            if (System.currentTimeMillis() > deadline) {
                throw new Deadline("timed out waiting for " + what);
            }
            Thread.sleep(20);
        }
    }

    void checkDeadline(String what) throws Deadline {
        if (System.currentTimeMillis() > deadline) {
            throw new Deadline("timed out waiting for " + what);
        }
    }
}
