// SelectorCheck runs the Java RocketMQ client's own queue selection, for the Go tests to
// compare against: SelectMessageQueueByHash (what Spring's syncSendOrderly(topic, msg,
// hashKey) uses) over the publish list the client builds from a route.
//
// Keys are read from stdin, one per line (UTF-8); one answer line per key on stdout, each
// starting "= " (the client's logging may write there too).
//   hash N1,N2,...            the index SelectMessageQueueByHash picks among N queues, for each N
//   route                     the first stdin line is a route's queue datas, in the order the name
//                             server lists them: broker:writeQueues:perm,… (every broker has a
//                             master); prints the client's publish list, then broker/id per key
//   send NAMESRV TOPIC GROUP  sends one message per key with a real producer and the selector;
//                             prints where the broker stored it, broker/id
import java.io.BufferedReader;
import java.io.BufferedWriter;
import java.io.InputStreamReader;
import java.io.OutputStreamWriter;
import java.io.PrintWriter;
import java.nio.charset.StandardCharsets;
import java.util.ArrayList;
import java.util.HashMap;
import java.util.List;

import org.apache.rocketmq.client.impl.factory.MQClientInstance;
import org.apache.rocketmq.acl.common.AclClientRPCHook;
import org.apache.rocketmq.acl.common.SessionCredentials;
import org.apache.rocketmq.client.producer.DefaultMQProducer;
import org.apache.rocketmq.client.producer.SendResult;
import org.apache.rocketmq.client.producer.SendStatus;
import org.apache.rocketmq.client.producer.selector.SelectMessageQueueByHash;
import org.apache.rocketmq.common.message.Message;
import org.apache.rocketmq.common.message.MessageQueue;
import org.apache.rocketmq.remoting.protocol.route.BrokerData;
import org.apache.rocketmq.remoting.protocol.route.QueueData;
import org.apache.rocketmq.remoting.protocol.route.TopicRouteData;

public class SelectorCheck {
    public static void main(String[] args) throws Exception {
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in, StandardCharsets.UTF_8));
        PrintWriter out = new PrintWriter(new BufferedWriter(new OutputStreamWriter(System.out, StandardCharsets.UTF_8)));
        SelectMessageQueueByHash selector = new SelectMessageQueueByHash();
        Message msg = new Message("t", new byte[0]);
        String key;
        switch (args[0]) {
            case "hash": {
                List<List<MessageQueue>> lists = new ArrayList<>();
                for (String n : args[1].split(",")) {
                    List<MessageQueue> mqs = new ArrayList<>();
                    for (int i = 0; i < Integer.parseInt(n); i++) {
                        mqs.add(new MessageQueue("t", "broker-a", i));
                    }
                    lists.add(mqs);
                }
                while ((key = in.readLine()) != null) {
                    StringBuilder line = new StringBuilder();
                    for (List<MessageQueue> mqs : lists) {
                        if (line.length() > 0) {
                            line.append(' ');
                        }
                        line.append(mqs.indexOf(selector.select(mqs, msg, key)));
                    }
                    out.println("= " + line);
                }
                break;
            }
            case "route": {
                List<QueueData> qds = new ArrayList<>();
                List<BrokerData> bds = new ArrayList<>();
                for (String spec : in.readLine().split(",")) {
                    String[] f = spec.split(":");
                    QueueData qd = new QueueData();
                    qd.setBrokerName(f[0]);
                    qd.setReadQueueNums(Integer.parseInt(f[1]));
                    qd.setWriteQueueNums(Integer.parseInt(f[1]));
                    qd.setPerm(Integer.parseInt(f[2]));
                    qds.add(qd);
                    HashMap<Long, String> addrs = new HashMap<>();
                    addrs.put(0L, "127.0.0.1:10911");
                    bds.add(new BrokerData("DefaultCluster", f[0], addrs));
                }
                TopicRouteData route = new TopicRouteData();
                route.setQueueDatas(qds);
                route.setBrokerDatas(bds);
                List<MessageQueue> mqs = MQClientInstance.topicRouteData2TopicPublishInfo("t", route).getMessageQueueList();
                StringBuilder list = new StringBuilder();
                for (MessageQueue mq : mqs) {
                    if (list.length() > 0) {
                        list.append(' ');
                    }
                    list.append(name(mq));
                }
                out.println("= " + list);
                while ((key = in.readLine()) != null) {
                    out.println("= " + name(selector.select(mqs, msg, key)));
                }
                break;
            }
            case "send": {
                // Signed as the broker's access control wants, when the credentials are given
                // (ROCKETMQ_ACCESS_KEY / ROCKETMQ_SECRET_KEY in the environment).
                String ak = System.getenv("ROCKETMQ_ACCESS_KEY"), sk = System.getenv("ROCKETMQ_SECRET_KEY");
                DefaultMQProducer producer = ak == null || ak.isEmpty()
                    ? new DefaultMQProducer(args[3])
                    : new DefaultMQProducer(args[3], new AclClientRPCHook(new SessionCredentials(ak, sk)));
                producer.setNamesrvAddr(args[1]);
                producer.setInstanceName(args[3]);
                // The check is where each message lands, not how fast: a cold JVM on a loaded
                // machine outlived the client's default 3 s send timeout
                // (RemotingTimeoutException at load average 13 on 2 cores).
                producer.setSendMsgTimeout(30_000);
                producer.start();
                try {
                    while ((key = in.readLine()) != null) {
                        Message m = new Message(args[2], "java", key, key.getBytes(StandardCharsets.UTF_8));
                        SendResult r = producer.send(m, selector, key);
                        if (r.getSendStatus() != SendStatus.SEND_OK) {
                            throw new IllegalStateException("send of " + key + ": " + r.getSendStatus());
                        }
                        out.println("= " + name(r.getMessageQueue()));
                    }
                } finally {
                    producer.shutdown();
                }
                break;
            }
            default:
                throw new IllegalArgumentException("unknown mode " + args[0]);
        }
        out.flush();
    }

    private static String name(MessageQueue mq) {
        return mq.getBrokerName() + "/" + mq.getQueueId();
    }
}
