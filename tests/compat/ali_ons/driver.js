'use strict';
// Drives ali-ons (unchanged) against an open-source RocketMQ name server (reconsume's).
// Driven by tests/compat/test_ali_ons*.py.
//
//   node driver.js roundtrip --namesrv=H:P --topic=T --group=G --count=N [send options]
//       a consumer and a producer in one process: sends N messages, exits once all arrived
//       and the consumer closed (committing its offsets); roundtrip.js
//   node driver.js produce --namesrv=H:P --topic=T --group=G --count=N [--from=0]
//                          [send options]
//       sends N messages (indexes from .. from + N - 1) and exits; produce.js
//   node driver.js consume --namesrv=H:P --topic=T --group=G [--tag=compat] [--instance=name]
//                          [--broadcast=true] [--max-reconsume-times=n] [--timeout-ms=60000]
//       a push consumer that runs until a `close` line on stdin; consume.js
//
// Every mode signs its requests with --access-key=AK --secret-key=SK (ali-ons' accessKey and
// secretKey) when both are given.
//
// Send options (messages.js): --tag=compat --prefix='ali-ons message' --concurrency=8
// --delay-cycle=0,3,T+60000 --fail-cycle=always,1,0,return-retry --timeout-ms=60000 (roundtrip).
//
// stdout: one JSON object per line, "event" says which:
//   ready     {clientId} once the consumer has started (consume adds {instance, messageModel})
//   sent      {index, body, delayLevel, startDeliverTime, sentAt, msgId, status, brokerName,
//              queueId, queueOffset}
//   received  {at, msgId, body, tags, keys, properties, topic, fromRetryTopic, brokerName,
//              storeHost, queueId, queueOffset, commitLogOffset, reconsumeTimes, bornTimestamp,
//              storeTimestamp, compressed} (consume adds {instance, verdict})
//   assigned  {instance, topic, queues: ["brokerName/queueId", ...]} after each rebalance
//              that changed the consumer's queues
//   rpc       {address, code, topic, responseCode, remark} per request ({oneway: true} or
//              {error})
//   error     {name, code, message}: anything the client emits as an error (it keeps going)
//   done      {sent, received} (roundtrip, produce) / closed {instance} (consume), exit 0
//   timeout   then exit 2 (the whole run took longer than --timeout-ms)
// Any fatal failure: a "fatal" line and exit 1.

const { run, traceRequests } = require('./common');

const MODES = {
  roundtrip: './roundtrip',
  produce: './produce',
  consume: './consume',
};

const [ mode, ...argv ] = process.argv.slice(2);
run(async () => {
  if (!MODES[mode]) {
    throw new Error(`unknown mode ${mode}: use one of ${Object.keys(MODES).join(', ')}`);
  }
  traceRequests();
  return require(MODES[mode])(argv);
});
