package io.reconsume.bench;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.concurrent.CompletableFuture;
import java.util.concurrent.ConcurrentLinkedQueue;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.Semaphore;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicIntegerArray;
import java.util.concurrent.atomic.AtomicLong;
import java.util.concurrent.atomic.AtomicLongArray;
import java.util.concurrent.atomic.AtomicReference;
import org.apache.rocketmq.client.apis.ClientConfiguration;
import org.apache.rocketmq.client.apis.ClientException;
import org.apache.rocketmq.client.apis.ClientServiceProvider;
import org.apache.rocketmq.client.apis.consumer.ConsumeResult;
import org.apache.rocketmq.client.apis.consumer.FilterExpression;
import org.apache.rocketmq.client.apis.consumer.FilterExpressionType;
import org.apache.rocketmq.client.apis.consumer.PushConsumer;
import org.apache.rocketmq.client.apis.consumer.SimpleConsumer;
import org.apache.rocketmq.client.apis.message.Message;
import org.apache.rocketmq.client.apis.message.MessageView;
import org.apache.rocketmq.client.apis.producer.Producer;

/**
 * The load generator of bench/compare_client5.py: Apache RocketMQ's 5.x Java client
 * (rocketmq-client-java, gRPC) against one endpoint (reconsume's broker with --grpc-listen, or
 * Apache RocketMQ's proxy), the same way. Topics and groups exist beforehand (the Python side
 * creates them). Each command prints one JSON line on stdout and exits 0, or prints its error on
 * stderr and exits 1.
 *
 * <pre>
 * LoadGen5 version
 * LoadGen5 produce    --endpoint E --topic T --threads 8 --seconds 15 --warmup-seconds 3 --body 1024
 * LoadGen5 fill       --endpoint E --topic T --messages 100000 --body 1024 --in-flight 128
 * LoadGen5 consume    --endpoint E --topic T --group G --messages 100000 --mode simple|push
 *                     [--batch 32 --receivers 4 --invisible-ms 30000] [--threads 20]
 * LoadGen5 redelivery --endpoint E --topic T --group G --seconds 10 --rate 200 --warmup-seconds 2
 *                     --invisible-ms 2000 --receivers 4 --batch 32
 * </pre>
 *
 * Every client: plaintext gRPC ({@code enableSsl(false)}), request timeout
 * {@code --request-timeout-ms} (10000), one endpoint; a simple consumer long-polls
 * {@code --await-ms} (10000).
 */
public final class LoadGen5 {
    private static final String TAG = "bench";
    private static final String INDEX_PROPERTY = "BENCH_INDEX";
    private static final ClientServiceProvider PROVIDER = ClientServiceProvider.loadService();

