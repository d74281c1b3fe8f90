// What the rhea clients of captures/scenarios share (rhea_client.js and rhea_starved.js for
// logs.py, rhea_activemq.js for activemq.py), required from the same folder: a container whose
// counts are printed as one JSON line on stdout when the run ends (or at an error, or after 20 s),
// the sender's loop, and the sender's tally of the outcomes the broker gives.
'use strict';
const rhea = require('rhea');

const tally = (bucket, key) => { bucket[key] = (bucket[key] || 0) + 1; };

// A container named `id`; its `finish` prints `counts` and closes the connection, whose close
// ends the process (status 1 when `counts.failure` says why).
function start(id, counts) {
  const container = rhea.create_container({id: id});
  let connection = null;
  const timer = setTimeout(() => { counts.failure = 'timed out'; finish(); }, 20000);
  function finish() {
    clearTimeout(timer);
    process.stdout.write(JSON.stringify(counts) + '\n');
    if (connection) connection.close();
  }
  container.on('connection_open', (ctx) => { connection = ctx.connection; });
  container.on('connection_close', () => process.exit(counts.failure ? 1 : 0));
  container.on('error', (e) => { counts.failure = String(e); finish(); });
  return {container: container, finish: finish};
}

// A 'sendable' handler: while the sender has credit, send message(i) until `count` are sent.
function sendUpTo(counts, count, message) {
  return (ctx) => {
    while (ctx.sender.sendable() && counts.transfers_sent < count) {
      ctx.sender.send(message(counts.transfers_sent));
      counts.transfers_sent++;
    }
  };
}

// Tally each outcome the broker gives the sender in counts.sender_outcomes; once `count` are
// settled, close the sender and call then(ctx).
function onSettled(container, counts, count, then) {
  const settled = (kind) => (ctx) => {
    tally(counts.sender_outcomes, kind);
    const done = Object.values(counts.sender_outcomes).reduce((a, b) => a + b, 0);
    if (done === count) {
      ctx.sender.close();
      then(ctx);
    }
  };
  for (const kind of ['accepted', 'rejected', 'released', 'modified']) container.on(kind, settled(kind));
}

module.exports = {tally: tally, start: start, sendUpTo: sendUpTo, onSettled: onSettled};
