package dev.streamjoin.bench;

import com.fasterxml.jackson.databind.JsonNode;
import com.fasterxml.jackson.databind.ObjectMapper;
import java.io.ByteArrayOutputStream;
import java.io.IOException;
import java.net.URI;
import java.net.URLEncoder;
import java.net.http.HttpClient;
import java.net.http.HttpRequest;
import java.net.http.HttpResponse;
import java.nio.ByteBuffer;
import java.nio.charset.StandardCharsets;
import java.time.Duration;
import java.util.Map;
import java.util.concurrent.ConcurrentHashMap;
import org.apache.avro.Schema;
import org.apache.avro.generic.GenericDatumReader;
import org.apache.avro.generic.GenericDatumWriter;
import org.apache.avro.generic.GenericRecord;
import org.apache.avro.io.BinaryDecoder;
import org.apache.avro.io.BinaryEncoder;
import org.apache.avro.io.DecoderFactory;
import org.apache.avro.io.EncoderFactory;
import org.apache.kafka.common.errors.SerializationException;
import org.apache.kafka.common.serialization.Deserializer;
import org.apache.kafka.common.serialization.Serde;
import org.apache.kafka.common.serialization.Serializer;

/**
 * Avro values in Confluent's wire format (magic byte 0, the writer schema's 4-byte id, the binary payload)
 * through a Confluent-compatible registry, as Confluent's {@code GenericAvroSerde} reads and writes them
 * (which the Maven repository reached here does not serve). A record is read with the writer schema of its
 * id, fetched once per id ({@code GET /schemas/ids/{id}}); a record is written with its own schema: the id it was
 * read with (a source table's store writes its records again), else registered under {@code <topic>-value} at
 * the topic's first record ({@code POST /subjects/{subject}/versions}).
 */
final class RegistryAvroSerde implements Serde<GenericRecord> {
    private static final byte MAGIC = 0;
    private static final int HEADER = 5;

    private final Registry registry;
    private final Map<Integer, GenericDatumReader<GenericRecord>> readers = new ConcurrentHashMap<>();
    private final Map<Schema, GenericDatumWriter<GenericRecord>> writers = new ConcurrentHashMap<>();
    private final Map<String, Integer> ids = new ConcurrentHashMap<>();

    RegistryAvroSerde(String url) {
        this.registry = new Registry(url);
    }

    @Override
    public Serializer<GenericRecord> serializer() {
        return this::serialize;
    }

    @Override
    public Deserializer<GenericRecord> deserializer() {
        return this::deserialize;
    }

    GenericRecord deserialize(String topic, byte[] data) {
        if (data == null) {
            return null;
        }
        if (data.length < HEADER || data[0] != MAGIC) {
            throw new SerializationException("a value on " + topic + " is not in the Confluent wire format");
        }
        int id = ByteBuffer.wrap(data, 1, 4).getInt();
        GenericDatumReader<GenericRecord> reader = readers.computeIfAbsent(id, i -> new GenericDatumReader<>(registry.schema(i)));
        BinaryDecoder decoder = DecoderFactory.get().binaryDecoder(data, HEADER, data.length - HEADER, null);
        try {
            return reader.read(null, decoder);
        } catch (IOException | RuntimeException e) {
            throw new SerializationException("a value on " + topic + " does not decode with schema id " + id, e);
        }
    }

    byte[] serialize(String topic, GenericRecord record) {
        if (record == null) {
            return null;
        }
        Schema schema = record.getSchema();
        Integer known = registry.known(schema);
        int id = known != null ? known : ids.computeIfAbsent(topic, t -> registry.register(t + "-value", schema));
        ByteArrayOutputStream out = new ByteArrayOutputStream(32);
        out.write(MAGIC);
        out.writeBytes(ByteBuffer.allocate(4).putInt(id).array());
        BinaryEncoder encoder = EncoderFactory.get().directBinaryEncoder(out, null);
        try {
            writers.computeIfAbsent(schema, GenericDatumWriter::new).write(record, encoder);
            encoder.flush();
        } catch (IOException e) {
            throw new SerializationException("a value for " + topic + " does not encode", e);
        }
        return out.toByteArray();
    }

    /** The registry's Confluent API: a schema by id, a schema registered under a subject. */
    static final class Registry {
        private static final ObjectMapper JSON = new ObjectMapper();
        private final String url;
        private final HttpClient http = HttpClient.newBuilder().connectTimeout(Duration.ofSeconds(10)).build();
        private final Map<Integer, Schema> schemas = new ConcurrentHashMap<>();
        private final Map<Schema, Integer> fetched = new ConcurrentHashMap<>();

        Registry(String url) {
            this.url = url.replaceAll("/+$", "");
        }

        Schema schema(int id) {
            return schemas.computeIfAbsent(id, i -> {
                Schema schema = new Schema.Parser().parse(call("GET", "/schemas/ids/" + i, null).get("schema").asText());
                fetched.putIfAbsent(schema, i);
                return schema;
            });
        }

        /** The id of a schema fetched by id (a record read is written again with it), else null. */
        Integer known(Schema schema) {
            return fetched.get(schema);
        }

        int register(String subject, Schema schema) {
            String body = JSON.createObjectNode().put("schema", schema.toString()).toString();
            String path = "/subjects/" + URLEncoder.encode(subject, StandardCharsets.UTF_8) + "/versions";
            return call("POST", path, body).get("id").asInt();
        }

        private JsonNode call(String method, String path, String body) {
            HttpRequest.Builder request = HttpRequest.newBuilder(URI.create(url + path)).timeout(Duration.ofSeconds(30))
                    .header("Accept", "application/vnd.schemaregistry.v1+json, application/json");
            if (body != null) {
                request.header("Content-Type", "application/vnd.schemaregistry.v1+json")
                        .method(method, HttpRequest.BodyPublishers.ofString(body));
            } else {
                request.method(method, HttpRequest.BodyPublishers.noBody());
            }
            try {
                HttpResponse<String> response = http.send(request.build(), HttpResponse.BodyHandlers.ofString());
                if (response.statusCode() != 200) {
                    throw new SerializationException(method + " " + url + path + ": HTTP " + response.statusCode() + ": " + response.body());
                }
                return JSON.readTree(response.body());
            } catch (IOException e) {
                throw new SerializationException(method + " " + url + path + ": " + e, e);
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
                throw new SerializationException(method + " " + url + path + " interrupted", e);
            }
        }
    }
}