    private LoadGen5() {
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: LoadGen5 version|produce|fill|consume|redelivery --endpoint E ...");
            System.exit(2);
        }
        Options options = Options.parse(args);
        Map<String, Object> result;
        try {
            switch (args[0]) {
                case "version":
                    result = version();
                    break;
                case "produce":
                    result = produce(options);
                    break;
                case "fill":
                    result = fillCommand(options);
                    break;
                case "consume":
                    result = consume(options);
                    break;
                case "redelivery":
                    result = redelivery(options);
                    break;
                default:
                    throw new IllegalArgumentException("unknown command " + args[0]);
            }
        } catch (Exception e) {
            e.printStackTrace();
            System.exit(1);
            return;
        }
        result.put("command", args[0]);
        System.out.println(Json.write(result));
        System.out.flush();
        System.exit(0);
    }

    // ------------------------------------------------------------------ clients

    private static ClientConfiguration configuration(Options options) {
        return ClientConfiguration.newBuilder()
            .setEndpoints(options.string("endpoint", null))
            .enableSsl(false)
            .setRequestTimeout(Duration.ofMillis(options.integer("request-timeout-ms", 10_000)))
            .build();
    }

    private static Producer producer(Options options, String topic) throws ClientException {
        return PROVIDER.newProducerBuilder()
            .setClientConfiguration(configuration(options))
            .setTopics(topic)
            .build();
    }

    private static SimpleConsumer simpleConsumer(Options options, String group, String topic)
        throws ClientException {
        return PROVIDER.newSimpleConsumerBuilder()
            .setClientConfiguration(configuration(options))
            .setConsumerGroup(group)
            .setAwaitDuration(Duration.ofMillis(options.integer("await-ms", 10_000)))
            .setSubscriptionExpressions(Map.of(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .build();
    }

    private static Message message(String topic, byte[] body) {
        return PROVIDER.newMessageBuilder().setTopic(topic).setTag(TAG).setBody(body).build();
    }

    private static byte[] body(int size) {
        byte[] body = new byte[size];
        new Random(42).nextBytes(body);
        return body;
    }

    private static double seconds(long fromNanos, long toNanos) {
        return (toNanos - fromNanos) / 1e9;
    }

    /** Closes {@code client}, waiting at most {@code seconds} (a simple consumer's close waits
     * for its receives still long-polling); the time it took. */
    private static double close(AutoCloseable client, int seconds) throws InterruptedException {
        long started = System.nanoTime();
        Thread closer = new Thread(() -> {
            try {
                client.close();
            } catch (Exception e) {
                // closing is best effort: the JVM exits next
            }
        }, "close");
        closer.setDaemon(true);
        closer.start();
        closer.join(TimeUnit.SECONDS.toMillis(seconds));
        return seconds(started, System.nanoTime());
    }

    // ------------------------------------------------------------------ commands

    private static Map<String, Object> version() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("java_version", System.getProperty("java.version"));
        out.put("java_vm", System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version"));
        return out;
    }

    /** Sync sends of one message at a time from {@code threads} threads sharing one producer:
     * every thread sends for the warm-up, then for the measured seconds (sends that start in
     * the window, and at least one per thread). */
    private static Map<String, Object> produce(Options options) throws Exception {
        String topic = options.string("topic", "BenchProduce");
        int threads = options.integer("threads", 1);
        byte[] body = body(options.integer("body", 1024));
        Producer producer = producer(options, topic);
        producer.send(message(topic, body)); // the route and the connection
        long measureFrom = System.nanoTime() + (long) (options.number("warmup-seconds", 2) * 1e9);
        long measureTo = measureFrom + (long) (options.number("seconds", 10) * 1e9);
        long giveUp = measureTo + TimeUnit.SECONDS.toNanos(60);
        LongList[] latencies = new LongList[threads];
        AtomicLong lastEnd = new AtomicLong(measureFrom);
        AtomicLong errors = new AtomicLong();
        AtomicLong sentTotal = new AtomicLong();
        AtomicReference<String> lastError = new AtomicReference<>("");
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < threads; t++) {
            LongList mine = new LongList();
            latencies[t] = mine;
            Thread worker = new Thread(() -> {
                long now;
                // Past the window only to complete this thread's first measured send.
                while ((now = System.nanoTime()) < measureTo || (mine.size == 0 && now < giveUp)) {
                    boolean ok = false;
                    try {
                        producer.send(message(topic, body));
                        ok = true;
                        sentTotal.incrementAndGet();
                    } catch (Exception e) {
                        errors.incrementAndGet();
                        lastError.set(e.toString());
                    }
                    long end = System.nanoTime();
                    if (now >= measureFrom && ok) {
                        mine.add((end - now) / 1000);
                        lastEnd.accumulateAndGet(end, Math::max);
                    }
                }
            }, "produce-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        producer.close();
        LongList all = new LongList();
        for (LongList list : latencies) {
            all.addAll(list);
        }
        long[] sorted = all.sorted();
        double elapsed = seconds(measureFrom, lastEnd.get());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("threads", threads);
        out.put("body_bytes", body.length);
        out.put("messages", sorted.length);
        out.put("seconds", elapsed);
        out.put("msgs_per_s", sorted.length / elapsed);
        out.put("latency_p50_ms", percentile(sorted, 0.50) / 1000.0);
        out.put("latency_p99_ms", percentile(sorted, 0.99) / 1000.0);
        out.put("sent_total", sentTotal.get());
        out.put("errors", errors.get());
        out.put("last_error", lastError.get());
        return out;
    }

    /** {@code messages} messages by async sends, at most {@code in-flight} unanswered; a failed
     * send is sent again (sync, up to 10 times) once the others are answered. */
    private static Map<String, Object> fillCommand(Options options) throws Exception {
        long started = System.nanoTime();
        String topic = options.string("topic", "BenchConsume");
        int messages = options.integer("messages", 100_000);
        byte[] body = body(options.integer("body", 1024));
        Semaphore window = new Semaphore(options.integer("in-flight", 128));
        ConcurrentLinkedQueue<Integer> failed = new ConcurrentLinkedQueue<>();
        Producer producer = producer(options, topic);
        for (int i = 0; i < messages; i++) {
            window.acquire();
            int index = i;
            producer.sendAsync(message(topic, body)).whenComplete((receipt, error) -> {
                if (error != null) {
                    failed.add(index);
                }
                window.release();
            });
        }
        window.acquire(options.integer("in-flight", 128));
        int resent = failed.size();
        for (Integer ignored : failed) {
            for (int attempt = 0; ; attempt++) {
                try {
                    producer.send(message(topic, body));
                    break;
                } catch (ClientException e) {
                    if (attempt >= 10) {
                        throw e;
                    }
                }
            }
        }
        producer.close();
        double elapsed = seconds(started, System.nanoTime());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("resent", resent);
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        return out;
    }

    private static Map<String, Object> consume(Options options) throws Exception {
        String mode = options.string("mode", "simple");
        switch (mode) {
            case "simple":
                return consumeSimple(options);
            case "push":
                return consumePush(options);
            default:
                throw new IllegalArgumentException("unknown --mode " + mode);
        }
    }

    /** A simple consumer (a new group) drains {@code messages} pre-filled messages:
     * {@code receivers} threads share it, each receiving batches of up to {@code batch} and
     * acking every message of a batch (async, all awaited) before its next receive; msg/s from
     * the first receipt to the last message acked. */
    private static Map<String, Object> consumeSimple(Options options) throws Exception {
        String topic = options.string("topic", "BenchConsume");
        String group = options.string("group", "bench-consume");
        int messages = options.integer("messages", 100_000);
        int batch = options.integer("batch", 32);
        Duration invisible = Duration.ofMillis(options.integer("invisible-ms", 30_000));
        int receivers = options.integer("receivers", 4);
        long started = System.nanoTime();
        SimpleConsumer consumer = simpleConsumer(options, group, topic);
        long built = System.nanoTime();
        AtomicLong received = new AtomicLong();
        AtomicLong acked = new AtomicLong();
        AtomicLong receives = new AtomicLong();
        AtomicLong emptyReceives = new AtomicLong();
        AtomicLong ackErrors = new AtomicLong();
        AtomicLong receiveErrors = new AtomicLong();
        AtomicReference<String> lastError = new AtomicReference<>("");
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch done = new CountDownLatch(1);
        for (int t = 0; t < receivers; t++) {
            Thread receiver = new Thread(() -> {
                while (!stop.get()) {
                    List<MessageView> views;
                    try {
                        views = consumer.receive(batch, invisible);
                    } catch (Exception e) {
                        receiveErrors.incrementAndGet();
                        lastError.set(e.toString());
                        pause(100);
                        continue;
                    }
                    receives.incrementAndGet();
                    if (views.isEmpty()) {
                        emptyReceives.incrementAndGet();
                        continue;
                    }
                    first.compareAndSet(0, System.nanoTime());
                    received.addAndGet(views.size());
                    List<CompletableFuture<Void>> acks = new ArrayList<>(views.size());
                    for (MessageView view : views) {
                        acks.add(consumer.ackAsync(view));
                    }
                    for (CompletableFuture<Void> ack : acks) {
                        try {
                            ack.join();
                            if (acked.incrementAndGet() == messages) {
                                last.set(System.nanoTime());
                                done.countDown();
                            }
                        } catch (Exception e) {
                            ackErrors.incrementAndGet();
                            lastError.set(e.toString());
                        }
                    }
                }
            }, "receive-" + t);
            receiver.setDaemon(true);
            receiver.start();
        }
        boolean finished = done.await(options.integer("timeout-seconds", 300), TimeUnit.SECONDS);
        stop.set(true);
        double closeSeconds = close(consumer, 3);
        if (!finished) {
            throw new IllegalStateException("acked " + acked.get() + " of " + messages + " (received "
                + received.get() + ", " + receiveErrors.get() + " receive errors, last: " + lastError.get() + ")");
        }
        double elapsed = seconds(first.get(), last.get());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", "simple");
        out.put("messages", messages);
        out.put("received", received.get());
        out.put("acked", acked.get());
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        out.put("batch", batch);
        out.put("receivers", receivers);
        out.put("receives", receives.get());
        out.put("empty_receives", emptyReceives.get());
        out.put("receive_errors", receiveErrors.get());
        out.put("ack_errors", ackErrors.get());
        out.put("last_error", lastError.get());
        out.put("start_seconds", seconds(started, built));
        out.put("start_to_first_s", seconds(started, first.get()));
        out.put("close_seconds", closeSeconds);
        return out;
    }

    /** A push consumer (a new group, default settings but {@code --threads} consumption threads,
     * 20 by default as the client's) drains {@code messages} pre-filled messages, its listener
     * answering SUCCESS; msg/s from the first listener call to the last. */
    private static Map<String, Object> consumePush(Options options) throws Exception {
        String topic = options.string("topic", "BenchConsume");
        String group = options.string("group", "bench-consume");
        int messages = options.integer("messages", 100_000);
        AtomicLong received = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        long started = System.nanoTime();
        PushConsumer consumer = PROVIDER.newPushConsumerBuilder()
            .setClientConfiguration(configuration(options))
            .setConsumerGroup(group)
            .setSubscriptionExpressions(Map.of(topic, new FilterExpression("*", FilterExpressionType.TAG)))
            .setConsumptionThreadCount(options.integer("threads", 20))
            .setMessageListener(view -> {
                long now = System.nanoTime();
                first.compareAndSet(0, now);
                if (received.incrementAndGet() == messages) {
                    last.set(now);
                    done.countDown();
                }
                return ConsumeResult.SUCCESS;
            })
            .build();
        long built = System.nanoTime();
        boolean finished = done.await(options.integer("timeout-seconds", 300), TimeUnit.SECONDS);
        double closeSeconds = close(consumer, 3);
        if (!finished) {
            throw new IllegalStateException("received " + received.get() + " of " + messages);
        }
        double elapsed = seconds(first.get(), last.get());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("mode", "push");
        out.put("messages", messages);
        out.put("received", received.get());
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        out.put("start_seconds", seconds(started, built));
        out.put("start_to_first_s", seconds(started, first.get()));
        out.put("close_seconds", closeSeconds);
        return out;
    }

    /**
     * Redelivery after the invisible duration: messages sent at {@code rate} msg/s for
     * {@code warmup-seconds + seconds}, each with its index as a property. A simple consumer's
     * {@code receivers} threads keep receives outstanding (each receives again as soon as its
     * batch is handled, so a long poll is always waiting) with invisible duration D
     * ({@code invisible-ms}). A message's first delivery is not acked; its second is, and its
     * lateness = second receipt - (first receipt + D), both the receiving thread's clock as the
     * receive returns. Messages sent in the warm-up seconds are summarized apart.
     */
    private static Map<String, Object> redelivery(Options options) throws Exception {
        String topic = options.string("topic", "BenchRedelivery");
        String group = options.string("group", "bench-redelivery");
        double rate = options.number("rate", 200);
        int warmupMessages = (int) Math.round(rate * options.number("warmup-seconds", 2));
        int messages = warmupMessages + (int) Math.round(rate * options.number("seconds", 10));
        int invisibleMs = options.integer("invisible-ms", 2000);
        Duration invisible = Duration.ofMillis(invisibleMs);
        int batch = options.integer("batch", 32);
        int receivers = options.integer("receivers", 4);
        byte[] body = body(options.integer("body", 1024));
        AtomicLongArray sentAt = new AtomicLongArray(messages);
        AtomicLongArray firstAt = new AtomicLongArray(messages);
        AtomicLongArray secondAt = new AtomicLongArray(messages);
        AtomicIntegerArray deliveries = new AtomicIntegerArray(messages);
        AtomicLong extraDeliveries = new AtomicLong();
        AtomicLong attemptMismatches = new AtomicLong();
        AtomicLong foreign = new AtomicLong();
        AtomicLong receives = new AtomicLong();
        AtomicLong receiveErrors = new AtomicLong();
        AtomicLong ackErrors = new AtomicLong();
        AtomicReference<String> lastError = new AtomicReference<>("");
        AtomicBoolean stop = new AtomicBoolean();
        CountDownLatch redelivered = new CountDownLatch(messages);
        SimpleConsumer consumer = simpleConsumer(options, group, topic);
        for (int t = 0; t < receivers; t++) {
            Thread receiver = new Thread(() -> {
                while (!stop.get()) {
                    List<MessageView> views;
                    try {
                        views = consumer.receive(batch, invisible);
                    } catch (Exception e) {
                        receiveErrors.incrementAndGet();
                        lastError.set(e.toString());
                        pause(100);
                        continue;
                    }
                    long now = System.nanoTime();
                    receives.incrementAndGet();
                    for (MessageView view : views) {
                        String property = view.getProperties().get(INDEX_PROPERTY);
                        int index = property == null ? -1 : Integer.parseInt(property);
                        if (index < 0 || index >= messages) {
                            foreign.incrementAndGet();
                            consumer.ackAsync(view);
                            continue;
                        }
                        int delivery = deliveries.incrementAndGet(index);
                        if (view.getDeliveryAttempt() != delivery) {
                            attemptMismatches.incrementAndGet();
                        }
                        if (delivery == 1) {
                            firstAt.set(index, now); // not acked: it comes back after D
                            continue;
                        }
                        if (delivery == 2) {
                            secondAt.set(index, now);
                            redelivered.countDown();
                        } else {
                            extraDeliveries.incrementAndGet();
                        }
                        consumer.ackAsync(view).whenComplete((ignored, error) -> {
                            if (error != null) {
                                ackErrors.incrementAndGet();
                                lastError.set(error.toString());
                            }
                        });
                    }
                }
            }, "receive-" + t);
            receiver.setDaemon(true);
            receiver.start();
        }
        Producer producer = producer(options, topic);
        AtomicLong sendErrors = new AtomicLong();
        long startNanos = System.nanoTime() + 500_000_000L; // the receivers' first long polls wait
        for (int i = 0; i < messages; i++) {
            long wait = startNanos + (long) (i / rate * 1e9) - System.nanoTime();
            if (wait > 0) {
                TimeUnit.NANOSECONDS.sleep(wait);
            }
            Message message = PROVIDER.newMessageBuilder().setTopic(topic).setTag(TAG).setBody(body)
                .addProperty(INDEX_PROPERTY, Integer.toString(i)).build();
            sentAt.set(i, System.nanoTime());
            try {
                producer.send(message);
            } catch (ClientException e) {
                sendErrors.incrementAndGet();
                lastError.set(e.toString());
                redelivered.countDown();
            }
        }
        double sendSeconds = seconds(startNanos, System.nanoTime());
        boolean finished = redelivered.await(invisibleMs / 1000 + 60, TimeUnit.SECONDS);
        stop.set(true);
        producer.close();
        double closeSeconds = close(consumer, 3);
        LongList warmLateness = new LongList();
        LongList lateness = new LongList();
        LongList firstDelivery = new LongList();
        int complete = 0;
        for (int i = 0; i < messages; i++) {
            long first = firstAt.get(i);
            long second = secondAt.get(i);
            if (first != 0) {
                firstDelivery.add((first - sentAt.get(i)) / 1000);
            }
            if (first == 0 || second == 0) {
                continue;
            }
            complete++;
            long late = (second - first) / 1000 - invisibleMs * 1000L;
            (i < warmupMessages ? warmLateness : lateness).add(late);
        }
        if (!finished) {
            throw new IllegalStateException("redelivered " + complete + " of " + messages + " ("
                + sendErrors.get() + " send errors, " + receiveErrors.get() + " receive errors, last: "
                + lastError.get() + ")");
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages - warmupMessages);
        out.put("warmup_messages", warmupMessages);
        out.put("rate_msgs_per_s", rate);
        out.put("invisible_ms", invisibleMs);
        out.put("receivers", receivers);
        out.put("batch", batch);
        out.put("send_seconds", sendSeconds);
        out.put("lateness_ms", summaryMs(lateness.sorted()));
        out.put("warmup_lateness_ms", summaryMs(warmLateness.sorted()));
        out.put("first_delivery_ms", summaryMs(firstDelivery.sorted()));
        out.put("extra_deliveries", extraDeliveries.get());
        out.put("attempt_mismatches", attemptMismatches.get());
        out.put("foreign", foreign.get());
        out.put("receives", receives.get());
        out.put("send_errors", sendErrors.get());
        out.put("receive_errors", receiveErrors.get());
        out.put("ack_errors", ackErrors.get());
        out.put("last_error", lastError.get());
        out.put("close_seconds", closeSeconds);
        return out;
    }

    private static void pause(long millis) {
        try {
            Thread.sleep(millis);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
    }

    // ------------------------------------------------------------------ helpers

    private static long percentile(long[] sorted, double fraction) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[Math.min(sorted.length - 1, (int) (sorted.length * fraction))];
    }

    /** count, min, p50, p99 and max of {@code sorted} microseconds, in milliseconds. */
    private static Map<String, Object> summaryMs(long[] sorted) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("count", sorted.length);
        if (sorted.length > 0) {
            out.put("min", sorted[0] / 1000.0);
            out.put("p50", percentile(sorted, 0.50) / 1000.0);
            out.put("p99", percentile(sorted, 0.99) / 1000.0);
            out.put("max", sorted[sorted.length - 1] / 1000.0);
        }
        return out;
    }

    /** A growable list of longs. */
    static final class LongList {
        private long[] values = new long[1024];
        private int size;

        void add(long value) {
            if (size == values.length) {
                values = Arrays.copyOf(values, size * 2);
            }
            values[size++] = value;
        }

        void addAll(LongList other) {
            for (int i = 0; i < other.size; i++) {
                add(other.values[i]);
            }
        }

        long[] sorted() {
            long[] copy = Arrays.copyOf(values, size);
            Arrays.sort(copy);
            return copy;
        }
    }

    /** {@code --name value} pairs after the command. */
    static final class Options {
        private final Map<String, String> values = new LinkedHashMap<>();

        static Options parse(String[] args) {
            Options options = new Options();
            for (int i = 1; i < args.length; i += 2) {
                if (!args[i].startsWith("--") || i + 1 >= args.length) {
                    throw new IllegalArgumentException("expected --name value, got " + args[i]);
                }
                options.values.put(args[i].substring(2), args[i + 1]);
            }
            return options;
        }

        String string(String name, String fallback) {
            String value = values.getOrDefault(name, fallback);
            if (value == null) {
                throw new IllegalArgumentException("--" + name + " is required");
            }
            return value;
        }

        int integer(String name, int fallback) {
            return values.containsKey(name) ? Integer.parseInt(values.get(name)) : fallback;
        }

        double number(String name, double fallback) {
            return values.containsKey(name) ? Double.parseDouble(values.get(name)) : fallback;
        }
    }

    /** Just enough JSON for the results: maps, lists, numbers, strings. */
    static final class Json {
        private Json() {
        }

        static String write(Object value) {
            StringBuilder out = new StringBuilder();
            write(out, value);
            return out.toString();
        }

        private static void write(StringBuilder out, Object value) {
            if (value == null) {
                out.append("null");
            } else if (value instanceof Map) {
                out.append('{');
                boolean first = true;
                for (Map.Entry<?, ?> entry : ((Map<?, ?>) value).entrySet()) {
                    if (!first) {
                        out.append(", ");
                    }
                    first = false;
                    write(out, entry.getKey().toString());
                    out.append(": ");
                    write(out, entry.getValue());
                }
                out.append('}');
            } else if (value instanceof List) {
                out.append('[');
                boolean first = true;
                for (Object item : (List<?>) value) {
                    if (!first) {
                        out.append(", ");
                    }
                    first = false;
                    write(out, item);
                }
                out.append(']');
            } else if (value instanceof Double) {
                double number = (Double) value;
                out.append(Double.isFinite(number) ? Double.toString(number) : "null");
            } else if (value instanceof Number || value instanceof Boolean) {
                out.append(value);
            } else {
                out.append('"');
                for (char c : value.toString().toCharArray()) {
                    if (c == '"' || c == '\\') {
                        out.append('\\').append(c);
                    } else if (c < 0x20) {
                        out.append(String.format("\\u%04x", (int) c));
                    } else {
                        out.append(c);
                    }
                }
                out.append('"');
            }
        }
    }
}
