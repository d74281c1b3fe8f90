// The Go side of captures/scenarios/clients091_go_node.py: the official Go client,
// github.com/rabbitmq/amqp091-go (or its predecessor github.com/streadway/amqp: the same program
// built against either, see clients091_go_node.go_binary), built by Debian's golang-go with
// GO111MODULE=off GOPATH=/usr/share/gocode: `go_client MODE PORT QUEUE`.
//
// MODE happy: Confirm mode (confirm.select) with NotifyPublish, Qos prefetch 4, declare QUEUE,
// publish 4 messages and read their 4 confirmations; Consume with manual acks: tag 1 acked alone,
// tag 4 acked with multiple (2-4); Cancel, delete the queue, close the channel and the connection.
// MODE return: Confirm mode, NotifyReturn; publish mandatory to the default exchange with a
// routing key no queue has: the broker sends basic.return (312 NO_ROUTE) and then confirms it.
// MODE cancel: consume QUEUE (manual acks, one message delivered and acked), and a second channel
// deletes the queue: the broker cancels the consumer (basic.cancel, the consumer_cancel_notify
// capability the client advertises), which the client sees on NotifyCancel and on its delivery
// channel closing; the channels and the connection are closed.
//
// Prints what the client observed as one JSON line: counts named as captures/recorder counts them.
package main

import (
	"encoding/json"
	"fmt"
	"os"
	"strconv"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

const messages = 4

var counts = map[string]interface{}{}

func inc(key string, n int) {
	v, _ := counts[key].(int)
	counts[key] = v + n
}

func must(err error, what string) {
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", what, err)
		os.Exit(1)
	}
}

func happy(conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	must(err, "channel")
	inc("channels", 1)
	counts["channel_numbers_opened"] = []int{1}
	must(ch.Confirm(false), "confirm")
	inc("confirm_selects", 1)
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, messages))
	must(ch.Qos(messages, 0, false), "qos")
	counts["prefetch_count"] = messages
	_, err = ch.QueueDeclare(queue, false, false, false, false, nil)
	must(err, "declare")
	inc("queue_declares", 1)
	for i := 0; i < messages; i++ {
		body := []byte(fmt.Sprintf("amqp091-go message %d", i))
		err = ch.Publish("", queue, false, false, amqp.Publishing{Body: body, MessageId: fmt.Sprintf("m%d", i)})
		must(err, "publish")
		inc("publishes", 1)
		inc("body_size", len(body))
	}
	acked := 0
	for i := 0; i < messages; i++ {
		c := <-confirms
		if c.Ack {
			acked++
		}
	}
	counts["confirms_acked"] = acked
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	must(err, "consume")
	inc("consumers", 1)
	var got []amqp.Delivery
	for len(got) < messages {
		select {
		case d := <-deliveries:
			got = append(got, d)
			inc("deliveries", 1)
		case <-time.After(5 * time.Second):
			must(fmt.Errorf("%d of %d", len(got), messages), "deliveries")
		}
	}
	counts["consumer_tag"] = got[0].ConsumerTag
	tags := []uint64{}
	for _, d := range got {
		tags = append(tags, d.DeliveryTag)
	}
	counts["delivery_tags"] = tags
	must(got[0].Ack(false), "ack")
	inc("acks", 1)
	must(got[messages-1].Ack(true), "ack multiple")
	inc("acks", 1)
	inc("acks_multiple", 1)
	counts["acked_messages"] = messages
	counts["max_unacked"] = messages
	must(ch.Cancel(got[0].ConsumerTag, false), "cancel")
	inc("cancels", 1)
	_, err = ch.QueueDelete(queue, false, false, false)
	must(err, "delete")
	inc("queue_deletes", 1)
	must(ch.Close(), "channel close")
	inc("channel_closes", 1)
}

func returned(conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	must(err, "channel")
	inc("channels", 1)
	counts["channel_numbers_opened"] = []int{1}
	must(ch.Confirm(false), "confirm")
	inc("confirm_selects", 1)
	confirms := ch.NotifyPublish(make(chan amqp.Confirmation, 1))
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	key := queue + ".nobody"
	body := []byte("to no queue")
	err = ch.Publish("", key, true, false, amqp.Publishing{Body: body})
	must(err, "publish")
	inc("publishes", 1)
	inc("body_size", len(body))
	select {
	case r := <-returns:
		inc("returns", 1)
		counts["return_details"] = []map[string]interface{}{
			{"reply_code": r.ReplyCode, "reply_text": r.ReplyText, "routing_key": r.RoutingKey},
		}
	case <-time.After(5 * time.Second):
		must(fmt.Errorf("no basic.return"), "return")
	}
	c := <-confirms
	if c.Ack {
		counts["confirms_acked"] = 1
	} else {
		counts["confirms_nacked"] = 1
	}
	must(ch.Close(), "channel close")
	inc("channel_closes", 1)
}

func cancelled(conn *amqp.Connection, queue string) {
	ch, err := conn.Channel()
	must(err, "channel")
	inc("channels", 1)
	_, err = ch.QueueDeclare(queue, false, false, false, false, nil)
	must(err, "declare")
	inc("queue_declares", 1)
	body := []byte("one message")
	must(ch.Publish("", queue, false, false, amqp.Publishing{Body: body}), "publish")
	inc("publishes", 1)
	inc("body_size", len(body))
	cancels := ch.NotifyCancel(make(chan string, 1))
	deliveries, err := ch.Consume(queue, "", false, false, false, false, nil)
	must(err, "consume")
	inc("consumers", 1)
	d := <-deliveries
	inc("deliveries", 1)
	counts["consumer_tag"] = d.ConsumerTag
	must(d.Ack(false), "ack")
	inc("acks", 1)
	other, err := conn.Channel()
	must(err, "channel 2")
	inc("channels", 1)
	counts["channel_numbers_opened"] = []int{1, 2}
	_, err = other.QueueDelete(queue, false, false, false)
	must(err, "delete")
	inc("queue_deletes", 1)
	select {
	case tag := <-cancels:
		counts["cancelled_by_broker"] = []string{tag}
	case <-time.After(5 * time.Second):
		must(fmt.Errorf("no basic.cancel"), "cancel")
	}
	if _, open := <-deliveries; open {
		must(fmt.Errorf("a delivery after the cancel"), "deliveries")
	}
	must(other.Close(), "channel 2 close")
	must(ch.Close(), "channel close")
	inc("channel_closes", 2)
}

func main() {
	mode, port, queue := os.Args[1], os.Args[2], os.Args[3]
	if _, err := strconv.Atoi(port); err != nil {
		must(err, "port")
	}
	props := amqp.Table{"connection_name": "amqpscope go " + mode}
	conn, err := amqp.DialConfig("amqp://guest:guest@127.0.0.1:"+port+"/", amqp.Config{Properties: props})
	must(err, "dial")
	inc("connections", 1)
	counts["negotiated_heartbeat"] = int(conn.Config.Heartbeat / time.Second)
	counts["negotiated_frame_max"] = conn.Config.FrameSize
	switch mode {
	case "happy":
		happy(conn, queue)
	case "return":
		returned(conn, queue)
	case "cancel":
		cancelled(conn, queue)
	default:
		must(fmt.Errorf("unknown mode %s", mode), "mode")
	}
	must(conn.Close(), "connection close")
	inc("connection_closes", 1)
	out, err := json.Marshal(counts)
	must(err, "json")
	fmt.Println(string(out))
}
