// The node `amqp10` side of captures/scenarios/peers10.py: run as
//   node amqp10_client.js MODE URL ADDRESS [PAUSE_MS]
// and prints what amqp10 observed as one JSON line on stdout (times are Date.now() / 1000, the
// clock tcpdump stamps packets with). amqp10 fills in its own end's terminus ('localhost': the
// target of a receiver, the source of a sender), which Proton and rhea leave empty.
//   happy:  send 3 messages to ADDRESS (each settled by the broker), receive them back with
//           amqp10's default credit policy, disconnect.
//   refresh: as happy, with a credit quantum of 4: amqp10 refreshes the receiver's credit
//           (a flow) when less than half is left, here after the third message, just before
//           it disconnects.
//   starved: send 20; a receiver whose credit policy grants 5 when it attaches and never by
//           itself; it takes the 5, then grants nothing for PAUSE_MS while 15 wait, grants 10,
//           takes them, grants the last 5 at once, takes them, disconnects.
//   never:  send 5; a receiver whose credit policy grants nothing; it waits PAUSE_MS with no
//           credit (the 5 waiting on the node), then disconnects.
'use strict';
const amqp = require('amqp10');
const DeliveryState = require('amqp10/lib/types/delivery_state');

const [mode, url, address, pauseArg] = process.argv.slice(2);
const pause = Number(pauseArg || 0);
const now = () => Date.now() / 1000;
const counts = {mode, address, transfers_sent: 0, sender_outcomes: {}, transfers_received: 0,
  credit_granted: [], times: {}};
const timer = setTimeout(() => fail('timed out'), 30000);
// defaultSubjects off: an address such as /amq/queue/NAME is the node's whole address
const client = new amqp.Client(amqp.Policy.merge({defaultSubjects: false}, amqp.Policy.DefaultPolicy));

function finish() {
  clearTimeout(timer);
  counts.times.disconnect = now();
  client.disconnect().then(() => {
    process.stdout.write(JSON.stringify(counts) + '\n');
    process.exit(0);
  });
}

function fail(why) {
  counts.failure = String(why);
  process.stdout.write(JSON.stringify(counts) + '\n');
  process.exit(1);
}

function sendAll(sender, count) {
  const sends = [];
  for (let i = 0; i < count; i++) {
    sends.push(sender.send({body: `amqp10 ${mode} ${i}`, properties: {messageId: `m${i}`}}));
    counts.transfers_sent++;
  }
  return Promise.all(sends).then((states) => {
    for (const state of states) {
      const kind = Object.keys(DeliveryState).find((name) => state instanceof DeliveryState[name]);
      const key = kind ? kind.toLowerCase() : 'unknown';
      counts.sender_outcomes[key] = (counts.sender_outcomes[key] || 0) + 1;
    }
  });
}

function grant(link, credit) {
  counts.credit_granted.push({credit, at: now()});
  link.addCredits(credit);
}

// a credit policy that grants `initial` when the link attaches and nothing by itself after
const manual = (initial) => ({credit: (link, options) => {
  if (options && options.initial && initial > 0) grant(link, initial);
}});

function happy(policy) {
  return client.createSender(address)
    .then((sender) => sendAll(sender, 3))
    .then(() => client.createReceiver(address, policy))
    .then((receiver) => receiver.on('message', () => {
      if (++counts.transfers_received === 3) finish();
    }));
}

function starved() {
  const total = 20;
  return client.createSender(address)
    .then((sender) => sendAll(sender, total))
    .then(() => client.createReceiver(address, manual(5)))
    .then((receiver) => receiver.on('message', () => {
      const received = ++counts.transfers_received;
      if (received === 5) {
        counts.times.starved = now(); // its last credit used, 15 waiting
        counts.waiting_when_starved = total - received;
        setTimeout(() => {
          counts.times.granted = now();
          grant(receiver, 10);
        }, pause);
      } else if (received === 15) {
        grant(receiver, 5); // at once: no starvation
      } else if (received === total) {
        finish();
      }
      if (received === 6) counts.times.first_after_grant = now();
    }));
}

function never() {
  const total = 5;
  return client.createSender(address)
    .then((sender) => sendAll(sender, total))
    .then(() => client.createReceiver(address, manual(0)))
    .then((receiver) => {
      counts.times.receiver_attached = now();
      counts.waiting = total;
      receiver.on('message', () => { counts.transfers_received++; });
      setTimeout(finish, pause);
    });
}

const modes = {happy: () => happy(), refresh: () => happy({creditQuantum: 4}), starved, never};
client.connect(url)
  .then(() => {
    counts.connections_opened = 1; // amqp10 resolves connect once the broker's open came
    return modes[mode]();
  })
  .catch(fail);
