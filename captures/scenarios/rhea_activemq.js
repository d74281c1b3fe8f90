// The rhea client of captures/scenarios/activemq.py (10-amq-rhea): logs in to ActiveMQ with SASL
// PLAIN, sends COUNT messages to ADDRESS (each settled by the broker), then receives them back on
// a receiver (rhea's default credit window), accepts each and closes the connection. Prints what
// rhea observed as one JSON line on stdout.
'use strict';
const {tally, start, sendUpTo, onSettled} = require('./rhea_run.js');

const [port, user, password, address] = process.argv.slice(2);
const count = 5;
const counts = {transfers_sent: 0, transfers_received: 0, sender_outcomes: {}, receiver_outcomes: {}};
const {container, finish} = start('amqpscope-10-amq-rhea', counts);

container.on('connection_open', (ctx) => {
  counts.connections_opened = 1;
  counts.remote_container_id = ctx.connection.container_id;
  ctx.connection.open_sender(address);
});
container.on('sendable', sendUpTo(counts, count, (i) => ({message_id: 'r' + i, body: 'rhea message ' + i})));
onSettled(container, counts, count, (ctx) => ctx.connection.open_receiver({source: address, autoaccept: false}));
container.on('message', (ctx) => {
  counts.transfers_received++;
  ctx.delivery.accept();
  tally(counts.receiver_outcomes, 'accepted');
  if (counts.transfers_received === count) {
    ctx.receiver.close();
    finish();
  }
});
container.connect({host: '127.0.0.1', port: Number(port), username: user, password: password});
