'use strict';
// The messages the driver sends and how it sends them.

const { Producer, Message } = require('ali-ons');
const { commonOptions, emit, listArg, reportError } = require('./common');

// Distinct bodies; every 100th is larger than ali-ons' 4 KiB threshold, so it travels
// compressed.
function bodyOf(prefix, index) {
  const padding = index % 100 === 42 ? ` ${'z'.repeat(5000)}` : '';
  return `${prefix} ${index}${padding}`;
}

// What the sending options say about message `index`:
//   --delay-cycle=0,3,T+60000  entry index % length: a delay level (msg.delayTimeLevel, the
//                              DELAY property; 0 = none) or T+<ms>, ali-ons' ONS-only
//                              setStartDeliverTime(now + ms)
//   --fail-cycle=always,1,0    entry index % length becomes the user property `fail`, read
//                              by consume.js: throw on every delivery, on the first n, or
//                              (return-retry) return Consumer.ACTION_RETRY
function sendOptions(args) {
  return {
    topic: args.topic,
    tag: args.tag || 'compat',
    prefix: args.prefix || 'ali-ons message',
    delayCycle: listArg(args['delay-cycle']),
    failCycle: listArg(args['fail-cycle']),
  };
}

function newMessage(opts, index) {
  const body = bodyOf(opts.prefix, index);
  const msg = new Message(opts.topic, opts.tag, body);
  msg.keys = [ `key-${index}` ];
  msg.properties.index = String(index);
  let delayLevel = 0;
  let startDeliverTime = null;
  if (opts.delayCycle.length) {
    const delay = opts.delayCycle[index % opts.delayCycle.length];
    if (delay.startsWith('T+')) {
      startDeliverTime = Date.now() + Number(delay.slice(2));
      msg.setStartDeliverTime(startDeliverTime);
    } else if (Number(delay) > 0) {
      delayLevel = Number(delay);
      msg.delayTimeLevel = delayLevel;
    }
  }
  if (opts.failCycle.length) {
    msg.properties.fail = opts.failCycle[index % opts.failCycle.length];
  }
  return { msg, body, delayLevel, startDeliverTime };
}

async function startProducer(args) {
  const producer = new Producer(Object.assign(commonOptions(args), {
    producerGroup: `${args.group}-producer`,
  }));
  producer.on('error', reportError);
  await producer.ready();
  return producer;
}

// Sends messages `from` .. `from + count - 1` with `concurrency` sends in flight, one "sent"
// event each ({index, body, delayLevel, startDeliverTime, sentAt, msgId, status, brokerName,
// queueId, queueOffset}; sentAt: just before the request). Counts in `progress.sent`.
async function sendAll(producer, opts, from, count, concurrency, progress = { sent: 0 }) {
  let next = from;
  async function sender() {
    while (next < from + count) {
      const index = next++;
      const { msg, body, delayLevel, startDeliverTime } = newMessage(opts, index);
      const sentAt = Date.now();
      const result = await producer.send(msg);
      progress.sent++;
      emit('sent', {
        index,
        body,
        delayLevel,
        startDeliverTime,
        sentAt,
        msgId: result.msgId,
        status: result.sendStatus,
        brokerName: result.messageQueue.brokerName,
        queueId: Number(result.messageQueue.queueId),
        queueOffset: result.queueOffset,
      });
    }
  }
  const senders = [];
  for (let i = 0; i < concurrency; i++) {
    senders.push(sender());
  }
  await Promise.all(senders);
  return progress.sent;
}

module.exports = { bodyOf, sendAll, sendOptions, startProducer };
