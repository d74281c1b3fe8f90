// The amqplib side of captures/scenarios/clients091_go_node.py: node's amqplib (npm, the
// version the scenario pins) under Node.js: `node amqplib_client.js MODE PORT QUEUE`, with
// NODE_PATH naming the node_modules that holds amqplib.
//
// MODE happy: a ConfirmChannel (confirm.select), prefetch 4 (basic.qos), declare QUEUE, publish
// 4 messages each with a confirm callback, waitForConfirms; consume with manual acks: tag 1 acked
// alone, tag 3 with allUpTo (multiple: 2-3), then ackAll (basic.ack delivery-tag 0 multiple:
// whatever is outstanding, tag 4); cancel, delete the queue, close the channel and the connection.
// MODE redeclare: declare QUEUE with x-max-length 10, then again with x-max-length 20: RabbitMQ
// closes the channel with 406 PRECONDITION_FAILED, amqplib answers close-ok and rejects the
// promise; a second channel deletes the queue; the connection is closed.
// MODE nack: 3 messages consumed with manual acks; tag 1 nacked with requeue false, then nackAll
// with requeue false (basic.nack delivery-tag 0 multiple: tags 2-3): all three dropped by the
// broker (no dead-letter exchange); the queue is empty when deleted.
//
// Prints what amqplib observed as one JSON line: counts named as captures/recorder counts them.
'use strict';
const amqp = require('amqplib');

const [mode, port, queue] = process.argv.slice(2);
const MESSAGES = 4;
const counts = {};
const inc = (key, n = 1) => { counts[key] = (counts[key] || 0) + n; };

async function happy(conn) {
  const ch = await conn.createConfirmChannel();
  inc('channels');
  inc('confirm_selects');
  counts.channel_numbers_opened = [ch.ch];
  await ch.prefetch(MESSAGES);
  counts.prefetch_count = MESSAGES;
  await ch.assertQueue(queue, { durable: false, autoDelete: false });
  inc('queue_declares');
  const confirmed = [];
  for (let i = 0; i < MESSAGES; i++) {
    const body = Buffer.from(`amqplib message ${i}`);
    ch.publish('', queue, body, { messageId: `m${i}` }, (err) => {
      confirmed.push(err ? 'nacked' : 'acked');
    });
    inc('publishes');
    inc('body_size', body.length);
  }
  await ch.waitForConfirms();
  counts.confirms_acked = confirmed.filter((c) => c === 'acked').length;
  const got = [];
  let arrived;
  const all = new Promise((resolve) => { arrived = resolve; });
  const ok = await ch.consume(queue, (msg) => {
    got.push(msg);
    inc('deliveries');
    if (got.length === MESSAGES) arrived();
  }, { noAck: false });
  inc('consumers');
  counts.consumer_tag = ok.consumerTag;
  await all;
  counts.delivery_tags = got.map((m) => m.fields.deliveryTag);
  ch.ack(got[0]); // tag 1 alone
  inc('acks');
  ch.ack(got[2], true); // allUpTo: tags 2-3
  inc('acks');
  inc('acks_multiple');
  ch.ackAll(); // basic.ack delivery-tag 0, multiple: tag 4
  inc('acks');
  inc('acks_multiple');
  counts.acked_messages = MESSAGES;
  counts.max_unacked = MESSAGES;
  await ch.cancel(ok.consumerTag);
  inc('cancels');
  await ch.deleteQueue(queue);
  inc('queue_deletes');
  await ch.close();
  inc('channel_closes');
}

async function redeclare(conn) {
  const ch = await conn.createChannel();
  inc('channels');
  counts.channel_numbers_opened = [ch.ch];
  await ch.assertQueue(queue, { durable: false, arguments: { 'x-max-length': 10 } });
  inc('queue_declares');
  const closed = new Promise((resolve) => ch.on('close', resolve));
  ch.on('error', (err) => {
    counts.channel_errors = [{ channel: ch.ch, code: err.code, text: err.message }];
  });
  try {
    await ch.assertQueue(queue, { durable: false, arguments: { 'x-max-length': 20 } });
    throw new Error('the second declare with other arguments was accepted');
  } catch (err) {
    inc('queue_declares');
    counts.exception = err.message;
  }
  await closed;
  const again = await conn.createChannel();
  inc('channels');
  counts.channel_numbers_opened.push(again.ch);
  await again.deleteQueue(queue);
  inc('queue_deletes');
  await again.close();
  inc('channel_closes');
}

async function nack(conn) {
  const ch = await conn.createChannel();
  inc('channels');
  counts.channel_numbers_opened = [ch.ch];
  await ch.assertQueue(queue, { durable: false });
  inc('queue_declares');
  for (let i = 0; i < 3; i++) {
    const body = Buffer.from(`amqplib rejected ${i}`);
    ch.sendToQueue(queue, body);
    inc('publishes');
    inc('body_size', body.length);
  }
  const got = [];
  let arrived;
  const all = new Promise((resolve) => { arrived = resolve; });
  const ok = await ch.consume(queue, (msg) => {
    got.push(msg);
    inc('deliveries');
    if (got.length === 3) arrived();
  }, { noAck: false });
  inc('consumers');
  counts.consumer_tag = ok.consumerTag;
  await all;
  counts.delivery_tags = got.map((m) => m.fields.deliveryTag);
  ch.nack(got[0], false, false); // tag 1, requeue false: dropped (no dead-letter exchange)
  inc('nacks');
  ch.nackAll(false); // basic.nack delivery-tag 0 multiple requeue false: tags 2-3 dropped
  inc('nacks');
  counts.nacked_messages = 3;
  counts.nacks_requeue = 0;
  counts.max_unacked = 3;
  await ch.cancel(ok.consumerTag);
  inc('cancels');
  const deleted = await ch.deleteQueue(queue);
  inc('queue_deletes');
  counts.queue_message_count_at_delete = deleted.messageCount;
  await ch.close();
  inc('channel_closes');
}

async function main() {
  const conn = await amqp.connect(
    { protocol: 'amqp', hostname: '127.0.0.1', port: Number(port), username: 'guest', password: 'guest' },
    { clientProperties: { connection_name: `amqpscope amqplib ${mode}` } },
  );
  inc('connections');
  counts.negotiated_heartbeat = conn.connection.heartbeat;
  counts.negotiated_frame_max = conn.connection.frameMax;
  if (mode === 'happy') await happy(conn);
  else if (mode === 'redeclare') await redeclare(conn);
  else if (mode === 'nack') await nack(conn);
  else throw new Error(`unknown mode ${mode}`);
  await conn.close();
  inc('connection_closes');
  process.stdout.write(`${JSON.stringify(counts)}\n`);
}

main().catch((err) => {
  process.stderr.write(`${err.stack}\n`);
  process.exit(1);
});
