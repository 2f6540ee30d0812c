package oncelog.javacheck;

import java.io.ByteArrayInputStream;
import java.io.ByteArrayOutputStream;
import java.io.InputStream;
import java.io.PrintStream;
import java.lang.reflect.InvocationTargetException;
import java.lang.reflect.Method;
import java.nio.charset.StandardCharsets;
import java.nio.file.Files;
import java.nio.file.Path;
import java.util.ArrayList;
import java.util.Arrays;
import java.util.List;
import org.apache.kafka.common.utils.Exit;

/**
 * Runs several of Kafka's command-line tools, one after another, in one JVM: each is the {@code main} of the class
 * its {@code bin/kafka-*.sh} script names, so a batch costs one JVM start instead of one per command.
 *
 * <p>Usage: {@code ToolBatch FILE}. Each line of FILE is one command, tab-separated: a label, the main class, its
 * arguments; an argument {@code stdin=TEXT} (with {@code \n} for line breaks) is fed to the tool as standard input
 * instead. For each command this prints {@code #### LABEL exit=CODE}, the tool's standard output, then
 * {@code #### LABEL stderr} and its standard error. A tool's {@code Exit.exit} ends that tool only (its exit code is
 * reported) and cuts its output where it asked to exit, as the script's JVM would end there: a tool that catches
 * the unwinding exception (some catch every Throwable around their body) cannot change the outcome.
 */
public final class ToolBatch {
    /** Thrown in place of exiting the JVM; carries the tool's exit code. */
    private static final class ToolExit extends RuntimeException {
        final int code;

        ToolExit(int code) {
            super(null, null, false, false);
            this.code = code;
        }
    }

    /** The running tool's first exit: its code and how much it had written by then (null: none yet). */
    private static int[] firstExit;

    private static ByteArrayOutputStream toolOut;
    private static ByteArrayOutputStream toolErr;

    private static void exit(int code) {
        if (firstExit == null) {
            System.out.flush();
            System.err.flush();
            firstExit = new int[] {code, toolOut.size(), toolErr.size()};
        }
        throw new ToolExit(code);
    }

    private static String upTo(ByteArrayOutputStream buffer, int size) {
        byte[] bytes = buffer.toByteArray();
        return new String(bytes, 0, Math.min(size, bytes.length), StandardCharsets.UTF_8);
    }

    public static void main(String[] args) throws Exception {
        Exit.setExitProcedure((code, message) -> exit(code));
        Exit.setHaltProcedure((code, message) -> exit(code));
        Exit.setShutdownHookAdder((name, runnable) -> { }); // a tool's hook would outlive the tool
        PrintStream out = System.out;
        InputStream in = System.in;
        PrintStream err = System.err;
        for (String line : Files.readAllLines(Path.of(args[0]), StandardCharsets.UTF_8)) {
            if (line.isBlank()) {
                continue;
            }
            List<String> fields = new ArrayList<>(Arrays.asList(line.split("\t", -1)));
            String label = fields.remove(0);
            String mainClass = fields.remove(0);
            String stdin = "";
            List<String> toolArgs = new ArrayList<>();
            for (String field : fields) {
                if (field.startsWith("stdin=")) {
                    stdin = field.substring("stdin=".length()).replace("\\n", "\n");
                } else {
                    toolArgs.add(field);
                }
            }
            toolOut = new ByteArrayOutputStream();
            toolErr = new ByteArrayOutputStream();
            firstExit = null;
            int code = 0;
            System.setIn(new ByteArrayInputStream(stdin.getBytes(StandardCharsets.UTF_8)));
            System.setOut(new PrintStream(toolOut, true, StandardCharsets.UTF_8));
            System.setErr(new PrintStream(toolErr, true, StandardCharsets.UTF_8));
            try {
                Method toolMain = Class.forName(mainClass).getMethod("main", String[].class);
                toolMain.invoke(null, (Object) toolArgs.toArray(new String[0]));
            } catch (InvocationTargetException e) {
                if (!(e.getCause() instanceof ToolExit)) {
                    e.getCause().printStackTrace(); // what an uncaught exception prints; the JVM exits 1
                    code = 1;
                }
            } finally {
                System.out.flush();
                System.err.flush();
                System.setIn(in);
                System.setOut(out);
                System.setErr(err);
            }
            String stdout = toolOut.toString(StandardCharsets.UTF_8);
            String stderr = toolErr.toString(StandardCharsets.UTF_8);
            if (firstExit != null) {
                code = firstExit[0];
                stdout = upTo(toolOut, firstExit[1]);
                stderr = upTo(toolErr, firstExit[2]);
            }
            out.println("#### " + label + " exit=" + code);
            out.print(stdout);
            out.println("#### " + label + " stderr");
            out.print(stderr);
            out.flush();
        }
        out.println("#### end");
        out.flush();
        System.exit(0); // tools may leave non-daemon threads behind
    }
}
