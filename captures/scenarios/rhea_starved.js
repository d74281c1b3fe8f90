// The rhea side of captures/scenarios/logs.py (log-rhea-starved): run with DEBUG=rhea:frames so
// rhea's frame trace goes to stderr; prints what rhea observed as one JSON line on stdout.
// Sends 20 messages to ADDRESS; a receiver that manages its own credit (credit_window 0) grants
// 5, accepts the 5 it gets, and grants no more: the link starves with 15 messages waiting, until
// the connection closes 2 seconds later.
'use strict';
const {start, sendUpTo} = require('./rhea_run.js');

const address = process.argv[2];
const count = 20;
const granted = 5;
const counts = {transfers_sent: 0, transfers_received: 0, credit_granted: 0, sender_accepted: 0};
const {container, finish} = start('amqpscope-log-rhea-starved', counts);

container.on('connection_open', (ctx) => ctx.connection.open_sender(address));
container.on('sendable', sendUpTo(counts, count, (i) => ({message_id: 's' + i, body: 'starved ' + i})));
container.on('accepted', (ctx) => {
  counts.sender_accepted++;
  if (counts.sender_accepted === count) {
    ctx.sender.close();
    const receiver = ctx.connection.open_receiver({source: address, credit_window: 0, autoaccept: false});
    receiver.once('receiver_open', () => { receiver.add_credit(granted); counts.credit_granted += granted; });
  }
});
container.on('message', (ctx) => {
  counts.transfers_received++;
  ctx.delivery.accept();
  if (counts.transfers_received === granted) setTimeout(finish, 2000);  // starved: no more credit
});
container.connect({host: '127.0.0.1', port: 5672, username: 'guest', password: 'guest'});
