'use strict';
// `driver.js produce`: sends `count` messages (see messages.js for what they carry) and exits.

const { emit, parseArgs } = require('./common');
const { sendAll, sendOptions, startProducer } = require('./messages');

async function produce(argv) {
  const args = parseArgs(argv, [ 'namesrv', 'topic', 'group', 'count' ]);
  const producer = await startProducer(args);
  const from = Number(args.from || 0);
  const sent = await sendAll(producer, sendOptions(args), from, Number(args.count), Number(args.concurrency || 8));
  await producer.close();
  emit('done', { sent });
  return 0;
}

module.exports = produce;
