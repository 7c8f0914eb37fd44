'use strict';
// `driver.js roundtrip`: one process starts a push consumer (clustering) on the topic, sends
// `count` messages and exits once the consumer has received every one of them and committed
// its offsets.

const { Consumer } = require('ali-ons');
const { commonOptions, drained, emit, finish, parseArgs, receivedEvent, reportError } = require('./common');
const { bodyOf, sendAll, sendOptions, startProducer } = require('./messages');

async function roundtrip(argv) {
  const args = parseArgs(argv, [ 'namesrv', 'topic', 'group', 'count' ]);
  const opts = sendOptions(args);
  const count = Number(args.count);
  const timeoutMs = Number(args['timeout-ms'] || 60000);
  const expected = new Set();
  for (let index = 0; index < count; index++) {
    expected.add(bodyOf(opts.prefix, index));
  }
  const got = new Set();
  const progress = { sent: 0 };
  let received = 0;
  let allReceived;
  const allReceivedPromise = new Promise(resolve => { allReceived = resolve; });
  const watchdog = setTimeout(() => {
    emit('timeout', { sent: progress.sent, received, missing: count - got.size, timeoutMs });
    finish(2);
  }, timeoutMs);

  const consumer = new Consumer(Object.assign(commonOptions(args), {
    consumerGroup: args.group,
    // A new group reads its queues from the start (the default starts at the end); a group
    // with committed offsets resumes from them either way.
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    pullBatchSize: 32,
    parallelConsumeLimit: 8,
  }));
  consumer.on('error', reportError);
  consumer.subscribe(opts.topic, opts.tag, async (msg, mq) => {
    const event = receivedEvent(msg, mq);
    received++;
    emit('received', event);
    if (expected.has(event.body)) {
      got.add(event.body);
      if (got.size === count) {
        allReceived();
      }
    }
  });
  await consumer.ready();
  emit('ready', { clientId: consumer.clientId });

  const producer = await startProducer(args);
  await sendAll(producer, opts, 0, count, Number(args.concurrency || 8), progress);
  await allReceivedPromise;

  await drained(consumer);
  // close() commits the consumer's offsets to the brokers and unregisters the client.
  await consumer.close();
  await producer.close();
  clearTimeout(watchdog);
  emit('done', { sent: progress.sent, received });
  return 0;
}

module.exports = roundtrip;
