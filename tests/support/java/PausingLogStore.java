package deltakeeper.testing;

import io.delta.storage.HDFSLogStore;
import java.io.IOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.Paths;
import java.util.Iterator;
import org.apache.hadoop.conf.Configuration;

/**
 * A test-only Delta LogStore for file: tables that holds the first commit of its JVM at a gate.
 *
 * With `deltakeeper.test.gate` set to a folder (Hadoop conf, e.g. spark.hadoop.deltakeeper.test.gate),
 * the first write of a commit file `NNNNNNNNNNNNNNNNNNNN.json` creates `paused` in that folder and
 * waits until `go` appears there (at most five minutes), then commits as HDFSLogStore would. A
 * test uses the pause to commit a conflicting change at a known instant: after the transaction
 * read its snapshot and wrote its files, before its commit.
 */
public class PausingLogStore extends HDFSLogStore {
    private static final String GATE = "deltakeeper.test.gate";
    private static final long LIMIT_MS = 300_000L;

    public PausingLogStore(Configuration conf) {
        super(conf);
    }

    @Override
    public void write(org.apache.hadoop.fs.Path path, Iterator<String> actions, Boolean overwrite,
            Configuration conf) throws IOException {
        String gate = conf.get(GATE, initHadoopConf().get(GATE));
        if (gate != null && path.getName().matches("\\d{20}\\.json")) {
            pause(Paths.get(gate));
        }
        super.write(path, actions, overwrite, conf);
    }

    private static void pause(Path gate) throws IOException {
        try {
            Files.createFile(gate.resolve("paused"));
        } catch (FileAlreadyExistsException e) {
            return; // paused once already: later commits go straight through
        }
        long until = System.currentTimeMillis() + LIMIT_MS;
        while (!Files.exists(gate.resolve("go"))) {
            if (System.currentTimeMillis() > until) {
                throw new IOException("PausingLogStore: no 'go' in " + gate + " within 5 minutes");
            }
            try {
                Thread.sleep(20);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new IOException("PausingLogStore: interrupted at the gate", e);
            }
        }
    }
}
