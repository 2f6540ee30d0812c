package oncelog.javacheck;

import java.time.Duration;
import java.util.ArrayList;
import java.util.Collection;
import java.util.HashMap;
import java.util.List;
import java.util.Map;
import java.util.Properties;
import java.util.Set;
import java.util.concurrent.ExecutionException;
import java.util.function.Supplier;
import org.apache.kafka.clients.admin.Admin;
import org.apache.kafka.clients.admin.AdminClientConfig;
import org.apache.kafka.clients.admin.AbortTransactionSpec;
import org.apache.kafka.clients.admin.AlterConfigOp;
import org.apache.kafka.clients.admin.ConfigEntry;
import org.apache.kafka.clients.admin.ConsumerGroupDescription;
import org.apache.kafka.clients.admin.NewTopic;
import org.apache.kafka.clients.admin.ProducerState;
import org.apache.kafka.clients.admin.TransactionDescription;
import org.apache.kafka.clients.admin.TransactionListing;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.consumer.ConsumerRecord;
import org.apache.kafka.clients.consumer.KafkaConsumer;
import org.apache.kafka.clients.consumer.OffsetAndMetadata;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.clients.producer.ProducerRecord;
import org.apache.kafka.clients.producer.RecordMetadata;
import org.apache.kafka.common.TopicPartition;
import org.apache.kafka.common.config.ConfigResource;
import org.apache.kafka.common.serialization.StringDeserializer;
import org.apache.kafka.common.serialization.StringSerializer;

/**
 * The Java client (kafka-clients) against a broker: producer (idempotent, transactional), consumer (read_committed,
 * a group, sendOffsetsToTransaction) and admin (topics, configs, groups, transactions), in one JVM start.
 *
 * <p>Usage: {@code ClientCheck BOOTSTRAP PREFIX}. Prints one {@code name<TAB>value} line per observation on stdout;
 * the pytest driver (tests/interop/test_java_clients.py) asserts them, so this program decides nothing itself. Topic
 * and transactional ids start with PREFIX so that runs never share state.
 */
public final class ClientCheck {
    private static final Duration POLL = Duration.ofMillis(200);
    private static final long DEADLINE_MS = 60_000;

    private final String bootstrap;
    private final String prefix;

    private ClientCheck(String bootstrap, String prefix) {
        this.bootstrap = bootstrap;
        this.prefix = prefix;
    }

    public static void main(String[] args) throws Exception {
        ClientCheck check = new ClientCheck(args[0], args[1]);
        try (Admin admin = Admin.create(check.adminProps())) {
            check.topics(admin);
            check.configs(admin);
            check.idempotent();
            check.transactional(admin);
            check.copier(admin);
            check.abortHanging(admin);
        }
        System.out.println("done\ttrue");
    }

    private static void report(String name, Object value) {
        System.out.println(name + "\t" + value);
        System.out.flush();
    }

    private String topic(String name) {
        return prefix + "-" + name;
    }

    private Properties adminProps() {
        Properties props = new Properties();
        props.put(AdminClientConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        return props;
    }

    private Properties producerProps(String transactionalId) {
        Properties props = new Properties();
        props.put(ProducerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ProducerConfig.KEY_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.VALUE_SERIALIZER_CLASS_CONFIG, StringSerializer.class.getName());
        props.put(ProducerConfig.ENABLE_IDEMPOTENCE_CONFIG, "true");
        props.put(ProducerConfig.ACKS_CONFIG, "all");
        if (transactionalId != null) {
            props.put(ProducerConfig.TRANSACTIONAL_ID_CONFIG, transactionalId);
        }
        return props;
    }

    private Properties consumerProps(String groupId, String isolation) {
        Properties props = new Properties();
        props.put(ConsumerConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(ConsumerConfig.KEY_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.VALUE_DESERIALIZER_CLASS_CONFIG, StringDeserializer.class.getName());
        props.put(ConsumerConfig.ISOLATION_LEVEL_CONFIG, isolation);
        props.put(ConsumerConfig.AUTO_OFFSET_RESET_CONFIG, "earliest");
        props.put(ConsumerConfig.ENABLE_AUTO_COMMIT_CONFIG, "false");
        if (groupId != null) {
            props.put(ConsumerConfig.GROUP_ID_CONFIG, groupId);
        }
        return props;
    }

    /** Every value of one partition from offset 0 up to the consumer's end offset under ``isolation``. */
    private List<String> readAll(TopicPartition tp, String isolation) {
        List<String> values = new ArrayList<>();
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(null, isolation))) {
            consumer.assign(List.of(tp));
            consumer.seekToBeginning(List.of(tp));
            long end = consumer.endOffsets(List.of(tp)).get(tp);
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (consumer.position(tp) < end && System.currentTimeMillis() < deadline) {
                for (ConsumerRecord<String, String> record : consumer.poll(POLL)) {
                    values.add(record.value());
                }
            }
        }
        return values;
    }

