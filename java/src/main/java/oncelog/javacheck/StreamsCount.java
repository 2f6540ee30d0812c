package oncelog.javacheck;

import java.util.Properties;
import java.util.concurrent.CountDownLatch;
import org.apache.kafka.clients.consumer.ConsumerConfig;
import org.apache.kafka.clients.producer.ProducerConfig;
import org.apache.kafka.common.serialization.Serdes;
import org.apache.kafka.streams.KafkaStreams;
import org.apache.kafka.streams.StreamsBuilder;
import org.apache.kafka.streams.StreamsConfig;
import org.apache.kafka.streams.errors.StreamsUncaughtExceptionHandler;
import org.apache.kafka.streams.kstream.Consumed;
import org.apache.kafka.streams.kstream.Materialized;
import org.apache.kafka.streams.kstream.Produced;

/**
 * A Kafka Streams application with {@code processing.guarantee=exactly_once_v2}: a stateful count per key of the
 * input topic (a persistent store backed by a changelog topic), each new count written to the output topic.
 *
 * <p>Usage: {@code StreamsCount BOOTSTRAP APPLICATION_ID INPUT OUTPUT STATE_DIR DELAY_MS}. The record cache is off,
 * so every input record yields one output record (key, its count so far); DELAY_MS slows each record so that a test
 * can kill the broker or this application while records are in flight. It runs until SIGTERM; a stream thread that dies is replaced, so
 * the application recovers from the broker's restart by itself. It prints its state changes on stdout
 * ({@code state<TAB>NEW}); the pytest driver (tests/interop/test_kafka_streams.py) checks the output topic.
 */
public final class StreamsCount {
    private StreamsCount() {}

    public static void main(String[] args) throws Exception {
        String bootstrap = args[0];
        String input = args[2];
        String output = args[3];
        long delayMs = Long.parseLong(args[5]);

        Properties props = new Properties();
        props.put(StreamsConfig.BOOTSTRAP_SERVERS_CONFIG, bootstrap);
        props.put(StreamsConfig.APPLICATION_ID_CONFIG, args[1]);
        props.put(StreamsConfig.STATE_DIR_CONFIG, args[4]);
        props.put(StreamsConfig.PROCESSING_GUARANTEE_CONFIG, StreamsConfig.EXACTLY_ONCE_V2);
        props.put(StreamsConfig.REPLICATION_FACTOR_CONFIG, 1);
        props.put(StreamsConfig.STATESTORE_CACHE_MAX_BYTES_CONFIG, 0L); // one output record per input record
        props.put(StreamsConfig.COMMIT_INTERVAL_MS_CONFIG, 200);
        props.put(StreamsConfig.NUM_STREAM_THREADS_CONFIG, 1);
        // Short timeouts, so that losing the broker is noticed and recovered from within a test's time.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.SESSION_TIMEOUT_MS_CONFIG), 10_000);
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.HEARTBEAT_INTERVAL_MS_CONFIG), 1_000);
        // A killed instance's open transaction blocks read_committed readers until its successor fences it (same
        // transactional id) or, at worst, until this timeout aborts it.
        props.put(StreamsConfig.producerPrefix(ProducerConfig.TRANSACTION_TIMEOUT_CONFIG), 10_000);
        // Static membership: a restarted instance takes its predecessor's place at once instead of waiting for
        // the session timeout of the member that died.
        props.put(StreamsConfig.consumerPrefix(ConsumerConfig.GROUP_INSTANCE_ID_CONFIG), args[1] + "-instance");
        props.put(StreamsConfig.producerPrefix(ProducerConfig.DELIVERY_TIMEOUT_MS_CONFIG), 60_000);
        props.put(StreamsConfig.producerPrefix(ProducerConfig.MAX_BLOCK_MS_CONFIG), 60_000);
        props.put(StreamsConfig.TASK_TIMEOUT_MS_CONFIG, 120_000L);

        StreamsBuilder builder = new StreamsBuilder();
        builder.stream(input, Consumed.with(Serdes.String(), Serdes.String()))
                .peek((key, value) -> pause(delayMs))
                .groupByKey()
                .count(Materialized.as("counts"))
                .toStream()
                .to(output, Produced.with(Serdes.String(), Serdes.Long()));

        KafkaStreams streams = new KafkaStreams(builder.build(), props);
        CountDownLatch stopped = new CountDownLatch(1);
        streams.setStateListener((now, before) -> {
            System.out.println("state\t" + now);
            System.out.flush();
        });
        streams.setUncaughtExceptionHandler(error -> {
            System.out.println("thread_error\t" + error);
            System.out.flush();
            return StreamsUncaughtExceptionHandler.StreamThreadExceptionResponse.REPLACE_THREAD;
        });
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            streams.close();
            stopped.countDown();
        }));
        streams.start();
        stopped.await();
    }

    private static void pause(long delayMs) {
        if (delayMs <= 0) {
            return;
        }
        try {
            Thread.sleep(delayMs);
        } catch (InterruptedException interrupted) {
            Thread.currentThread().interrupt();
        }
    }
}
