<?php
// The php-amqplib side of captures/scenarios/clients091.py, run by Debian's php-amqplib under
// php-cli: `php _php_client.php MODE PORT QUEUE`.
//
// MODE happy: declare QUEUE, confirm.select, publish 3 messages and wait for their confirms,
// consume them with manual acks (tag 1 acked alone, tags 2-3 by one multiple ack), cancel, delete
// the queue, close the channel and the connection as php-amqplib closes them.
// LOGIN is the login method php-amqplib is given: AMQPLAIN (its default) or PLAIN. A broker that
// refuses the login (garagemq knows PLAIN alone) ends MODE at once: the refusal is recorded.
// MODE killed: basic.qos prefetch 2, publish 5 messages, consume, take the 2 the prefetch lets
// through and ack neither, then SIGKILL itself (a crashed PHP worker: no close of any kind).
//
// Prints what php-amqplib observed as one JSON line (before the kill, in MODE killed), counts
// named as captures/recorder counts them.

require_once '/usr/share/php/PhpAmqpLib/autoload.php';

use PhpAmqpLib\Connection\AMQPStreamConnection;
use PhpAmqpLib\Message\AMQPMessage;

[$_, $mode, $port, $queue, $login] = $argv;
$counts = [];
function inc(array &$counts, string $key, int $n = 1): void
{
    $counts[$key] = ($counts[$key] ?? 0) + $n;
}

inc($counts, 'connections');
try {
    $conn = new AMQPStreamConnection('127.0.0.1', (int)$port, 'guest', 'guest', '/', false, $login);
} catch (PhpAmqpLib\Exception\AMQPConnectionClosedException $e) {
    // the broker refused the login: php-amqplib answered its connection.close and gave up
    $counts['connection_opened'] = false;
    $counts['connection_errors'] = [['code' => $e->getCode(), 'text' => $e->getMessage()]];
    echo json_encode($counts), "\n";
    exit(0);
}
$counts['negotiated_heartbeat'] = $conn->getHeartbeat();
$ch = $conn->channel();
inc($counts, 'channels');
$counts['channel_numbers_opened'] = [$ch->getChannelId()];
$ch->queue_declare($queue, false, false, false, false);
inc($counts, 'queue_declares');

$got = [];
$onMessage = function (AMQPMessage $message) use (&$got, &$counts): void {
    $got[] = $message;
    inc($counts, 'deliveries');
};

if ($mode === 'happy') {
    $ch->confirm_select();
    $ch->set_ack_handler(function (AMQPMessage $m) use (&$counts): void {
        inc($counts, 'confirms_acked');
    });
    for ($i = 0; $i < 3; $i++) {
        $body = "php-amqplib message $i";
        $ch->basic_publish(new AMQPMessage($body, ['message_id' => "m$i"]), '', $queue);
        inc($counts, 'publishes');
        inc($counts, 'body_size', strlen($body));
    }
    $ch->wait_for_pending_acks(5);
    $tag = $ch->basic_consume($queue, '', false, false, false, false, $onMessage);
    inc($counts, 'consumers');
    $counts['consumer_tag'] = $tag;
    while (count($got) < 3) {
        $ch->wait(null, false, 5);
    }
    $tags = array_map(fn($m) => $m->getDeliveryTag(), $got);
    $counts['delivery_tags'] = $tags;
    $ch->basic_ack($tags[0]);
    inc($counts, 'acks');
    $ch->basic_ack($tags[2], true);
    inc($counts, 'acks');
    inc($counts, 'acks_multiple');
    $counts['acked_messages'] = 3;
    $counts['max_unacked'] = 3;
    $ch->basic_cancel($tag);
    inc($counts, 'cancels');
    $ch->queue_delete($queue);
    inc($counts, 'queue_deletes');
    $ch->close();
    inc($counts, 'channel_closes');
    $conn->close();
    inc($counts, 'connection_closes');
    echo json_encode($counts), "\n";
} else {
    $ch->basic_qos(0, 2, false);
    $counts['prefetch_count'] = 2;
    for ($i = 0; $i < 5; $i++) {
        $body = "php-amqplib message $i";
        $ch->basic_publish(new AMQPMessage($body), '', $queue);
        inc($counts, 'publishes');
        inc($counts, 'body_size', strlen($body));
    }
    $tag = $ch->basic_consume($queue, '', false, false, false, false, $onMessage);
    inc($counts, 'consumers');
    $counts['consumer_tag'] = $tag;
    while (count($got) < 2) {
        $ch->wait(null, false, 5);
    }
    try {
        $ch->wait(null, false, 1); // nothing more comes: the prefetch of 2 is full
    } catch (PhpAmqpLib\Exception\AMQPTimeoutException $e) {
        $counts['nothing_more_in_s'] = 1;
    }
    $counts['max_unacked'] = 2;
    $counts['unacked_when_killed'] = 2;
    $counts['killed_with'] = 'SIGKILL';
    echo json_encode($counts), "\n";
    fflush(STDOUT);
    posix_kill(getmypid(), SIGKILL);
}