    /** The end offset a read_committed consumer sees (the last stable offset). */
    private long lastStableOffset(TopicPartition tp) {
        try (KafkaConsumer<String, String> consumer =
                new KafkaConsumer<>(consumerProps(null, "read_committed"))) {
            return consumer.endOffsets(List.of(tp)).get(tp);
        }
    }

    /** Sleeps a little between two reads; always true (for use in a loop condition). */
    private static boolean pause() {
        try {
            Thread.sleep(100);
        } catch (InterruptedException e) {
            Thread.currentThread().interrupt();
        }
        return true;
    }

    private static String errorName(Supplier<Object> call) {
        try {
            call.get();
            return "none";
        } catch (RuntimeException e) {
            Throwable cause = e.getCause() instanceof ExecutionException ? e.getCause().getCause() : e.getCause();
            return cause == null ? e.getClass().getSimpleName() : cause.getClass().getSimpleName();
        }
    }

    private static <T> T get(org.apache.kafka.common.KafkaFuture<T> future) {
        try {
            return future.get();
        } catch (InterruptedException | ExecutionException e) {
            throw new RuntimeException(e);
        }
    }

    private void topics(Admin admin) {
        get(admin.createTopics(List.of(
                new NewTopic(topic("in"), 2, (short) 1),
                new NewTopic(topic("out"), 1, (short) 1),
                new NewTopic(topic("idem"), 1, (short) 1),
                new NewTopic(topic("txn"), 1, (short) 1),
                new NewTopic(topic("hang"), 1, (short) 1))).all());
        var described = get(admin.describeTopics(List.of(topic("in"))).allTopicNames()).get(topic("in"));
        report("topics.in.partitions", described.partitions().size());
        report("topics.listed", get(admin.listTopics().names()).contains(topic("out")));
        report("topics.create_again", errorName(() -> get(admin.createTopics(
                List.of(new NewTopic(topic("in"), 1, (short) 1))).all())));
        report("topics.create_invalid", errorName(() -> get(admin.createTopics(
                List.of(new NewTopic("bad name!", 1, (short) 1))).all())));
    }

    private void configs(Admin admin) {
        ConfigResource resource = new ConfigResource(ConfigResource.Type.TOPIC, topic("in"));
        AlterConfigOp set = new AlterConfigOp(new ConfigEntry("retention.ms", "123456"), AlterConfigOp.OpType.SET);
        get(admin.incrementalAlterConfigs(Map.of(resource, List.of(set))).all());
        // Kafka applies a change when its metadata log reaches the broker, so a describe right after may still show
        // the old value there: read until the new one shows (or the deadline passes, reporting what was read).
        ConfigEntry entry = null;
        long deadline = System.currentTimeMillis() + DEADLINE_MS / 4;
        do {
            entry = get(admin.describeConfigs(List.of(resource)).all()).get(resource).get("retention.ms");
        } while (!"123456".equals(entry.value()) && System.currentTimeMillis() < deadline && pause());
        report("configs.retention_ms", entry.value());
        report("configs.retention_ms.source", entry.source());
    }

