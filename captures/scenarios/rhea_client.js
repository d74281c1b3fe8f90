// The rhea side of captures/scenarios/logs.py (log-rhea-broker): run with DEBUG=rhea:frames so
// rhea's frame trace goes to stderr; prints what rhea observed as one JSON line on stdout.
// Sends 6 messages to ADDRESS, then receives them back, accepting 5 and rejecting the last.
'use strict';
const {tally, start, sendUpTo, onSettled} = require('./rhea_run.js');

const address = process.argv[2];
const count = 6;
const counts = {transfers_sent: 0, transfers_received: 0, sender_outcomes: {}, receiver_outcomes: {}};
const {container, finish} = start('amqpscope-log-rhea-broker', counts);

container.on('connection_open', (ctx) => ctx.connection.open_sender(address));
container.on('sendable', sendUpTo(counts, count,
  (i) => ({message_id: 'r' + i, body: 'rhea message ' + i, application_properties: {i: i}})));
onSettled(container, counts, count, (ctx) => ctx.connection.open_receiver(address));
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
container.connect({host: '127.0.0.1', port: 5672, username: 'guest', password: 'guest'});
