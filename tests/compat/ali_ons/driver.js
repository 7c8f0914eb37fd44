'use strict';
// Produces and consumes messages with ali-ons against an open-source RocketMQ name server
// (reconsume's). Driven by tests/compat/test_ali_ons.py.
//
//   node driver.js --namesrv=127.0.0.1:9876 --topic=T --group=G --count=1000
//                  [--tag=compat] [--prefix='ali-ons message'] [--timeout-ms=60000]
//                  [--concurrency=8]
//
// Starts a push consumer (clustering) on the topic, then sends `count` messages with distinct
// bodies (`<prefix> <index>`), the tag, a key and a user property, and exits once the consumer
// has received every one of them and committed its offsets.
//
// stdout: one JSON object per line, "event" says which:
//   ready     {clientId} once the consumer has started
//   sent      {index, body, msgId, status, brokerName, queueId, queueOffset}
//   received  {msgId, body, tags, keys, properties, brokerName, queueId, queueOffset,
//              reconsumeTimes, topic, compressed}
//   rpc       {address, code, responseCode, remark} per request ({oneway: true} or {error})
//   error     {name, code, message}: anything the client emits as an error (it keeps going)
//   done      {sent, received} then exit 0
//   timeout   {sent, received, missing, timeoutMs} then exit 2 (covers the whole run)
// A failed send or any other fatal failure: a "fatal" line and exit 1.

const { Producer, Consumer, Message } = require('ali-ons');
const Channel = require('ali-ons/lib/channel');

function parseArgs(argv) {
  const args = {};
  for (const arg of argv) {
    const match = /^--([^=]+)=(.*)$/.exec(arg);
    if (!match) {
      throw new Error(`unexpected argument ${arg}: use --name=value`);
    }
    args[match[1]] = match[2];
  }
  for (const required of [ 'namesrv', 'topic', 'group', 'count' ]) {
    if (!args[required]) {
      throw new Error(`--${required} is required`);
    }
  }
  return {
    namesrv: args.namesrv,
    topic: args.topic,
    group: args.group,
    count: Number(args.count),
    tag: args.tag || 'compat',
    prefix: args.prefix || 'ali-ons message',
    timeoutMs: Number(args['timeout-ms'] || 60000),
    concurrency: Number(args.concurrency || 8),
  };
}

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields)) + '\n');
}

function finish(code) {
  // Exit once stdout has drained; the clients' timers would keep the process alive otherwise.
  process.stdout.write('', () => process.exit(code));
}

// The open-source setup: a fixed name server list (`nameSrv`) instead of the ONS HTTP address
// lookup (`onsAddr`), and no accessKey/secretKey, so requests are not signed. ali-ons still
// insists on an HTTP client; this one fails loudly if it were ever used.
function commonOptions(opts) {
  return {
    nameSrv: [ opts.namesrv ],
    httpclient: {
      async request(url) {
        throw new Error(`ali-ons tried an ONS HTTP name-server lookup (${url})`);
      },
    },
    // Short enough that a test notices offsets and routes within seconds.
    persistConsumerOffsetInterval: 1000,
    rebalanceInterval: 2000,
    pollNameServerInteval: 5000,
    heartbeatBrokerInterval: 5000,
  };
}

// Every request ali-ons makes and the answer's code, so the test can tell which parts of the
// protocol it exercised and whether the servers refused any of them.
function traceRequests() {
  const invoke = Channel.prototype.invoke;
  Channel.prototype.invoke = async function(command, timeout) {
    const address = `${this.options.host}:${this.options.port}`;
    try {
      const response = await invoke.call(this, command, timeout);
      emit('rpc', { address, code: command.code, responseCode: response.code, remark: response.remark });
      return response;
    } catch (err) {
      emit('rpc', { address, code: command.code, error: String(err && err.message) });
      throw err;
    }
  };
  const invokeOneway = Channel.prototype.invokeOneway;
  Channel.prototype.invokeOneway = function(command) {
    emit('rpc', { address: `${this.options.host}:${this.options.port}`, code: command.code, oneway: true });
    return invokeOneway.call(this, command);
  };
}

