// The rhea client of captures/scenarios/activemq.py (10-amq-rhea): logs in to ActiveMQ with SASL
// PLAIN, sends COUNT messages to ADDRESS (each settled by the broker), then receives them back on
// a receiver (rhea's default credit window), accepts each and closes the connection. Prints what
// rhea observed as one JSON line on stdout.
'use strict';
const rhea = require('rhea');

const [port, user, password, address] = process.argv.slice(2);
const count = 5;
const counts = {transfers_sent: 0, transfers_received: 0, sender_outcomes: {}, receiver_outcomes: {}};
const container = rhea.create_container({id: 'amqpscope-10-amq-rhea'});
const tally = (bucket, key) => { bucket[key] = (bucket[key] || 0) + 1; };
const timer = setTimeout(() => { counts.failure = 'timed out'; finish(); }, 20000);
let connection = null;

function finish() {
  clearTimeout(timer);
  process.stdout.write(JSON.stringify(counts) + '\n');
  if (connection) connection.close();
}

container.on('connection_open', (ctx) => {
  connection = ctx.connection;
  counts.connections_opened = 1;
  counts.remote_container_id = ctx.connection.container_id;
  ctx.connection.open_sender(address);
});
container.on('sendable', (ctx) => {
  while (ctx.sender.sendable() && counts.transfers_sent < count) {
    const i = counts.transfers_sent;
    ctx.sender.send({message_id: 'r' + i, body: 'rhea message ' + i});
    counts.transfers_sent++;
  }
});
const settled = (kind) => (ctx) => {
  tally(counts.sender_outcomes, kind);
  const done = Object.values(counts.sender_outcomes).reduce((a, b) => a + b, 0);
  if (done === count) {
    ctx.sender.close();
    ctx.connection.open_receiver({source: address, autoaccept: false});
  }
};
container.on('accepted', settled('accepted'));
container.on('rejected', settled('rejected'));
container.on('released', settled('released'));
container.on('modified', settled('modified'));
container.on('message', (ctx) => {
  counts.transfers_received++;
  ctx.delivery.accept();
  tally(counts.receiver_outcomes, 'accepted');
  if (counts.transfers_received === count) {
    ctx.receiver.close();
    finish();
  }
});
container.on('connection_close', () => process.exit(counts.failure ? 1 : 0));
container.on('error', (e) => { counts.failure = String(e); finish(); });
container.connect({host: '127.0.0.1', port: Number(port), username: user, password: password});
