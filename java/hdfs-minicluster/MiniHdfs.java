// A real HDFS on loopback for tests: Hadoop's MiniDFSCluster with one DataNode.
// Run without a build step: java -cp ".local/jars/hdfs/*" MiniHdfs.java <base dir> <namenode port>
// Writes <base dir>/ready (the cluster's URI) once it serves, then runs until killed.
import java.nio.file.Files;
import java.nio.file.Paths;
import org.apache.hadoop.conf.Configuration;
import org.apache.hadoop.hdfs.MiniDFSCluster;

public class MiniHdfs {
    public static void main(String[] args) throws Exception {
        String base = args[0];
        int nameNodePort = Integer.parseInt(args[1]);
        Configuration conf = new Configuration();
        conf.set(MiniDFSCluster.HDFS_MINIDFS_BASEDIR, base);
        conf.set("dfs.permissions.enabled", "false");
        conf.set("dfs.namenode.http-address", "127.0.0.1:0");
        conf.set("dfs.datanode.address", "127.0.0.1:0");
        conf.set("dfs.datanode.http.address", "127.0.0.1:0");
        conf.set("dfs.datanode.ipc.address", "127.0.0.1:0");
        MiniDFSCluster cluster = new MiniDFSCluster.Builder(conf)
            .nameNodePort(nameNodePort).numDataNodes(1).format(true).build();
        cluster.waitActive();
        Files.writeString(Paths.get(base, "ready"), cluster.getURI().toString());
        System.out.println("ready " + cluster.getURI());
        Runtime.getRuntime().addShutdownHook(new Thread(cluster::shutdown));
        Thread.currentThread().join();
    }
}
