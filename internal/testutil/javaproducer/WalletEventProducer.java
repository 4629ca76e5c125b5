// A Java service publishing wallet events to RocketMQ as the official Java client's users do:
// DefaultMQProducer's orderly send with SelectMessageQueueByHash and the user id as the key,
// which is what Spring's rocketMQTemplate.syncSendOrderly(topic, message, hashKey) does, and
// a body written by hand from the event's fields, as a Java producer's JSON mapper writes it
// (occurred_at as java.time.Instant writes itself). It sets no property of its own: the
// message has tags and keys only when the input line gives them.
//
// Arguments: name server, access key, secret key, topic, producer group. Input: one event a
// line, tab-separated: event_id user_id seq kind amount currency balance_after saga_id phone
// locale epoch epoch_since tags keys (tags and keys may be empty). Output: one line a message
// sent, "<broker> <queue id> <message id>".
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.nio.charset.StandardCharsets;
import java.time.Instant;

import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash;
import org.apache.rocketmq.common.message.Message;

public final class WalletEventProducer {
    private WalletEventProducer() {}

    private static String quote(String s) {
        StringBuilder b = new StringBuilder("\"");
        for (char c : s.toCharArray()) {
            if (c == '"' || c == '\\') {
                b.append('\\');
            }
            b.append(c);
        }
        return b.append('"').toString();
    }

    private static String body(String[] f) {
        return "{\"v\":2"
            + ",\"event_id\":" + Long.parseLong(f[0])
            + ",\"user_id\":" + Long.parseLong(f[1])
            + ",\"seq\":" + Long.parseLong(f[2])
            + ",\"kind\":" + quote(f[3])
            + ",\"amount\":" + Long.parseLong(f[4])
            + ",\"currency\":" + quote(f[5])
            + ",\"balance_after\":" + Long.parseLong(f[6])
            + ",\"saga_id\":" + Long.parseLong(f[7])
            + ",\"phone\":" + quote(f[8])
            + ",\"locale\":" + quote(f[9])
            + ",\"occurred_at\":" + quote(Instant.now().toString())
            + ",\"epoch\":" + Long.parseLong(f[10])
            + ",\"epoch_since\":" + Long.parseLong(f[11])
            + "}";
    }

    public static void main(String[] args) throws Exception {
        if (args.length != 5) {
            System.err.println("usage: WalletEventProducer NAMESRV ACCESS_KEY SECRET_KEY TOPIC GROUP < events");
            System.exit(2);
        }
        DefaultMQProducer producer = new DefaultMQProducer(args[4], new AclClientRPCHook(new SessionCredentials(args[1], args[2])));
        producer.setNamesrvAddr(args[0]);
        producer.setVipChannelEnabled(false);
        producer.setSendMsgTimeout(10_000);
        producer.start();
        try {
            BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
            for (String line; (line = in.readLine()) != null;) {
                if (line.isEmpty()) {
                    continue;
                }
                String[] f = line.split("\t", -1);
                if (f.length != 14) {
                    throw new IllegalArgumentException("want 14 tab-separated fields, got " + f.length + ": " + line);
                }
                Message msg = new Message(args[3], body(f).getBytes(StandardCharsets.UTF_8));
                if (!f[12].isEmpty()) {
                    msg.setTags(f[12]);
                }
                if (!f[13].isEmpty()) {
                    msg.setKeys(f[13]);
                }
                SendResult r = producer.send(msg, new SelectMessageQueueByHash(), f[1]);
                if (r.getSendStatus() != SendStatus.SEND_OK) {
                    throw new IllegalStateException("send status " + r.getSendStatus() + " for " + line);
                }
                System.out.println(r.getMessageQueue().getBrokerName() + " " + r.getMessageQueue().getQueueId() + " " + r.getMsgId());
                System.out.flush();
            }
        } finally {
            producer.shutdown();
        }
    }
}
