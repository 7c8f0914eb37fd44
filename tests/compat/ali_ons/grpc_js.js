'use strict';
// grpc-js (Node's gRPC over Node's own HTTP/2, nghttp2) against the broker's gRPC server:
// node grpc_js.js HOST:PORT prints one JSON object of what each call returned.
const grpc = require('@grpc/grpc-js');

const same = (data) => data;
function method(path, requestStream, responseStream) {
  return {
    path, requestStream, responseStream,
    requestSerialize: same, requestDeserialize: same,
    responseSerialize: same, responseDeserialize: same,
  };
}
const Client = grpc.makeGenericClientConstructor({
  Echo: method('/t.T/Echo', false, false),
  Fail: method('/t.T/Fail', false, false),
  Nothing: method('/t.T/Nothing', false, false),
  Chunks: method('/t.T/Chunks', false, true),
  Chat: method('/t.T/Chat', true, true),
});

function unary(client, name, body, deadlineMs) {
  return new Promise((resolve) => {
    client[name](body, { deadline: Date.now() + deadlineMs }, (error, answer) => {
      resolve(error ? { code: error.code, details: error.details } : { answer });
    });
  });
}

function collect(stream) {
  return new Promise((resolve) => {
    const messages = [];
    stream.on('data', (data) => messages.push(data));
    stream.on('error', (error) => resolve({ code: error.code, messages }));
    stream.on('end', () => resolve({ code: 0, messages }));
  });
}

async function main() {
  const client = new Client(process.argv[2], grpc.credentials.createInsecure());
  const result = {};
  result.echo = (await unary(client, 'Echo', Buffer.from('hello'), 10000)).answer.toString();
  const big = Buffer.alloc((3 << 20) + 17, 7);
  result.bigEqual = (await unary(client, 'Echo', big, 30000)).answer.equals(big);
  const failed = await unary(client, 'Fail', Buffer.from('not now'), 10000);
  result.fail = [failed.code, failed.details];
  const nothing = await unary(client, 'Nothing', Buffer.from('x'), 10000);
  result.nothing = nothing.code;
  const chunks = await collect(client.Chunks(Buffer.from('50x65536')));
  result.chunks = [chunks.code, chunks.messages.length, chunks.messages.every(
    (m, index) => m.length === 65536 && m.readUInt32BE(0) === index)];
  const chat = client.Chat();
  const replies = collect(chat);
  for (const word of ['one', 'two', 'three']) chat.write(Buffer.from(word));
  chat.end();
  result.chat = (await replies).messages.map((m) => m.toString());
  let answered = 0;
  await Promise.all(Array.from({ length: 8 }, async (_, worker) => {
    for (let index = 0; index < 250; index += 1) {
      const body = Buffer.from(`${worker}-${index}`);
      const reply = await unary(client, 'Echo', body, 10000);
      if (reply.answer && reply.answer.equals(body)) answered += 1;
    }
  }));
  result.concurrent = answered;
  client.close();
  process.stdout.write(`${JSON.stringify(result)}\n`);
}

main().catch((error) => {
  process.stderr.write(`${error.stack}\n`);
  process.exit(1);
});
