package dev.streamjoin.kernel;

import java.io.BufferedOutputStream;
import java.io.File;
import java.io.IOException;
import java.io.OutputStream;
import java.io.UncheckedIOException;
import java.nio.file.FileAlreadyExistsException;
import java.nio.file.Files;
import java.nio.file.StandardCopyOption;
import java.util.UUID;

import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.fs.Path;
import org.apache.spark.sql.execution.streaming.checkpointing.CheckpointFileManager;
import org.apache.spark.sql.execution.streaming.checkpointing.FileSystemBasedCheckpointFileManager;

/**
 * The state stores' file manager on a local filesystem ({@code file:} checkpoints): each changelog a store opens
 * and commits is written to a temporary file and renamed into place with {@code java.nio}, atomically (POSIX
 * rename). Hadoop's local filesystem without its native library forks a process ({@code readlink}, {@code chmod})
 * for each rename and create: about 40 ms per changelog, twice per task and batch, most of a small batch's time.
 * Everything else (listing, reading, deleting, snapshots) is Spark's {@link FileSystemBasedCheckpointFileManager}.
 */
public final class LocalCheckpointFiles extends FileSystemBasedCheckpointFileManager {
    /** Spark's key for the file manager class, read from the Hadoop configuration the stores get. */
    static final String CONF = "spark.sql.streaming.checkpointFileManagerClass";

    /** Spark creates it by this constructor ({@code CheckpointFileManager.create}). */
    public LocalCheckpointFiles(Path path, Configuration conf) {
        super(path, conf);
    }

    /** Whether {@code root} (a checkpoint URI) is on the local filesystem, where this manager applies. */
    static boolean applies(String root) {
        String scheme = new Path(root).toUri().getScheme();
        return scheme == null || scheme.equals("file");
    }

    @Override
    public CheckpointFileManager.CancellableFSDataOutputStream createAtomic(Path path, boolean overwriteIfPossible) {
        java.nio.file.Path target = new File(path.toUri().getPath()).toPath();
        java.nio.file.Path temp = target.resolveSibling("." + target.getFileName() + "." + UUID.randomUUID() + ".tmp");
        try {
            Files.createDirectories(target.getParent());
            return new Atomic(new BufferedOutputStream(Files.newOutputStream(temp), 64 * 1024), temp, target,
                    overwriteIfPossible);
        } catch (IOException e) {
            throw new UncheckedIOException("cannot create " + temp, e);
        }
    }

    /** A file written beside its target and renamed onto it when closed; {@link #cancel} drops it. */
    private static final class Atomic extends CheckpointFileManager.CancellableFSDataOutputStream {
        private final java.nio.file.Path temp;
        private final java.nio.file.Path target;
        private final boolean overwrite;
        private boolean done;

        Atomic(OutputStream out, java.nio.file.Path temp, java.nio.file.Path target, boolean overwrite) {
            super(out);
            this.temp = temp;
            this.target = target;
            this.overwrite = overwrite;
        }

        @Override
        public synchronized void close() throws IOException {
            if (done) {
                return;
            }
            done = true;
            try {
                super.close();
                if (!overwrite && Files.exists(target)) {
                    throw new FileAlreadyExistsException(target.toString());
                }
                Files.move(temp, target, StandardCopyOption.ATOMIC_MOVE);
            } finally {
                Files.deleteIfExists(temp);
            }
        }

        @Override
        public synchronized void cancel() {
            if (done) {
                return;
            }
            done = true;
            try {
                super.close();
            } catch (IOException e) {
                // the file is dropped either way
            }
            try {
                Files.deleteIfExists(temp);
            } catch (IOException e) {
                // a leftover temporary file is ignored by readers (not a changelog's name)
            }
        }
    }
}
