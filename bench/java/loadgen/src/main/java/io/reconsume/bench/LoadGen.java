package io.reconsume.bench;

import java.util.ArrayList;
import java.util.LinkedHashMap;
import java.util.List;
import java.util.Map;
import java.util.Random;
import java.util.Set;
import java.util.concurrent.ConcurrentHashMap;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;
import java.util.concurrent.atomic.AtomicLong;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.consumer.DefaultMQPushConsumer;
import org.apache.rocketmq.client.consumer.listener.ConsumeConcurrentlyStatus;
import org.apache.rocketmq.client.consumer.listener.MessageListenerConcurrently;
import org.apache.rocketmq.client.consumer.rebalance.AllocateMessageQueueAveragely;
import org.apache.rocketmq.client.impl.MQClientAPIImpl;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.common.MQVersion;
import org.apache.rocketmq.common.MixAll;
import org.apache.rocketmq.common.TopicConfig;
import org.apache.rocketmq.common.consumer.ConsumeFromWhere;
import org.apache.rocketmq.common.constant.PermName;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageExt;
import org.apache.rocketmq.common.protocol.body.ClusterInfo;
import org.apache.rocketmq.common.protocol.route.BrokerData;
import org.apache.rocketmq.common.protocol.route.QueueData;
import org.apache.rocketmq.common.protocol.route.TopicRouteData;
import org.apache.rocketmq.remoting.RPCHook;

/**
 * The load generator of bench/compare_rocketmq.py: Apache RocketMQ's 4.9.8 client against one
 * name server and one broker (reconsume or Apache RocketMQ, the same way). Each command prints
 * one JSON line on stdout and exits 0, or prints its error on stderr and exits 1.
 *
 * <pre>
 * LoadGen version
 * LoadGen setup    --namesrv A --topics T1,T2 --queues 8 --retry-groups G   wait for the broker,
 *                  create the topics and the groups' retry topics (1 queue); with --replicas N
 *                  first wait until the broker name lists N brokers (master and slaves), with
 *                  --probe-topic T last send to T until a send is answered SEND_OK (a sync master
 *                  answers so once its slave is in sync)
 * LoadGen produce  --namesrv A --topic T --threads 8 --seconds 15 --warmup-seconds 2 --body 1024
 * LoadGen fill     --namesrv A --topic T --messages 200000 --body 1024
 * LoadGen consume  --namesrv A --topic T --messages 200000 --group G
 * LoadGen retry    --namesrv A --topic T --messages 20000 --group G
 * LoadGen lateness --namesrv A --topic T --group G --seconds 10 --rate 500
 *                  --levels "1s 2s 1s 3s 4s 5s" --max-level 6 --timer-min-ms 1000 --timer-max-ms 5000
 * </pre>
 *
 * With {@code --access-key K --secret-key S} every producer and consumer of the command signs
 * its requests (Apache RocketMQ's ACL 1.0 signature, {@code AclClientRPCHook}); without them
 * nothing is signed.
 *
 * Producers and consumers talk to the broker's one listening port (no VIP channel).
 */
public final class LoadGen {
    private static final String TAG = "bench";
    private static final String DUE_PROPERTY = "BENCH_DUE_MS";
    private static final String PATH_PROPERTY = "BENCH_PATH";
    private static final String TIMER_DELIVER_MS = "TIMER_DELIVER_MS";

    private LoadGen() {
    }

