// The rhea side of captures/scenarios/logs.py (log-rhea-broker): run with DEBUG=rhea:frames so
// rhea's frame trace goes to stderr; prints what rhea observed as one JSON line on stdout.
// Sends 6 messages to ADDRESS, then receives them back, accepting 5 and rejecting the last.
'use strict';
const rhea = require('rhea');

const address = process.argv[2];
const count = 6;
const counts = {transfers_sent: 0, transfers_received: 0, sender_outcomes: {}, receiver_outcomes: {}};
const container = rhea.create_container({id: 'amqpscope-log-rhea-broker'});
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
  ctx.connection.open_sender(address);
});
container.on('sendable', (ctx) => {
  while (ctx.sender.sendable() && counts.transfers_sent < count) {
    const i = counts.transfers_sent;
    ctx.sender.send({message_id: 'r' + i, body: 'rhea message ' + i, application_properties: {i: i}});
    counts.transfers_sent++;
  }
});
const settled = (kind) => (ctx) => {
  tally(counts.sender_outcomes, kind);
  const done = Object.values(counts.sender_outcomes).reduce((a, b) => a + b, 0);
  if (done === count) {
    ctx.sender.close();
    ctx.connection.open_receiver(address);
  }
};
container.on('accepted', settled('accepted'));
container.on('rejected', settled('rejected'));
container.on('released', settled('released'));
container.on('modified', settled('modified'));
container.on('message', (ctx) => {
  counts.transfers_received++;
  if (counts.transfers_received === count) {
    ctx.delivery.reject();
    tally(counts.receiver_outcomes, 'rejected');
    ctx.receiver.close();
    finish();
  } else {
    ctx.delivery.accept();
    tally(counts.receiver_outcomes, 'accepted');
  }
});
container.on('connection_close', () => process.exit(counts.failure ? 1 : 0));
container.on('error', (e) => { counts.failure = String(e); finish(); });
container.connect({host: '127.0.0.1', port: 5672, username: 'guest', password: 'guest'});