    private void idempotent() throws Exception {
        TopicPartition tp = new TopicPartition(topic("idem"), 0);
        long lastOffset = -1;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(null))) {
            List<java.util.concurrent.Future<RecordMetadata>> sent = new ArrayList<>();
            for (int i = 0; i < 200; i++) {
                sent.add(producer.send(new ProducerRecord<>(tp.topic(), 0, "k", "v" + i)));
            }
            for (var future : sent) {
                lastOffset = future.get().offset();
            }
        }
        report("idempotent.last_offset", lastOffset);
        List<String> values = readAll(tp, "read_uncommitted");
        List<String> expected = new ArrayList<>();
        for (int i = 0; i < 200; i++) {
            expected.add("v" + i);
        }
        report("idempotent.read", values.size());
        report("idempotent.in_order", values.equals(expected));
    }

    private void transactional(Admin admin) {
        TopicPartition tp = new TopicPartition(topic("txn"), 0);
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(topic("txn-id")))) {
            producer.initTransactions();
            producer.beginTransaction();
            for (int i = 0; i < 10; i++) {
                producer.send(new ProducerRecord<>(tp.topic(), "committed-" + i));
            }
            producer.commitTransaction();
            producer.beginTransaction();
            for (int i = 0; i < 5; i++) {
                producer.send(new ProducerRecord<>(tp.topic(), "aborted-" + i));
            }
            producer.flush();
            producer.abortTransaction();
        }
        List<String> committed = readAll(tp, "read_committed");
        report("txn.read_committed", committed.size());
        report("txn.read_committed.any_aborted", committed.stream().anyMatch(v -> v.startsWith("aborted")));
        report("txn.read_uncommitted", readAll(tp, "read_uncommitted").size());
        Collection<TransactionListing> listed = get(admin.listTransactions().all());
        report("txn.listed", listed.stream().anyMatch(l -> l.transactionalId().equals(topic("txn-id"))));
        TransactionDescription description =
                get(admin.describeTransactions(List.of(topic("txn-id"))).all()).get(topic("txn-id"));
        report("txn.described.state", description.state());
        report("txn.described.partitions", description.topicPartitions().size());
    }

    private void copier(Admin admin) throws Exception {
        String group = topic("copier");
        int records = 50;
        try (KafkaProducer<String, String> producer = new KafkaProducer<>(producerProps(null))) {
            for (int i = 0; i < records; i++) {
                producer.send(new ProducerRecord<>(topic("in"), i % 2, null, "in-" + i));
            }
        }
        int copied = 0;
        try (KafkaConsumer<String, String> consumer = new KafkaConsumer<>(consumerProps(group, "read_committed"));
                KafkaProducer<String, String> producer =
                        new KafkaProducer<>(producerProps(topic("copier-txn")))) {
            producer.initTransactions();
            consumer.subscribe(List.of(topic("in")));
            long deadline = System.currentTimeMillis() + DEADLINE_MS;
            while (copied < records && System.currentTimeMillis() < deadline) {
                var polled = consumer.poll(POLL);
                if (polled.isEmpty()) {
                    continue;
                }
                producer.beginTransaction();
                Map<TopicPartition, OffsetAndMetadata> next = new HashMap<>();
                for (ConsumerRecord<String, String> record : polled) {
                    producer.send(new ProducerRecord<>(topic("out"), record.value()));
                    next.put(new TopicPartition(record.topic(), record.partition()),
                            new OffsetAndMetadata(record.offset() + 1));
                    copied++;
                }
                producer.sendOffsetsToTransaction(next, consumer.groupMetadata());
                producer.commitTransaction();
            }
            ConsumerGroupDescription description =
                    get(admin.describeConsumerGroups(List.of(group)).all()).get(group);
            report("group.state", description.groupState());
            report("group.members", description.members().size());
            report("group.assigned_partitions",
                    description.members().stream().mapToInt(m -> m.assignment().topicPartitions().size()).sum());
        }
        report("copier.copied", copied);
        Map<TopicPartition, OffsetAndMetadata> offsets =
                get(admin.listConsumerGroupOffsets(group).partitionsToOffsetAndMetadata());
        report("group.committed_sum", offsets.values().stream().mapToLong(OffsetAndMetadata::offset).sum());
        report("group.listed", get(admin.listConsumerGroups().all()).stream()
                .anyMatch(g -> g.groupId().equals(group)));
        List<String> out = readAll(new TopicPartition(topic("out"), 0), "read_committed");
        report("copier.out", out.size());
        report("copier.out.distinct", Set.copyOf(out).size());
    }

    private void abortHanging(Admin admin) throws Exception {
        TopicPartition tp = new TopicPartition(topic("hang"), 0);
        KafkaProducer<String, String> hanging = new KafkaProducer<>(producerProps(topic("hang-id")));
        try {
            hanging.initTransactions();
            hanging.beginTransaction();
            hanging.send(new ProducerRecord<>(tp.topic(), 0, null, "hanging")).get();
            report("hang.lso_before", lastStableOffset(tp));
            ProducerState state = get(admin.describeProducers(List.of(tp)).all()).get(tp).activeProducers().get(0);
            report("hang.producer.txn_start", state.currentTransactionStartOffset().orElse(-1));
            AbortTransactionSpec spec = new AbortTransactionSpec(
                    tp, state.producerId(), (short) state.producerEpoch(), state.coordinatorEpoch().orElse(0));
            get(admin.abortTransaction(spec).all());
            report("hang.lso_after", lastStableOffset(tp));
            report("hang.read_committed", readAll(tp, "read_committed").size());
        } finally {
            hanging.close(Duration.ZERO);
        }
    }
}