    public static void main(String[] args) {
        if (args.length == 0) {
            System.err.println("usage: LoadGen version|setup|produce|fill|consume|retry|lateness --namesrv A ...");
            System.exit(2);
        }
        Options options = Options.parse(args);
        Map<String, Object> result;
        try {
            switch (args[0]) {
                case "version":
                    result = version();
                    break;
                case "setup":
                    result = setup(options);
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
                case "retry":
                    result = retry(options);
                    break;
                case "lateness":
                    result = lateness(options);
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

    /** The signing hook of {@code --access-key}/{@code --secret-key}, or null (unsigned). */
    private static RPCHook rpcHook(Options options) {
        String accessKey = options.string("access-key", "");
        if (accessKey.isEmpty()) {
            return null;
        }
        return new AclClientRPCHook(new SessionCredentials(accessKey, options.string("secret-key", null)));
    }

    private static DefaultMQProducer producer(Options options, String group) throws Exception {
        DefaultMQProducer producer = new DefaultMQProducer(group, rpcHook(options));
        producer.setNamesrvAddr(options.string("namesrv", null));
        producer.setVipChannelEnabled(false);
        producer.setInstanceName(group + "-" + ProcessHandle.current().pid());
        producer.setSendMsgTimeout(options.integer("send-timeout-ms", 10_000));
        producer.start();
        return producer;
    }

    private static DefaultMQPushConsumer consumer(Options options, String group, String topic)
        throws Exception {
        DefaultMQPushConsumer consumer =
            new DefaultMQPushConsumer(group, rpcHook(options), new AllocateMessageQueueAveragely());
        consumer.setNamesrvAddr(options.string("namesrv", null));
        consumer.setVipChannelEnabled(false);
        consumer.setInstanceName(group + "-" + ProcessHandle.current().pid());
        consumer.setConsumeFromWhere(ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET);
        consumer.subscribe(topic, "*");
        return consumer;
    }

    private static byte[] body(int size) {
        byte[] body = new byte[size];
        new Random(42).nextBytes(body);
        return body;
    }

    private static double seconds(long fromNanos, long toNanos) {
        return (toNanos - fromNanos) / 1e9;
    }

    // ------------------------------------------------------------------ commands

    private static Map<String, Object> version() {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("client_version", MQVersion.getVersionDesc(MQVersion.CURRENT_VERSION));
        out.put("java_version", System.getProperty("java.version"));
        out.put("java_vm", System.getProperty("java.vm.name") + " " + System.getProperty("java.vm.version"));
        return out;
    }

    /** Waits until a broker is registered with the name server, creates the topics on it and
     * waits until the name server routes all their queues. */
    private static Map<String, Object> setup(Options options) throws Exception {
        long started = System.nanoTime();
        long deadline = started + TimeUnit.SECONDS.toNanos(options.integer("timeout-seconds", 60));
        int queues = options.integer("queues", 8);
        DefaultMQProducer producer = producer(options, "bench-setup");
        MQClientAPIImpl api = producer.getDefaultMQProducerImpl().getmQClientFactory().getMQClientAPIImpl();
        int replicas = options.integer("replicas", 1);
        String broker = null;
        while (broker == null) {
            try {
                ClusterInfo info = api.getBrokerClusterInfo(3000);
                for (BrokerData data : info.getBrokerAddrTable().values()) {
                    if (data.getBrokerAddrs().size() >= replicas) {
                        broker = data.getBrokerAddrs().get(MixAll.MASTER_ID);
                    }
                }
            } catch (Exception e) {
                // the name server is not answering yet
            }
            if (broker == null) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException("no broker registered with the name server");
                }
                Thread.sleep(100);
            }
        }
        List<String> topics = new ArrayList<>();
        for (String topic : options.string("topics", "").split(",")) {
            if (topic.isEmpty()) {
                continue;
            }
            int perm = PermName.PERM_READ | PermName.PERM_WRITE;
            api.createTopic(broker, "TBW102", new TopicConfig(topic, queues, queues, perm), 10_000);
            while (routedQueues(api, topic) < queues) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(topic + " not routed with " + queues + " queues");
                }
                Thread.sleep(50);
            }
            topics.add(topic);
        }
        // A retry topic the broker would create on the group's first heartbeat or send-back;
        // made beforehand so the consumer routes it from its start (the client refreshes
        // routes every 30 s).
        for (String group : options.string("retry-groups", "").split(",")) {
            if (group.isEmpty()) {
                continue;
            }
            String topic = MixAll.getRetryTopic(group);
            int perm = PermName.PERM_READ | PermName.PERM_WRITE;
            api.createTopic(broker, "TBW102", new TopicConfig(topic, 1, 1, perm), 10_000);
            while (routedQueues(api, topic) < 1) {
                if (System.nanoTime() > deadline) {
                    throw new IllegalStateException(topic + " not routed");
                }
                Thread.sleep(50);
            }
            topics.add(topic);
        }
        int probes = 0;
        String probeTopic = options.string("probe-topic", "");
        while (!probeTopic.isEmpty()) {
            probes++;
            try {
                if (producer.send(new Message(probeTopic, TAG, new byte[16])).getSendStatus() == SendStatus.SEND_OK) {
                    break;
                }
            } catch (Exception e) {
                // the slave is not connected yet: FLUSH_SLAVE_TIMEOUT, SLAVE_NOT_AVAILABLE
            }
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no send to " + probeTopic + " answered SEND_OK");
            }
            Thread.sleep(100);
        }
        producer.shutdown();
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("broker", broker);
        out.put("topics", topics);
        out.put("queues", queues);
        out.put("replicas", replicas);
        out.put("probes", probes);
        out.put("seconds", seconds(started, System.nanoTime()));
        return out;
    }

    private static int routedQueues(MQClientAPIImpl api, String topic) {
        try {
            TopicRouteData route = api.getTopicRouteInfoFromNameServer(topic, 3000);
            int queues = 0;
            for (QueueData data : route.getQueueDatas()) {
                queues += data.getWriteQueueNums();
            }
            return queues;
        } catch (Exception e) {
            return 0;
        }
    }

    /** Sync sends of one message at a time from {@code threads} threads sharing one producer:
     * every thread sends for the warm-up, then for the measured seconds (sends that start in
     * the window, and at least one per thread). */
    private static Map<String, Object> produce(Options options) throws Exception {
        String topic = options.string("topic", "BenchProduce");
        int threads = options.integer("threads", 1);
        byte[] body = body(options.integer("body", 1024));
        DefaultMQProducer producer = producer(options, "bench-produce");
        producer.send(new Message(topic, TAG, body)); // the route and the connection
        long measureFrom = System.nanoTime() + (long) (options.number("warmup-seconds", 2) * 1e9);
        long measureTo = measureFrom + (long) (options.number("seconds", 10) * 1e9);
        long giveUp = measureTo + TimeUnit.SECONDS.toNanos(60);
        LongList[] latencies = new LongList[threads];
        AtomicLong lastEnd = new AtomicLong(measureFrom);
        AtomicLong errors = new AtomicLong();
        AtomicLong notOk = new AtomicLong();
        AtomicLong sentTotal = new AtomicLong();
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
                        SendResult result = producer.send(new Message(topic, TAG, body));
                        ok = result.getSendStatus() == SendStatus.SEND_OK;
                        (ok ? sentTotal : notOk).incrementAndGet();
                    } catch (Exception e) {
                        errors.incrementAndGet();
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
        producer.shutdown();
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
        out.put("not_ok", notOk.get());
        return out;
    }

    private static Map<String, Object> fillCommand(Options options) throws Exception {
        long started = System.nanoTime();
        int messages = options.integer("messages", 100_000);
        fill(options, options.string("topic", "BenchConsume"), messages);
        double elapsed = seconds(started, System.nanoTime());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        return out;
    }

    /** {@code messages} messages in batch sends of 32, from two threads. */
    private static void fill(Options options, String topic, int messages) throws Exception {
        byte[] body = body(options.integer("body", 1024));
        int batch = options.integer("batch", 32);
        DefaultMQProducer producer = producer(options, "bench-fill");
        AtomicInteger next = new AtomicInteger();
        AtomicLong failures = new AtomicLong();
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < options.integer("fill-threads", 2); t++) {
            Thread worker = new Thread(() -> {
                int first;
                while ((first = next.getAndAdd(batch)) < messages) {
                    List<Message> chunk = new ArrayList<>();
                    for (int i = first; i < Math.min(first + batch, messages); i++) {
                        chunk.add(new Message(topic, TAG, body));
                    }
                    for (int attempt = 0; ; attempt++) {
                        try {
                            if (producer.send(chunk).getSendStatus() == SendStatus.SEND_OK) {
                                break;
                            }
                        } catch (Exception e) {
                            if (attempt >= 10) {
                                failures.incrementAndGet();
                                break;
                            }
                        }
                    }
                }
            }, "fill-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        producer.shutdown();
        if (failures.get() > 0) {
            throw new IllegalStateException(failures.get() + " fill batches failed");
        }
    }

    /** A push consumer (a new group, from the first offset, default settings) drains
     * {@code messages} pre-filled messages; msg/s from the first receipt to the last. */
    private static Map<String, Object> consume(Options options) throws Exception {
        String topic = options.string("topic", "BenchConsume");
        int messages = options.integer("messages", 100_000);
        DefaultMQPushConsumer consumer = consumer(options, options.string("group", "bench-consume"), topic);
        AtomicLong received = new AtomicLong();
        AtomicLong first = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        consumer.registerMessageListener((MessageListenerConcurrently) (batch, context) -> {
            long now = System.nanoTime();
            first.compareAndSet(0, now);
            long count = received.addAndGet(batch.size());
            if (count >= messages && last.compareAndSet(0, now)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        boolean finished = done.await(options.integer("timeout-seconds", 300), TimeUnit.SECONDS);
        consumer.shutdown();
        if (!finished) {
            throw new IllegalStateException("received " + received.get() + " of " + messages);
        }
        double elapsed = seconds(first.get(), last.get());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("received", received.get());
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        out.put("start_to_first_s", seconds(started, first.get()));
        out.put("start_to_last_s", seconds(started, last.get()));
        return out;
    }

    /** Fills {@code messages} messages, then a push consumer fails each one once
     * (RECONSUME_LATER: the broker's send-back at level 3 + reconsumeTimes) and succeeds on its
     * redelivery; msg/s = messages / (consumer start to the last success). */
    private static Map<String, Object> retry(Options options) throws Exception {
        String topic = options.string("topic", "BenchRetry");
        int messages = options.integer("messages", 10_000);
        fill(options, topic, messages);
        DefaultMQPushConsumer consumer = consumer(options, options.string("group", "bench-retry"), topic);
        Set<String> failed = ConcurrentHashMap.newKeySet();
        Set<String> succeeded = ConcurrentHashMap.newKeySet();
        AtomicLong deliveries = new AtomicLong();
        AtomicLong allFailed = new AtomicLong();
        AtomicLong last = new AtomicLong();
        CountDownLatch done = new CountDownLatch(1);
        consumer.registerMessageListener((MessageListenerConcurrently) (batch, context) -> {
            long now = System.nanoTime();
            deliveries.addAndGet(batch.size());
            MessageExt message = batch.get(0);
            if (message.getReconsumeTimes() == 0) {
                if (failed.add(message.getMsgId()) && failed.size() >= messages) {
                    allFailed.compareAndSet(0, now);
                }
                return ConsumeConcurrentlyStatus.RECONSUME_LATER;
            }
            if (succeeded.add(message.getMsgId()) && succeeded.size() >= messages
                && last.compareAndSet(0, now)) {
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        long started = System.nanoTime();
        consumer.start();
        boolean finished = done.await(options.integer("timeout-seconds", 300), TimeUnit.SECONDS);
        consumer.shutdown();
        if (!finished) {
            throw new IllegalStateException(
                "succeeded " + succeeded.size() + " of " + messages + " (failed once: " + failed.size() + ")");
        }
        double elapsed = seconds(started, last.get());
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("deliveries", deliveries.get());
        out.put("seconds", elapsed);
        out.put("msgs_per_s", messages / elapsed);
        out.put("start_to_all_failed_once_s", seconds(started, allFailed.get()));
        return out;
    }

    /** Delayed messages at {@code rate} msg/s for {@code seconds}: even ones at a random delay
     * level, odd ones with TIMER_DELIVER_MS = now + a random delay; a push consumer records
     * receive time - intended delivery time. */
    private static Map<String, Object> lateness(Options options) throws Exception {
        String topic = options.string("topic", "BenchDelay");
        long[] levels = parseLevels(options.string("levels", "1s 5s 10s"));
        int maxLevel = Math.min(levels.length, options.integer("max-level", levels.length));
        int timerMin = options.integer("timer-min-ms", 1000);
        int timerMax = options.integer("timer-max-ms", 5000);
        double rate = options.number("rate", 500);
        int messages = (int) Math.round(rate * options.number("seconds", 10));
        int senders = options.integer("sender-threads", 4);
        DefaultMQPushConsumer consumer = consumer(options, options.string("group", "bench-delay"), topic);
        Set<String> seen = ConcurrentHashMap.newKeySet();
        LongList levelLateness = new LongList();
        LongList timerLateness = new LongList();
        AtomicLong duplicates = new AtomicLong();
        CountDownLatch done = new CountDownLatch(messages);
        consumer.registerMessageListener((MessageListenerConcurrently) (batch, context) -> {
            long now = System.currentTimeMillis();
            for (MessageExt message : batch) {
                if (!seen.add(message.getMsgId())) {
                    duplicates.incrementAndGet();
                    continue;
                }
                long late = now - Long.parseLong(message.getUserProperty(DUE_PROPERTY));
                LongList into = "timer".equals(message.getUserProperty(PATH_PROPERTY)) ? timerLateness : levelLateness;
                synchronized (into) {
                    into.add(late);
                }
                done.countDown();
            }
            return ConsumeConcurrentlyStatus.CONSUME_SUCCESS;
        });
        consumer.start();
        long deadline = System.nanoTime() + TimeUnit.SECONDS.toNanos(30);
        while (consumer.getDefaultMQPushConsumerImpl().getRebalanceImpl().getProcessQueueTable().isEmpty()) {
            if (System.nanoTime() > deadline) {
                throw new IllegalStateException("no queue assigned to the consumer");
            }
            Thread.sleep(20);
        }
        DefaultMQProducer producer = producer(options, "bench-delay");
        AtomicInteger next = new AtomicInteger();
        AtomicLong sendErrors = new AtomicLong();
        long startNanos = System.nanoTime() + 100_000_000L;
        List<Thread> workers = new ArrayList<>();
        for (int t = 0; t < senders; t++) {
            Random random = new Random(t + 1);
            Thread worker = new Thread(() -> {
                int i;
                while ((i = next.getAndIncrement()) < messages) {
                    long wait = startNanos + (long) (i / rate * 1e9) - System.nanoTime();
                    if (wait > 0) {
                        try {
                            TimeUnit.NANOSECONDS.sleep(wait);
                        } catch (InterruptedException e) {
                            return;
                        }
                    }
                    Message message = new Message(topic, TAG, new byte[64]);
                    long now = System.currentTimeMillis();
                    long due;
                    if (i % 2 == 0) {
                        int level = 1 + random.nextInt(maxLevel);
                        message.setDelayTimeLevel(level);
                        due = now + levels[level - 1];
                        message.putUserProperty(PATH_PROPERTY, "level");
                    } else {
                        due = now + timerMin + random.nextInt(timerMax - timerMin + 1);
                        message.putUserProperty(TIMER_DELIVER_MS, Long.toString(due));
                        message.putUserProperty(PATH_PROPERTY, "timer");
                    }
                    message.putUserProperty(DUE_PROPERTY, Long.toString(due));
                    try {
                        if (producer.send(message).getSendStatus() != SendStatus.SEND_OK) {
                            sendErrors.incrementAndGet();
                        }
                    } catch (Exception e) {
                        sendErrors.incrementAndGet();
                        done.countDown();
                    }
                }
            }, "delay-" + t);
            workers.add(worker);
            worker.start();
        }
        for (Thread worker : workers) {
            worker.join();
        }
        long sendSeconds = (System.nanoTime() - startNanos) / 1_000_000_000L;
        long longest = timerMax;
        for (int level = 1; level <= maxLevel; level++) {
            longest = Math.max(longest, levels[level - 1]);
        }
        long wait = longest / 1000 + 60;
        boolean finished = done.await(wait, TimeUnit.SECONDS);
        producer.shutdown();
        consumer.shutdown();
        if (!finished) {
            throw new IllegalStateException(
                "received " + seen.size() + " of " + messages + " delayed messages (" + sendErrors.get()
                    + " send errors)");
        }
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("messages", messages);
        out.put("rate_msgs_per_s", rate);
        out.put("send_seconds", sendSeconds);
        out.put("send_errors", sendErrors.get());
        out.put("duplicates", duplicates.get());
        out.put("levels_ms", levels);
        out.put("timer_ms", new long[] {timerMin, timerMax});
        out.put("level", summary(levelLateness.sorted()));
        out.put("timer", summary(timerLateness.sorted()));
        LongList all = new LongList();
        all.addAll(levelLateness);
        all.addAll(timerLateness);
        out.put("all", summary(all.sorted()));
        return out;
    }

    private static long[] parseLevels(String text) {
        String[] parts = text.trim().split("\\s+");
        long[] delays = new long[parts.length];
        for (int i = 0; i < parts.length; i++) {
            String part = parts[i];
            int unit = 0;
            while (unit < part.length() && Character.isDigit(part.charAt(unit))) {
                unit++;
            }
            long amount = Long.parseLong(part.substring(0, unit));
            switch (part.substring(unit)) {
                case "ms":
                    delays[i] = amount;
                    break;
                case "s":
                    delays[i] = amount * 1000;
                    break;
                case "m":
                    delays[i] = amount * 60_000;
                    break;
                case "h":
                    delays[i] = amount * 3_600_000;
                    break;
                default:
                    throw new IllegalArgumentException("bad delay level " + part);
            }
        }
        return delays;
    }

    // ------------------------------------------------------------------ helpers

    private static long percentile(long[] sorted, double fraction) {
        if (sorted.length == 0) {
            return 0;
        }
        return sorted[Math.min(sorted.length - 1, (int) (sorted.length * fraction))];
    }

    private static Map<String, Object> summary(long[] sorted) {
        Map<String, Object> out = new LinkedHashMap<>();
        out.put("count", sorted.length);
        if (sorted.length > 0) {
            out.put("min", sorted[0]);
            out.put("p50", percentile(sorted, 0.50));
            out.put("p99", percentile(sorted, 0.99));
            out.put("max", sorted[sorted.length - 1]);
        }
        return out;
    }

    /** A growable list of longs. */
    static final class LongList {
        private long[] values = new long[1024];
        private int size;

        void add(long value) {
            if (size == values.length) {
                values = java.util.Arrays.copyOf(values, size * 2);
            }
            values[size++] = value;
        }

        void addAll(LongList other) {
            for (int i = 0; i < other.size; i++) {
                add(other.values[i]);
            }
        }

        long[] sorted() {
            long[] copy = java.util.Arrays.copyOf(values, size);
            java.util.Arrays.sort(copy);
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

    /** Just enough JSON for the results: maps, lists, arrays of longs, numbers, strings. */
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
            } else if (value instanceof long[]) {
                List<Object> items = new ArrayList<>();
                for (long item : (long[]) value) {
                    items.add(item);
                }
                write(out, items);
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