function reportError(err) {
  emit('error', { name: err && err.name, code: err && err.code, message: String(err && err.message) });
}

// Distinct bodies; every 100th is larger than ali-ons' 4 KiB threshold, so it travels
// compressed.
function bodyOf(prefix, index) {
  const padding = index % 100 === 42 ? ` ${'z'.repeat(5000)}` : '';
  return `${prefix} ${index}${padding}`;
}

async function main() {
  const opts = parseArgs(process.argv.slice(2));
  traceRequests();
  const expected = new Set();
  for (let index = 0; index < opts.count; index++) {
    expected.add(bodyOf(opts.prefix, index));
  }
  const got = new Set();
  let sent = 0;
  let received = 0;
  let allReceived;
  const allReceivedPromise = new Promise(resolve => { allReceived = resolve; });
  const watchdog = setTimeout(() => {
    emit('timeout', { sent, received, missing: opts.count - got.size, timeoutMs: opts.timeoutMs });
    finish(2);
  }, opts.timeoutMs);

  const consumer = new Consumer(Object.assign(commonOptions(opts), {
    consumerGroup: opts.group,
    // A new group reads its queues from the start (the default starts at the end); a group
    // with committed offsets resumes from them either way.
    consumeFromWhere: 'CONSUME_FROM_FIRST_OFFSET',
    pullBatchSize: 32,
    parallelConsumeLimit: 8,
  }));
  consumer.on('error', reportError);
  consumer.subscribe(opts.topic, opts.tag, async (msg, mq) => {
    const body = msg.body ? msg.body.toString('utf8') : '';
    received++;
    const properties = Object.assign({}, msg.properties);
    delete properties['']; // ali-ons' parse of the trailing separator
    emit('received', {
      msgId: msg.msgId,
      body,
      tags: msg.tags,
      keys: msg.keys,
      properties,
      topic: msg.topic,
      brokerName: mq.brokerName,
      queueId: Number(mq.queueId),
      queueOffset: msg.queueOffset,
      reconsumeTimes: msg.reconsumeTimes,
      compressed: (msg.sysFlag & 1) === 1,
    });
    if (expected.has(body)) {
      got.add(body);
      if (got.size === opts.count) {
        allReceived();
      }
    }
  });
  await consumer.ready();
  emit('ready', { clientId: consumer.clientId });

  const producer = new Producer(Object.assign(commonOptions(opts), {
    producerGroup: `${opts.group}-producer`,
  }));
  producer.on('error', reportError);
  await producer.ready();

  let next = 0;
  async function sender() {
    while (next < opts.count) {
      const index = next++;
      const body = bodyOf(opts.prefix, index);
      const msg = new Message(opts.topic, opts.tag, body);
      msg.keys = [ `key-${index}` ];
      msg.properties.index = String(index);
      const result = await producer.send(msg);
      sent++;
      emit('sent', {
        index,
        body,
        msgId: result.msgId,
        status: result.sendStatus,
        brokerName: result.messageQueue.brokerName,
        queueId: Number(result.messageQueue.queueId),
        queueOffset: result.queueOffset,
      });
    }
  }
  const senders = [];
  for (let i = 0; i < opts.concurrency; i++) {
    senders.push(sender());
  }
  await Promise.all(senders);
  await allReceivedPromise;

  // The listener saw the last message before ali-ons advanced that queue's offset past it
  // (it does once the listener returns): wait for every process queue to empty, or close()
  // would commit one offset short.
  while ([ ...consumer.processQueueTable.values() ].some(item => item.processQueue.msgCount > 0)) {
    await new Promise(resolve => setTimeout(resolve, 10));
  }
  // close() commits the consumer's offsets to the brokers and unregisters the client.
  await consumer.close();
  await producer.close();
  clearTimeout(watchdog);
  emit('done', { sent, received });
  return 0;
}

main().then(finish, err => {
  emit('fatal', { name: err && err.name, code: err && err.code, message: String(err && err.stack) });
  finish(1);
});
