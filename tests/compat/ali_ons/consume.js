'use strict';
// `driver.js consume`: a push consumer that runs until its stdin says `close` (or ends).
//
// Its listener records every delivery and fails a message whose user property `fail` asks
// for it (see `verdict`), so ali-ons sends it back (CONSUMER_SEND_MSG_BACK) in clustering
// and drops it in broadcasting. Each change of the queues it pulls (rebalance) is reported,
// for the topic and for %RETRY%<group>.

const readline = require('readline');
const { Consumer } = require('ali-ons');
const {
  assignedQueues, commonOptions, drained, emit, finish, parseArgs, receivedEvent, reportError,
} = require('./common');

// What the listener does with a message, by its user property `fail`: "always" throws on
// every delivery, a number n throws on the deliveries with reconsumeTimes < n, "return-retry"
// returns Consumer.ACTION_RETRY on every delivery; otherwise it consumes the message.
function verdict(msg) {
  const fail = msg.properties.fail;
  if (fail === 'return-retry') {
    return fail;
  }
  if (fail === 'always' || (fail !== undefined && msg.reconsumeTimes < Number(fail))) {
    return 'throw';
  }
  return 'consume';
}

async function consume(argv) {
  const args = parseArgs(argv, [ 'namesrv', 'topic', 'group' ]);
  const instance = args.instance || String(process.pid);
  const timeoutMs = Number(args['timeout-ms'] || 60000);
  const watchdog = setTimeout(() => {
    emit('timeout', { instance, timeoutMs });
    finish(2);
  }, timeoutMs);

  const options = Object.assign(commonOptions(args), {
    consumerGroup: args.group,
    instanceName: instance,
    isBroadcast: args.broadcast === 'true',
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    pullBatchSize: 32,
    parallelConsumeLimit: 8,
  });
  if (args['max-reconsume-times']) {
    options.maxReconsumeTimes = Number(args['max-reconsume-times']);
  }
  const consumer = new Consumer(options);
  consumer.on('error', reportError);

  const retryTopic = `%RETRY%${args.group}`;
  for (const topic of [ args.topic, retryTopic ]) {
    consumer.on(`topic_${topic}_queue_changed`, () => {
      emit('assigned', { instance, topic, queues: assignedQueues(consumer, topic) });
    });
  }

  consumer.subscribe(args.topic, args.tag || 'compat', async (msg, mq) => {
    const action = verdict(msg);
    emit('received', Object.assign(receivedEvent(msg, mq), { instance, verdict: action }));
    if (action === 'throw') {
      throw new Error(`failing on purpose (reconsumeTimes ${msg.reconsumeTimes})`);
    }
    return action === 'return-retry' ? Consumer.ACTION_RETRY : undefined;
  });
  await consumer.ready();
  emit('ready', { instance, clientId: consumer.clientId, messageModel: consumer.messageModel });

  const lines = readline.createInterface({ input: process.stdin });
  await new Promise(resolve => {
    lines.on('line', line => line.trim() === 'close' && resolve());
    lines.on('close', resolve);
  });
  lines.close();
  await drained(consumer);
  // close() commits a clustering consumer's offsets to the brokers and unregisters it.
  await consumer.close();
  clearTimeout(watchdog);
  emit('closed', { instance });
  return 0;
}

module.exports = consume;
