// Prints every error of the Kafka client library on the classpath, one per line: <code>\t<NAME>.
// Run by codec/gen/import_schema.py as a single-file program: java -cp kafka-clients-<v>.jar ListErrors.java
import org.apache.kafka.common.protocol.Errors;

public class ListErrors {
    public static void main(String[] args) {
        for (Errors e : Errors.values()) {
            System.out.println(e.code() + "\t" + e.name());
        }
    }
}
