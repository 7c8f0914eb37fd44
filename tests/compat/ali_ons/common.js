'use strict';
// What every driver mode shares: argument parsing, the JSON-lines output, the options that
// point ali-ons at an open-source name server, the request trace and the event a received
// message becomes.

const Channel = require('ali-ons/lib/channel');

// `--name=value` arguments into an object; `required` names must be present.
function parseArgs(argv, required) {
  const args = {};
  for (const arg of argv) {
    const match = /^--([^=]+)=(.*)$/.exec(arg);
    if (!match) {
      throw new Error(`unexpected argument ${arg}: use --name=value`);
    }
    args[match[1]] = match[2];
  }
  for (const name of required) {
    if (!args[name]) {
      throw new Error(`--${name} is required`);
    }
  }
  return args;
}

// A comma-separated list ("0,1,3") as an array of strings; empty when absent.
function listArg(value) {
  return value ? value.split(',') : [];
}

function emit(event, fields) {
  process.stdout.write(JSON.stringify(Object.assign({ event }, fields)) + '\n');
}

function finish(code) {
  // Exit once stdout has drained; the clients' timers would keep the process alive otherwise.
  process.stdout.write('', () => process.exit(code));
}

// The open-source setup: a fixed name server list (`nameSrv`, from --namesrv) instead of the ONS
// HTTP address lookup (`onsAddr`). Requests are signed with ali-ons' `accessKey`/`secretKey` when
// --access-key and --secret-key are given, and not signed otherwise. ali-ons still insists on an
// HTTP client; this one fails loudly if it were ever used.
function commonOptions(args) {
  const credentials = args['access-key'] && args['secret-key'] ?
    { accessKey: args['access-key'], secretKey: args['secret-key'] } : {};
  return Object.assign(credentials, {
    nameSrv: [ args.namesrv ],
    httpclient: {
      async request(url) {
        throw new Error(`ali-ons tried an ONS HTTP name-server lookup (${url})`);
      },
    },
    // Short enough that a test sees routes (the retry topic's among them), rebalances and
    // offsets within a second or two.
    persistConsumerOffsetInterval: 1000,
    rebalanceInterval: 1000,
    pollNameServerInteval: 1000,
    heartbeatBrokerInterval: 5000,
  });
}

// Every request ali-ons makes and the answer's code, so the test can tell which parts of the
// protocol it exercised and whether the servers refused any of them. A send also names its
// topic, so a test can tell a send to %RETRY%<group> (ali-ons' fallback) from a producer's.
function traceRequests() {
  const invoke = Channel.prototype.invoke;
  Channel.prototype.invoke = async function(command, timeout) {
    const address = `${this.options.host}:${this.options.port}`;
    const topic = command.extFields && (command.extFields.b || command.extFields.topic);
    try {
      const response = await invoke.call(this, command, timeout);
      emit('rpc', { address, code: command.code, topic, responseCode: response.code, remark: response.remark });
      return response;
    } catch (err) {
      emit('rpc', { address, code: command.code, topic, error: String(err && err.message) });
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

// A received message as a JSON event. `mq` is the queue it was pulled from; ali-ons hands a
// message from %RETRY%<group> to the original topic's handler without it (and with `topic`
// already reset to the original topic), hence `fromRetryTopic`.
function receivedEvent(msg, mq) {
  const properties = Object.assign({}, msg.properties);
  delete properties['']; // ali-ons' parse of the trailing separator
  delete properties.MIN_OFFSET; // added by ali-ons from the pull answer, not stored
  delete properties.MAX_OFFSET;
  return {
    at: Date.now(),
    msgId: msg.msgId,
    body: msg.body ? msg.body.toString('utf8') : '',
    tags: msg.tags,
    keys: msg.keys,
    properties,
    topic: msg.topic,
    fromRetryTopic: mq === undefined,
    brokerName: mq ? mq.brokerName : null,
    storeHost: msg.storeHost,
    queueId: Number(msg.queueId),
    queueOffset: msg.queueOffset,
    commitLogOffset: msg.commitLogOffset,
    reconsumeTimes: msg.reconsumeTimes,
    bornTimestamp: msg.bornTimestamp,
    storeTimestamp: msg.storeTimestamp,
    compressed: (msg.sysFlag & 1) === 1,
  };
}

// The queues of `topic` a consumer pulls now, as sorted "brokerName/queueId" strings.
function assignedQueues(consumer, topic) {
  const queues = [];
  for (const { messageQueue } of consumer.processQueueTable.values()) {
    if (messageQueue.topic === topic) {
      queues.push(`${messageQueue.brokerName}/${messageQueue.queueId}`);
    }
  }
  return queues.sort();
}

// Resolves once no process queue holds a message: the listener saw the last message before
// ali-ons advanced that queue's offset past it (it does once the listener returns), and
// close() would otherwise commit one offset short.
async function drained(consumer) {
  while ([ ...consumer.processQueueTable.values() ].some(item => item.processQueue.msgCount > 0)) {
    await new Promise(resolve => setTimeout(resolve, 10));
  }
}

// Runs `main`, then exits with its code; a failure becomes a "fatal" line and exit 1.
function run(main) {
  main().then(finish, err => {
    emit('fatal', { name: err && err.name, code: err && err.code, message: String(err && err.stack) });
    finish(1);
  });
}

module.exports = {
  assignedQueues,
  commonOptions,
  drained,
  emit,
  finish,
  listArg,
  parseArgs,
  receivedEvent,
  reportError,
  run,
  traceRequests,
};
